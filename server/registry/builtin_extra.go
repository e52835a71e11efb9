package registry

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
)

// extraRows are the rows of resource.k8s.io/v1, storagemigration.k8s.io/v1, storage.k8s.io/v1 VolumeAttributesClass and CSIStorageCapacity, autoscaling/v1, ComponentStatus.
func extraRows() []*Resource {
	return []*Resource{
		// resource.k8s.io/v1 (dynamic resource allocation). Nothing here
		// allocates claims: the scheduler keeps pods that need one Pending.
		with(row[resourcev1.DeviceClass, resourcev1.DeviceClassList]("resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", clusterScope), generation),
		with(row[resourcev1.ResourceClaim, resourcev1.ResourceClaimList]("resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim", nsScope), statusOnly),
		row[resourcev1.ResourceClaimTemplate, resourcev1.ResourceClaimTemplateList]("resource.k8s.io", "v1", "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate", nsScope),
		with(row[resourcev1.ResourceSlice, resourcev1.ResourceSliceList]("resource.k8s.io", "v1", "resourceslices", "resourceslice", "ResourceSlice", clusterScope), generation, fields(resourceSliceFields)),
		with(row[resourcev1.DeviceTaintRule, resourcev1.DeviceTaintRuleList]("resource.k8s.io", "v1", "devicetaintrules", "devicetaintrule", "DeviceTaintRule", clusterScope), statusOnly, generation),
		// storagemigration.k8s.io/v1
		with(row[storagemigrationv1.StorageVersionMigration, storagemigrationv1.StorageVersionMigrationList]("storagemigration.k8s.io", "v1", "storageversionmigrations", "storageversionmigration", "StorageVersionMigration", clusterScope), statusOnly),
		// storage.k8s.io/v1
		row[storagev1.VolumeAttributesClass, storagev1.VolumeAttributesClassList]("storage.k8s.io", "v1", "volumeattributesclasses", "volumeattributesclass", "VolumeAttributesClass", clusterScope, "vac"),
		row[storagev1.CSIStorageCapacity, storagev1.CSIStorageCapacityList]("storage.k8s.io", "v1", "csistoragecapacities", "csistoragecapacity", "CSIStorageCapacity", nsScope),
		// autoscaling/v1, served from the autoscaling/v2 objects
		with(row[autoscalingv1.HorizontalPodAutoscaler, autoscalingv1.HorizontalPodAutoscalerList]("autoscaling", "v1", "horizontalpodautoscalers", "horizontalpodautoscaler", "HorizontalPodAutoscaler", nsScope, "hpa"),
			statusOnly, categories("all"), converted(hpaV1Conversion())),
		// core/v1 componentstatuses: computed at each request (the server
		// sets Compute); get and list only, as upstream.
		with(row[corev1.ComponentStatus, corev1.ComponentStatusList]("", "v1", "componentstatuses", "componentstatus", "ComponentStatus", clusterScope, "cs"), readOnly),
	}
}

func converted(c *Conversion) option { return func(r *Resource) { r.Convert = c } }

func readOnly(r *Resource) { r.Verbs = []string{"get", "list"} }

func resourceSliceFields(s *resourcev1.ResourceSlice) map[string]string {
	node := ""
	if s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	return map[string]string{"spec.nodeName": node, "spec.driver": s.Spec.Driver}
}
