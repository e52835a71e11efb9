package validation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateCertExtraKind validates the kinds of certificates.k8s.io/v1 ClusterTrustBundle and PodCertificateRequest.
func validateCertExtraKind(obj runtime.Object) (field.ErrorList, bool) {
	return nil, false
}

// updateCertExtraKind validates updates of the kinds of certificates.k8s.io/v1 ClusterTrustBundle and PodCertificateRequest.
func updateCertExtraKind(obj, old runtime.Object) (field.ErrorList, bool) {
	return nil, false
}
