package defaults

import "k8s.io/apimachinery/pkg/runtime"

// applyCertExtra sets the defaults of certificates.k8s.io/v1 ClusterTrustBundle and PodCertificateRequest; it reports whether obj is one of them.
func applyCertExtra(obj runtime.Object) bool {
	return false
}
