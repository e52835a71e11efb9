package validation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateExtraKind validates the kinds of resource.k8s.io/v1, storagemigration.k8s.io/v1, storage.k8s.io/v1 VolumeAttributesClass and CSIStorageCapacity, autoscaling/v1, ComponentStatus.
func validateExtraKind(obj runtime.Object) (field.ErrorList, bool) {
	return nil, false
}

// updateExtraKind validates updates of the kinds of resource.k8s.io/v1, storagemigration.k8s.io/v1, storage.k8s.io/v1 VolumeAttributesClass and CSIStorageCapacity, autoscaling/v1, ComponentStatus.
func updateExtraKind(obj, old runtime.Object) (field.ErrorList, bool) {
	return nil, false
}
