package defaults

import (
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// applyExtra sets the defaults of resource.k8s.io/v1, storagemigration.k8s.io/v1, storage.k8s.io/v1 VolumeAttributesClass and CSIStorageCapacity, autoscaling/v1, ComponentStatus; it reports whether obj is one of them.
func applyExtra(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *resourcev1.ResourceClaim:
		if o != nil {
			setDeviceClaim(&o.Spec.Devices)
		}
	case *resourcev1.ResourceClaimTemplate:
		if o != nil {
			setDeviceClaim(&o.Spec.Spec.Devices)
		}
	case *resourcev1.ResourceSlice:
		if o != nil {
			for i := range o.Spec.Devices {
				for j := range o.Spec.Devices[i].Taints {
					setDeviceTaint(&o.Spec.Devices[i].Taints[j])
				}
			}
		}
	case *resourcev1.DeviceTaintRule:
		if o != nil {
			setDeviceTaint(&o.Spec.Taint)
		}
	case *autoscalingv1.HorizontalPodAutoscaler:
		// The implied 80% CPU target is made explicit by the conversion to
		// the stored v2 object, as upstream does it there.
		if o != nil && o.Spec.MinReplicas == nil {
			one := int32(1)
			o.Spec.MinReplicas = &one
		}
	default:
		return false
	}
	return true
}

func setDeviceClaim(c *resourcev1.DeviceClaim) {
	for i := range c.Requests {
		r := &c.Requests[i]
		if e := r.Exactly; e != nil {
			setAllocationMode(&e.AllocationMode, &e.Count)
			setDeviceTolerations(e.Tolerations)
		}
		for j := range r.FirstAvailable {
			s := &r.FirstAvailable[j]
			setAllocationMode(&s.AllocationMode, &s.Count)
			setDeviceTolerations(s.Tolerations)
		}
	}
}

func setAllocationMode(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func setDeviceTolerations(ts []resourcev1.DeviceToleration) {
	for i := range ts {
		if ts[i].Operator == "" {
			ts[i].Operator = resourcev1.DeviceTolerationOpEqual
		}
	}
}

func setDeviceTaint(t *resourcev1.DeviceTaint) {
	if t.TimeAdded == nil {
		// whole seconds: what survives encoding
		t.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}
