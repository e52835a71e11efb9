package registry

// extraRows are the rows of resource.k8s.io/v1, storagemigration.k8s.io/v1, storage.k8s.io/v1 VolumeAttributesClass and CSIStorageCapacity, autoscaling/v1, ComponentStatus.
func extraRows() []*Resource {
	return nil
}
