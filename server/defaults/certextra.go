package defaults

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// defaultPodCertificateSeconds is upstream's default lifetime cap of a
// pod certificate: 24 hours.
const defaultPodCertificateSeconds = 86400

// applyCertExtra sets the defaults of certificates.k8s.io/v1 ClusterTrustBundle and PodCertificateRequest; it reports whether obj is one of them.
// Only a request's maxExpirationSeconds has one; bundles have none.
func applyCertExtra(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *certificatesv1.ClusterTrustBundle:
		return true
	case *certificatesv1.PodCertificateRequest:
		if o.Spec.MaxExpirationSeconds == nil {
			v := int32(defaultPodCertificateSeconds)
			o.Spec.MaxExpirationSeconds = &v
		}
		return true
	}
	return false
}
