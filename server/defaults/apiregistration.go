package defaults

import (
	"k8s.io/apimachinery/pkg/runtime"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// applyAPIRegistration sets the defaults of apiregistration.k8s.io/v1
// APIService; it reports whether obj is one. Upstream's only default is
// the service port, 443.
func applyAPIRegistration(obj runtime.Object) bool {
	s, ok := obj.(*apiregistrationv1.APIService)
	if !ok {
		return false
	}
	if s != nil && s.Spec.Service != nil && s.Spec.Service.Port == nil {
		port := int32(443)
		s.Spec.Service.Port = &port
	}
	return true
}
