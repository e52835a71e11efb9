package defaults

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// applyNetExtra sets the defaults of networking.k8s.io/v1 ServiceCIDR and IPAddress; it reports whether obj is one of them.
// Upstream defaults neither: every field is required or meaningful empty.
func applyNetExtra(obj runtime.Object) bool {
	switch obj.(type) {
	case *networkingv1.ServiceCIDR, *networkingv1.IPAddress:
		return true
	}
	return false
}
