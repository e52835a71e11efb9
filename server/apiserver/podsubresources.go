package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podSpecSubresources are the pod subresources that each own one part of
// the spec: pods/ephemeralcontainers the debug containers, pods/resize the
// containers' resources. Reads return the whole pod, as upstream.
var podSpecSubresources = map[string]bool{"ephemeralcontainers": true, "resize": true}

// podForSubresourceUpdate is the stored pod with only the part the
// subresource owns taken from the client's pod (upstream's
// dropNonEphemeralContainerUpdates and dropNonResizeUpdates); ok is false
// for other writes.
func podForSubresourceUpdate(subresource string, obj, old runtime.Object) (runtime.Object, bool) {
	pod, ok1 := obj.(*corev1.Pod)
	cur, ok2 := old.(*corev1.Pod)
	if !ok1 || !ok2 || !podSpecSubresources[subresource] {
		return nil, false
	}
	out := cur.DeepCopy()
	out.ResourceVersion = pod.ResourceVersion
	out.ManagedFields = pod.ManagedFields
	switch subresource {
	case "ephemeralcontainers":
		out.Spec.EphemeralContainers = pod.Spec.EphemeralContainers
	case "resize":
		if len(pod.Spec.Containers) != len(cur.Spec.Containers) || len(pod.Spec.InitContainers) != len(cur.Spec.InitContainers) {
			// Added or removed containers: validation refuses the pod as sent.
			out.Spec = pod.Spec
			return out, true
		}
		out.Spec.Containers = withResizedResources(pod.Spec.Containers, cur.Spec.Containers)
		out.Spec.InitContainers = withResizedResources(pod.Spec.InitContainers, cur.Spec.InitContainers)
		out.Spec.Resources = pod.Spec.Resources
	}
	return out, true
}

// withResizedResources is old with each container's resources and resize
// policy from the new list; renamed or reordered containers come back as
// sent, for validation to refuse.
func withResizedResources(cs, old []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(old))
	for i := range old {
		if cs[i].Name != old[i].Name {
			return cs
		}
		out[i] = *old[i].DeepCopy()
		out[i].Resources = *cs[i].Resources.DeepCopy()
		out[i].ResizePolicy = cs[i].ResizePolicy
	}
	if len(old) == 0 {
		return old
	}
	return out
}

// validateUpdate runs the subresource's own rules when it has them,
// otherwise the resource's update validation.
func validateUpdate(q *request, obj, old runtime.Object) field.ErrorList {
	if q.info.Subresource != "" && q.res.ValidateSubresource != nil {
		if errs, ok := q.res.ValidateSubresource(q.info.Subresource, obj, old); ok {
			return errs
		}
	}
	return q.res.ValidateUpdate(obj, old)
}
