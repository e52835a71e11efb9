package validation

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podCertificateKeyTypes are the keys the kubelet can generate.
var podCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// validateCTBProjection: a bundle is chosen by name, or by signer and
// label selector, never both.
func validateCTBProjection(c *corev1.ClusterTrustBundleProjection, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Name != nil && c.SignerName != nil:
		errs = append(errs, field.Invalid(fldPath, c, "only one of name and signerName may be used"))
	case c.Name != nil:
		name := *c.Name
		if name == "" {
			errs = append(errs, field.Required(fldPath.Child("name"), "must be a valid object name"))
		}
		signer := ""
		if i := strings.LastIndex(name, ":"); i >= 0 {
			signer = strings.ReplaceAll(name[:i], ":", "/")
		}
		for _, msg := range ClusterTrustBundleName(signer)(name, false) {
			errs = append(errs, field.Invalid(fldPath.Child("name"), name, fmt.Sprintf("not a valid clustertrustbundlename: %v", msg)))
		}
		if c.LabelSelector != nil {
			errs = append(errs, field.Invalid(fldPath.Child("labelSelector"), c.LabelSelector, "labelSelector must be unset if name is specified"))
		}
	case c.SignerName != nil:
		errs = append(errs, validateSignerName(*c.SignerName, fldPath.Child("signerName"))...)
		errs = append(errs, metavalidation.ValidateLabelSelector(c.LabelSelector, metavalidation.LabelSelectorValidationOptions{}, fldPath.Child("labelSelector"))...)
	default:
		errs = append(errs, field.Required(fldPath, "either name or signerName must be specified"))
	}
	if c.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	} else {
		errs = append(errs, localNonReservedPath(c.Path, fldPath.Child("path"))...)
	}
	return errs
}

// validatePodCertificateProjection bounds the lifetime a pod may ask for
// ([1h, 91d], [1h, 24h] for kubernetes.io signers) and requires a file to
// write the credentials to.
func validatePodCertificateProjection(p *corev1.PodCertificateProjection, fldPath *field.Path, addPath func(file, owner string)) field.ErrorList {
	errs := validateSignerName(p.SignerName, fldPath.Child("signerName"))
	if p.UserAnnotations != nil {
		errs = append(errs, validateUserAnnotations(p.UserAnnotations, fldPath.Child("userAnnotations"))...)
	}
	if !slices.Contains(podCertificateKeyTypes, p.KeyType) {
		errs = append(errs, field.NotSupported(fldPath.Child("keyType"), p.KeyType, podCertificateKeyTypes))
	}
	if v := p.MaxExpirationSeconds; v != nil {
		if *v < MinPodCertificateSeconds {
			errs = append(errs, field.Invalid(fldPath.Child("maxExpirationSeconds"), *v, fmt.Sprintf("if provided, maxExpirationSeconds must be >= %d", MinPodCertificateSeconds)))
		}
		hi := int32(MaxPodCertificateSeconds)
		if IsKubernetesSignerName(p.SignerName) {
			hi = KubernetesMaxPodCertificateSeconds
		}
		if *v > hi {
			errs = append(errs, field.Invalid(fldPath.Child("maxExpirationSeconds"), *v, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", hi)))
		}
	}
	paths := 0
	for _, f := range []struct{ name, value string }{
		{"credentialBundlePath", p.CredentialBundlePath}, {"keyPath", p.KeyPath}, {"certificateChainPath", p.CertificateChainPath},
	} {
		if f.value == "" {
			continue
		}
		paths++
		errs = append(errs, localNonReservedPath(f.value, fldPath.Child(f.name))...)
		addPath(f.value, f.value)
	}
	if paths == 0 {
		errs = append(errs, field.Required(fldPath, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
	}
	return errs
}
