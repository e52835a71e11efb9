package validation

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of upstream's certificates API.
const (
	maxTrustBundleSize       = 1 << 20
	maxStubPKCS10RequestSize = 10 * 1024
	maxCertificateChainSize  = 100 * 1024
	podUIDMaxLength          = 128

	// MinPodCertificateSeconds and MaxPodCertificateSeconds bound the
	// lifetime a pod may ask of a signer (1 hour, 91 days);
	// KubernetesMaxPodCertificateSeconds bounds it for kubernetes.io
	// signers (24 hours).
	MinPodCertificateSeconds           = 3600
	MaxPodCertificateSeconds           = 91 * 24 * 3600
	KubernetesMaxPodCertificateSeconds = 24 * 3600
)

var (
	stubRequestPath = specPath.Child("stubPKCS10Request")
	certChainPath   = field.NewPath("status", "certificateChain")
)

// validateCertExtraKind validates the kinds of certificates.k8s.io/v1 ClusterTrustBundle and PodCertificateRequest.
func validateCertExtraKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *certificatesv1.ClusterTrustBundle:
		return validateClusterTrustBundle(o, true), true
	case *certificatesv1.PodCertificateRequest:
		return validatePodCertificateRequest(o), true
	}
	return nil, false
}

// updateCertExtraKind validates updates of the kinds of certificates.k8s.io/v1 ClusterTrustBundle and PodCertificateRequest.
func updateCertExtraKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *certificatesv1.ClusterTrustBundle:
		prev := old.(*certificatesv1.ClusterTrustBundle)
		// An unchanged bundle is not parsed again, so that a stricter
		// parser in a newer release cannot make stored objects read-only.
		errs := validateClusterTrustBundle(o, o.Spec.TrustBundle != prev.Spec.TrustBundle)
		errs = append(errs, validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta)...)
		return append(errs, immutable(o.Spec.SignerName, prev.Spec.SignerName, specPath.Child("signerName"))...), true
	case *certificatesv1.PodCertificateRequest:
		return validatePodCertificateRequestUpdate(o, old.(*certificatesv1.PodCertificateRequest)), true
	}
	return nil, false
}

// ClusterTrustBundleName is upstream's name rule: a bundle of a signer is
// named "<signer with / as :>:<name>", so that RBAC on names can follow
// signers; a bundle of no signer has no ":" at all.
func ClusterTrustBundleName(signerName string) apivalidation.ValidateNameFunc {
	return func(name string, prefix bool) []string {
		if signerName == "" {
			if strings.Contains(name, ":") {
				return []string{`ClusterTrustBundle without signer name must not have ":" in its name`}
			}
			return apivalidation.NameIsDNSSubdomain(name, prefix)
		}
		want := strings.ReplaceAll(signerName, "/", ":") + ":"
		if !strings.HasPrefix(name, want) {
			return []string{fmt.Sprintf("ClusterTrustBundle for signerName %s must be named with prefix %s", signerName, want)}
		}
		return apivalidation.NameIsDNSSubdomain(strings.TrimPrefix(name, want), prefix)
	}
}

func validateClusterTrustBundle(b *certificatesv1.ClusterTrustBundle, parseBundle bool) field.ErrorList {
	errs := validateMeta(&b.ObjectMeta, false, ClusterTrustBundleName(b.Spec.SignerName))
	if b.Spec.SignerName != "" {
		errs = append(errs, validateSignerName(b.Spec.SignerName, specPath.Child("signerName"))...)
	}
	if parseBundle {
		errs = append(errs, validateTrustBundle(b.Spec.TrustBundle, specPath.Child("trustBundle"))...)
	}
	return errs
}

// validateTrustBundle accepts only header-less CERTIFICATE blocks of CA
// certificates, at least one and none twice: kubelets concatenate bundles
// into pods' trust stores, so anything else would end up trusted or break
// the readers.
func validateTrustBundle(in string, fldPath *field.Path) field.ErrorList {
	if len(in) > maxTrustBundleSize {
		return field.ErrorList{field.TooLong(fldPath, "", maxTrustBundleSize)}
	}
	var errs field.ErrorList
	seen := map[string][]int{}
	rest := []byte(in)
	for i := 0; ; i++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		bad := func(format string, args ...any) {
			errs = append(errs, field.Invalid(fldPath, "<value omitted>", fmt.Sprintf("entry %d ", i)+fmt.Sprintf(format, args...)))
		}
		if b.Type != "CERTIFICATE" {
			bad("has bad block type: %v", b.Type)
			continue
		}
		if len(b.Headers) != 0 {
			bad("has PEM block headers")
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		switch {
		case err != nil:
			bad("does not parse as X.509")
		case !cert.IsCA:
			bad("does not have the CA bit set")
		case !cert.BasicConstraintsValid:
			bad("has invalid basic constraints")
		default:
			seen[string(b.Bytes)] = append(seen[string(b.Bytes)], i)
		}
	}
	if len(errs) != 0 {
		return errs
	}
	if len(seen) == 0 {
		return field.ErrorList{field.Invalid(fldPath, "<value omitted>", "at least one trust anchor must be provided")}
	}
	var dups [][]int
	for _, idx := range seen {
		if len(idx) > 1 {
			dups = append(dups, idx)
		}
	}
	sort.Slice(dups, func(i, j int) bool { return dups[i][0] < dups[j][0] })
	for _, idx := range dups {
		errs = append(errs, field.Invalid(fldPath, "<value omitted>", fmt.Sprintf("duplicate trust anchor (indices %v)", idx)))
	}
	return errs
}

// IsKubernetesSignerName reports a signer reserved to the Kubernetes
// project (kubernetes.io and its subdomains).
func IsKubernetesSignerName(signerName string) bool {
	host, _, _ := strings.Cut(signerName, "/")
	return host == "kubernetes.io" || strings.HasSuffix(host, ".kubernetes.io")
}

// validateUserAnnotations: pod certificate annotations go to a signer,
// which must know whose keys they are, so every key is domain-prefixed.
func validateUserAnnotations(a map[string]string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		errs = append(errs, utilvalidation.IsDomainPrefixedKey(fldPath, strings.ToLower(k))...)
	}
	if err := apivalidation.ValidateAnnotationsSize(a); err != nil {
		errs = append(errs, field.TooLong(fldPath, "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

func validatePodCertificateRequest(r *certificatesv1.PodCertificateRequest) field.ErrorList {
	errs := validateMeta(&r.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateSignerName(r.Spec.SignerName, specPath.Child("signerName"))...)
	if r.Spec.UnverifiedUserAnnotations != nil {
		errs = append(errs, validateUserAnnotations(r.Spec.UnverifiedUserAnnotations, specPath.Child("unverifiedUserAnnotations"))...)
	}
	errs = append(errs, nameMessages(specPath.Child("podName"), r.Spec.PodName, apivalidation.NameIsDNSSubdomain)...)
	errs = append(errs, nameMessages(specPath.Child("serviceAccountName"), r.Spec.ServiceAccountName, apivalidation.ValidateServiceAccountName)...)
	errs = append(errs, nameMessages(specPath.Child("nodeName"), string(r.Spec.NodeName), apivalidation.NameIsDNSSubdomain)...)
	for _, u := range []struct {
		name, value string
	}{{"podUID", string(r.Spec.PodUID)}, {"serviceAccountUID", string(r.Spec.ServiceAccountUID)}, {"nodeUID", string(r.Spec.NodeUID)}} {
		switch {
		case u.value == "":
			errs = append(errs, field.Invalid(specPath.Child(u.name), u.value, "must not be empty"))
		case len(u.value) > podUIDMaxLength:
			errs = append(errs, field.TooLong(specPath.Child(u.name), u.value, podUIDMaxLength))
		}
	}
	maxPath := specPath.Child("maxExpirationSeconds")
	if r.Spec.MaxExpirationSeconds == nil {
		return append(errs, field.Required(maxPath, "must be set"))
	}
	hi := int32(MaxPodCertificateSeconds)
	if IsKubernetesSignerName(r.Spec.SignerName) {
		hi = KubernetesMaxPodCertificateSeconds
	}
	if v := *r.Spec.MaxExpirationSeconds; v < MinPodCertificateSeconds || v > hi {
		errs = append(errs, field.Invalid(maxPath, v, fmt.Sprintf("must be in the range [%d, %d]", MinPodCertificateSeconds, hi)))
	}
	return append(errs, validateStubPKCS10Request(r.Spec.StubPKCS10Request)...)
}

func nameMessages(fldPath *field.Path, value string, fn apivalidation.ValidateNameFunc) field.ErrorList {
	return messages(fldPath, value, fn(value, false))
}

// validateStubPKCS10Request checks the request's key type and that its
// signature verifies, which proves the requester holds the private key.
func validateStubPKCS10Request(der []byte) field.ErrorList {
	if len(der) > maxStubPKCS10RequestSize {
		return field.ErrorList{field.TooLong(stubRequestPath, "", maxStubPKCS10RequestSize)}
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return field.ErrorList{field.Invalid(stubRequestPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR")}
	}
	switch pub := req.PublicKey.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() && pub.Curve != elliptic.P384() && pub.Curve != elliptic.P521() {
			return field.ErrorList{field.Invalid(stubRequestPath, "curve "+pub.Curve.Params().Name, "elliptic public keys must use curve P256, P384, or P521")}
		}
	case *rsa.PublicKey:
		if bits := pub.Size() * 8; bits != 3072 && bits != 4096 {
			return field.ErrorList{field.Invalid(stubRequestPath, fmt.Sprintf("%d-bit modulus", bits), "RSA keys must have modulus size 3072 or 4096")}
		}
	default:
		return field.ErrorList{field.Invalid(stubRequestPath, field.OmitValueType{}, "unknown public key type; supported types are Ed25519, ECDSA, and RSA")}
	}
	if err := req.CheckSignature(); err != nil {
		return field.ErrorList{field.Invalid(stubRequestPath, field.OmitValueType{}, "invalid signature")}
	}
	return nil
}
