package validation

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/mail"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var statusPath = field.NewPath("status")

// validatePodCertificateRequestUpdate: the spec never changes; the status
// changes once, from pending to Issued, Denied or Failed. A write to the
// main resource keeps the stored status and a write to /status the stored
// spec, so comparing both with the stored object covers either path.
func validatePodCertificateRequestUpdate(r, old *certificatesv1.PodCertificateRequest) field.ErrorList {
	errs := validateMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, immutable(r.Spec, old.Spec, specPath)...)
	if len(errs) > 0 || semanticEqual(r.Status, old.Status) {
		return errs
	}
	return validatePodCertificateRequestStatus(r, old, time.Now())
}

// pcrCondition returns the terminal condition (Issued, Denied, Failed)
// that is true, or "".
func pcrCondition(r *certificatesv1.PodCertificateRequest) string {
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			if c.Status == metav1.ConditionTrue {
				return c.Type
			}
		}
	}
	return ""
}

func validatePodCertificateRequestStatus(r, old *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	var errs field.ErrorList
	condPath := statusPath.Child("conditions")
	known := 0
	terminal := []string{certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed}
	for i, c := range r.Status.Conditions {
		switch c.Type {
		case terminal[0], terminal[1], terminal[2]:
			known++
			if known > 1 {
				errs = append(errs, field.Invalid(condPath.Index(i).Child("type"), c.Type, `There may be at most one condition with type "Issued", "Denied", or "Failed"`))
			}
			if c.Status != metav1.ConditionTrue {
				errs = append(errs, field.NotSupported(condPath.Index(i).Child("status"), c.Status, []metav1.ConditionStatus{metav1.ConditionTrue}))
			}
		default:
			errs = append(errs, field.NotSupported(condPath.Index(i).Child("type"), c.Type, terminal))
		}
	}
	errs = append(errs, metavalidation.ValidateConditions(r.Status.Conditions, condPath)...)
	if len(errs) > 0 {
		return errs
	}
	if pcrCondition(old) != "" {
		return field.ErrorList{field.Invalid(statusPath, field.OmitValueType{}, "immutable after PodCertificateRequest is issued, denied, or failed")}
	}
	switch pcrCondition(r) {
	case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
		if !semanticEqual(r.Status, certificatesv1.PodCertificateRequestStatus{Conditions: r.Status.Conditions}) {
			return field.ErrorList{field.Invalid(statusPath, field.OmitValueType{}, "non-condition status fields must be empty when denying or failing the PodCertificateRequest")}
		}
		return nil
	case certificatesv1.PodCertificateRequestConditionTypeIssued:
		return validateIssuedStatus(r, old, now)
	}
	return field.ErrorList{field.Invalid(statusPath, field.OmitValueType{}, `status is immutable unless transitioning to "Issued", "Denied", or "Failed"`)}
}

// validateIssuedStatus checks an issued certificate against the request:
// issued to the requested key, its times mirrored in the status, a
// lifetime within [1h, maxExpirationSeconds] and a refresh time the
// kubelet can act on.
func validateIssuedStatus(r, old *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	st := r.Status
	chain := st.CertificateChain
	if len(chain) > maxCertificateChainSize {
		return field.ErrorList{field.TooLong(certChainPath, "", maxCertificateChainSize)}
	}
	leafBlock, rest := pem.Decode([]byte(chain))
	if leafBlock == nil {
		return field.ErrorList{field.Invalid(certChainPath, chain, "issued certificate chain must contain at least one certificate")}
	}
	if leafBlock.Type != "CERTIFICATE" {
		return field.ErrorList{field.Invalid(certChainPath, chain, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")}
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return field.ErrorList{field.Invalid(certChainPath, chain, "leaf certificate does not parse as valid X.509")}
	}
	errs := validateLeafNames(leaf)
	req, err := x509.ParseCertificateRequest(old.Spec.StubPKCS10Request)
	if err != nil {
		return append(errs, field.Invalid(stubRequestPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR"))
	}
	if pub, ok := req.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return append(errs, field.Invalid(certChainPath, chain, "leaf certificate was not issued to the requested public key"))
	}
	notBeforePath, notAfterPath, refreshPath := statusPath.Child("notBefore"), statusPath.Child("notAfter"), statusPath.Child("beginRefreshAt")
	if st.NotBefore == nil {
		errs = append(errs, field.Required(notBeforePath, "must be present and consistent with the issued certificate"))
	}
	if st.NotAfter == nil {
		errs = append(errs, field.Required(notAfterPath, "must be present and consistent with the issued certificate"))
	}
	if st.BeginRefreshAt == nil {
		errs = append(errs, field.Required(refreshPath, "must be present and in the range [notbefore+10min, notafter-10min]"))
	}
	if len(errs) > 0 {
		return errs
	}
	nb, na, refresh := st.NotBefore.Time, st.NotAfter.Time, st.BeginRefreshAt.Time
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	switch {
	case !nb.Equal(leaf.NotBefore):
		return field.ErrorList{field.Invalid(notBeforePath, nb, "must be set to the NotBefore time encoded in the leaf certificate")}
	case !(nb.After(now.Add(-5*time.Minute)) && nb.Before(now.Add(5*time.Minute))):
		return field.ErrorList{field.Invalid(notBeforePath, nb, "must be set to within 5 minutes of kube-apiserver's current time")}
	case !na.Equal(leaf.NotAfter):
		return field.ErrorList{field.Invalid(notAfterPath, na, "must be set to the NotAfter time encoded in the leaf certificate")}
	case lifetime < time.Hour:
		return field.ErrorList{field.Invalid(certChainPath, lifetime, "leaf certificate lifetime must be >= 1 hour")}
	case r.Spec.MaxExpirationSeconds != nil && lifetime > time.Duration(*r.Spec.MaxExpirationSeconds)*time.Second:
		return field.ErrorList{field.Invalid(certChainPath, lifetime, fmt.Sprintf("leaf certificate lifetime must be <= spec.maxExpirationSeconds (%v)", *r.Spec.MaxExpirationSeconds))}
	case refresh.Before(nb.Add(10 * time.Minute)):
		return field.ErrorList{field.Invalid(refreshPath, refresh, "must be at least 10 minutes after status.notBefore")}
	case refresh.After(na.Add(-10 * time.Minute)):
		return field.ErrorList{field.Invalid(refreshPath, refresh, "must be at least 10 minutes before status.notAfter")}
	}
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil
		}
		if b.Type != "CERTIFICATE" {
			return field.ErrorList{field.Invalid(certChainPath, chain, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")}
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return field.ErrorList{field.Invalid(certChainPath, chain, "intermediate certificate does not parse as valid X.509")}
		}
	}
}

// validateLeafNames refuses DNS names and addresses clients would
// mis-match against.
func validateLeafNames(leaf *x509.Certificate) field.ErrorList {
	var errs field.ErrorList
	for _, n := range leaf.DNSNames {
		if n == "" {
			errs = append(errs, field.Invalid(certChainPath, n, "leaf certificate should not contain empty DNSName"))
		}
		if strings.Contains(n, "..") {
			errs = append(errs, field.Invalid(certChainPath, n, "leaf certificate's DNSName should not contain '..'"))
		}
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".") {
			errs = append(errs, field.Invalid(certChainPath, n, "leaf certificate's DNSName should not start or end with '.'"))
		}
	}
	for _, e := range leaf.EmailAddresses {
		if _, err := mail.ParseAddress(e); err != nil {
			errs = append(errs, field.Invalid(certChainPath, e, "leaf certificate should not contain invalid EmailAddress"))
		}
	}
	return errs
}
