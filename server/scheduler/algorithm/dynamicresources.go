package algorithm

import v1 "k8s.io/api/core/v1"

// DynamicResources is upstream's DRA plugin. Nothing in this cluster
// allocates ResourceClaims (there is no DRA driver or allocator), so a pod
// that references claims must wait rather than start without the devices
// it asked for: the pre-filter rejects it on every node, and no preemption
// can change that.
const DynamicResources = "DynamicResources"

// ReasonNoDRA says why such a pod stays Pending.
const ReasonNoDRA = "pod references resource claims, but no DRA driver allocates claims on this cluster"

// preFilterResourceClaims rejects pods with spec.resourceClaims.
func preFilterResourceClaims(pod *v1.Pod) *Status {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	return newStatus(UnschedulableAndUnresolvable, DynamicResources, ReasonNoDRA)
}
