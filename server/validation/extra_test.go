package validation

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateResourceClaim(t *testing.T) {
	valid := func() *resourcev1.ResourceClaim {
		return defaulted(&resourcev1.ResourceClaim{ObjectMeta: objMeta("c"), Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "req-0", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dra.example.com",
				Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "true"}}}}}},
			Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"req-0"}, DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "dra.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{"a":1}`)}}}}},
		}}})
	}
	runCreateCases(t, valid, []errCase[*resourcev1.ResourceClaim]{
		{"request name is a DNS label", func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[0].Name = "Req" },
			field.ErrorTypeInvalid, "spec.devices.requests[0].name", ""},
		{"exactly or firstAvailable", func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly = nil },
			field.ErrorTypeRequired, "spec.devices.requests[0]", "exactly one of `exactly` or `firstAvailable` is required"},
		{"class required", func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly.DeviceClassName = "" },
			field.ErrorTypeRequired, "spec.devices.requests[0].exactly.deviceClassName", ""},
		{"count positive", func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly.Count = -1 },
			field.ErrorTypeInvalid, "spec.devices.requests[0].exactly.count", "must be greater than zero"},
		{"allocation mode known", func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly.AllocationMode = "Some" },
			field.ErrorTypeNotSupported, "spec.devices.requests[0].exactly.allocationMode", ""},
		{"selector needs an expression", func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly.Selectors[0].CEL.Expression = "" },
			field.ErrorTypeRequired, "spec.devices.requests[0].exactly.selectors[0].cel.expression", ""},
		{"config names a request of the claim", func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Requests = []string{"other"} },
			field.ErrorTypeInvalid, "spec.devices.config[0].requests[0]", "must be the name of a request in the claim"},
		{"opaque parameters are an object", func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Config[0].Opaque.Parameters.Raw = []byte(`[1]`)
		}, field.ErrorTypeInvalid, "spec.devices.config[0].opaque.parameters", "must be a valid JSON object"},
	})
	runUpdateCases(t, func() *resourcev1.ResourceClaim { return stored(valid()) }, []updateCase[*resourcev1.ResourceClaim]{
		{"labels may change", func(c *resourcev1.ResourceClaim) { c.Labels = map[string]string{"a": "b"} }, "", "", ""},
		{"spec is immutable", func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.DeviceClassName = "x.example.com"
		},
			field.ErrorTypeInvalid, "spec", "field is immutable"},
		{"an empty allocation is valid", func(c *resourcev1.ResourceClaim) { c.Status.Allocation = &resourcev1.AllocationResult{} }, "", "", ""},
		{"reservation needs an allocation", func(c *resourcev1.ResourceClaim) {
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}
		}, field.ErrorTypeForbidden, "status.reservedFor", "may not be specified when `allocated` is not set"},
	})
}

func TestValidateResourceSliceAndDeviceTaintRule(t *testing.T) {
	node := "n1"
	slice := func() *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourcev1.ResourceSliceSpec{Driver: "dra.example.com", NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: "cluster", ResourceSliceCount: 1}, Devices: []resourcev1.Device{{Name: "device-0"}}}}
	}
	runCreateCases(t, slice, []errCase[*resourcev1.ResourceSlice]{
		{"driver required", func(s *resourcev1.ResourceSlice) { s.Spec.Driver = "" }, field.ErrorTypeRequired, "spec.driver", ""},
		{"slice count positive", func(s *resourcev1.ResourceSlice) { s.Spec.Pool.ResourceSliceCount = 0 },
			field.ErrorTypeInvalid, "spec.pool.resourceSliceCount", "must be greater than zero"},
		{"one node selection", func(s *resourcev1.ResourceSlice) { all := true; s.Spec.AllNodes = &all },
			field.ErrorTypeInvalid, "spec", "but multiple fields are set"},
		{"device names unique", func(s *resourcev1.ResourceSlice) { s.Spec.Devices = append(s.Spec.Devices, s.Spec.Devices[0]) },
			field.ErrorTypeDuplicate, "spec.devices[1].name", ""},
	})
	runUpdateCases(t, func() *resourcev1.ResourceSlice { return stored(slice()) }, []updateCase[*resourcev1.ResourceSlice]{
		{"devices may change", func(s *resourcev1.ResourceSlice) { s.Spec.Devices = nil }, "", "", ""},
		{"driver is immutable", func(s *resourcev1.ResourceSlice) { s.Spec.Driver = "other.example.com" },
			field.ErrorTypeInvalid, "spec.driver", "field is immutable"},
	})
	rule := func() *resourcev1.DeviceTaintRule {
		return defaulted(&resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"},
			Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "testing", Effect: resourcev1.DeviceTaintEffectNone}}})
	}
	runCreateCases(t, rule, []errCase[*resourcev1.DeviceTaintRule]{
		{"effect required", func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Effect = "" }, field.ErrorTypeRequired, "spec.taint.effect", ""},
		{"key is a label name", func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Key = "a b" }, field.ErrorTypeInvalid, "spec.taint.key", ""},
	})
}

func TestValidateStorageExtras(t *testing.T) {
	vac := func() *storagev1.VolumeAttributesClass {
		return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com", Parameters: map[string]string{"iops": "100"}}
	}
	runCreateCases(t, vac, []errCase[*storagev1.VolumeAttributesClass]{
		{"driver required", func(v *storagev1.VolumeAttributesClass) { v.DriverName = "" }, field.ErrorTypeRequired, "driverName", ""},
		{"parameters required", func(v *storagev1.VolumeAttributesClass) { v.Parameters = nil }, field.ErrorTypeRequired, "parameters", ""},
	})
	runUpdateCases(t, func() *storagev1.VolumeAttributesClass { return stored(vac()) }, []updateCase[*storagev1.VolumeAttributesClass]{
		{"labels may change", func(v *storagev1.VolumeAttributesClass) { v.Labels = map[string]string{"a": "b"} }, "", "", ""},
		{"driver is fixed", func(v *storagev1.VolumeAttributesClass) { v.DriverName = "other.example.com" },
			field.ErrorTypeForbidden, "driverName", "updates to driverName are forbidden."},
	})
	capacity := func() *storagev1.CSIStorageCapacity {
		return &storagev1.CSIStorageCapacity{ObjectMeta: objMeta("c"), StorageClassName: "local"}
	}
	runCreateCases(t, capacity, []errCase[*storagev1.CSIStorageCapacity]{
		{"class is a DNS subdomain", func(c *storagev1.CSIStorageCapacity) { c.StorageClassName = "Local!" }, field.ErrorTypeInvalid, "storageClassName", ""},
	})
	runUpdateCases(t, func() *storagev1.CSIStorageCapacity { return stored(capacity()) }, []updateCase[*storagev1.CSIStorageCapacity]{
		{"class is immutable", func(c *storagev1.CSIStorageCapacity) { c.StorageClassName = "other" }, field.ErrorTypeInvalid, "storageClassName", "field is immutable"},
	})
}

func TestValidateStorageVersionMigrationAndHPAV1(t *testing.T) {
	svm := func() *storagemigrationv1.StorageVersionMigration {
		return &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
			Spec: storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "apps", Resource: "deployments"}}}
	}
	runCreateCases(t, svm, []errCase[*storagemigrationv1.StorageVersionMigration]{
		{"resource is a DNS-1035 label", func(m *storagemigrationv1.StorageVersionMigration) { m.Spec.Resource.Resource = "1abc" },
			field.ErrorTypeInvalid, "spec.resource.resource", ""},
		{"group is a DNS subdomain", func(m *storagemigrationv1.StorageVersionMigration) { m.Spec.Resource.Group = "A_B" },
			field.ErrorTypeInvalid, "spec.resource.group", ""},
	})
	done := func() *storagemigrationv1.StorageVersionMigration {
		m := stored(svm())
		m.Status = storagemigrationv1.StorageVersionMigrationStatus{ResourceVersion: "12", Conditions: []metav1.Condition{
			{Type: "Succeeded", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now()}}}
		return m
	}
	runUpdateCases(t, done, []updateCase[*storagemigrationv1.StorageVersionMigration]{
		{"spec is immutable", func(m *storagemigrationv1.StorageVersionMigration) { m.Spec.Resource.Resource = "replicasets" },
			field.ErrorTypeInvalid, "spec", "field is immutable"},
		{"resourceVersion is fixed once set", func(m *storagemigrationv1.StorageVersionMigration) { m.Status.ResourceVersion = "13" },
			field.ErrorTypeInvalid, "status.resourceVersion", "field is immutable"},
		{"success stays", func(m *storagemigrationv1.StorageVersionMigration) { m.Status.Conditions = nil },
			field.ErrorTypeInvalid, "status.conditions", "Success condition cannot be set to false once it is true"},
	})
	hpa := func() *autoscalingv1.HorizontalPodAutoscaler {
		return defaulted(&autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: objMeta("h"), Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}, MaxReplicas: 3}})
	}
	runCreateCases(t, hpa, []errCase[*autoscalingv1.HorizontalPodAutoscaler]{
		{"target kind required", func(h *autoscalingv1.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Kind = "" },
			field.ErrorTypeRequired, "spec.scaleTargetRef.kind", ""},
		{"max at least min", func(h *autoscalingv1.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 0 },
			field.ErrorTypeInvalid, "spec.maxReplicas", ""},
	})
}
