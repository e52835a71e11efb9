package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateSubresource checks writes through the pod subresources that
// change part of the spec, with upstream's rules for each; ok is false for
// every other subresource (ValidateUpdate applies to those).
func ValidateSubresource(subresource string, obj, old runtime.Object) (field.ErrorList, bool) {
	pod, ok1 := obj.(*corev1.Pod)
	oldPod, ok2 := old.(*corev1.Pod)
	if !ok1 || !ok2 {
		return nil, false
	}
	switch subresource {
	case "ephemeralcontainers":
		return dedupe(validateEphemeralContainersUpdate(pod, oldPod)), true
	case "resize":
		return dedupe(validatePodResize(pod, oldPod)), true
	}
	return nil, false
}

// validateEphemeralContainersUpdate is upstream's
// ValidatePodEphemeralContainersUpdate: the pod stays valid, and debug
// containers already added are neither removed nor changed (the kubelet
// started them; they cannot be restarted with a new definition).
func validateEphemeralContainersUpdate(pod, old *corev1.Pod) field.ErrorList {
	errs := validateMetaUpdate(&pod.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePodSpec(&pod.Spec, true, specPath)...)
	if _, ok := old.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	byName := map[string]*corev1.EphemeralContainer{}
	for i := range pod.Spec.EphemeralContainers {
		byName[pod.Spec.EphemeralContainers[i].Name] = &pod.Spec.EphemeralContainers[i]
	}
	ecPath := specPath.Child("ephemeralContainers")
	for _, o := range old.Spec.EphemeralContainers {
		n, ok := byName[o.Name]
		switch {
		case !ok:
			errs = append(errs, field.Forbidden(ecPath, fmt.Sprintf("existing ephemeral containers %q may not be removed\n", o.Name)))
		case !semanticEqual(o, *n):
			errs = append(errs, field.Forbidden(ecPath, fmt.Sprintf("existing ephemeral containers %q may not be changed\n", o.Name)))
		}
	}
	return errs
}

// validatePodResize is upstream's ValidatePodResize for container-level
// resources: only cpu and memory of regular and init containers (and their
// resizePolicy) change, nothing is removed, the QoS class stays, and the
// node must report container resources (a sign it can act on a resize).
func validatePodResize(pod, old *corev1.Pod) field.ErrorList {
	errs := validateMetaUpdate(&pod.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePodSpec(&pod.Spec, true, specPath)...)
	if _, ok := old.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods cannot be resized")}
	}
	if old.Spec.OS != nil && old.Spec.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "windows pods cannot be resized")}
	}
	if podQOSOf(old) != computePodQOS(pod) {
		errs = append(errs, field.Invalid(specPath, pod.Status.QOSClass, "Pod QOS Class may not change as a result of resizing"))
	}
	if !resizeSupported(old) {
		errs = append(errs, field.Forbidden(specPath, "Pod running on node without support for resize"))
	}
	if !semanticEqual(pod.Spec.Resources, old.Spec.Resources) {
		// The agent applies container limits only; accepting a pod-level
		// resize it would not act on would be a lie.
		errs = append(errs, field.Forbidden(specPath.Child("resources"), "resize of pod-level resources is not supported"))
	}
	if order := validateResizeOrdering(pod, old); order != nil {
		return append(errs, order...)
	}
	masked := pod.Spec.DeepCopy()
	for i := range old.Spec.InitContainers {
		p := specPath.Child("initContainers").Index(i)
		errs = append(errs, validateContainerResize(&pod.Spec.InitContainers[i].Resources, &old.Spec.InitContainers[i].Resources, p.Child("resources"))...)
		c := &masked.InitContainers[i]
		changed := !semanticEqual(*c, old.Spec.InitContainers[i])
		keepOldCPUMemory(c, &old.Spec.InitContainers[i])
		if !semanticEqual(*c, old.Spec.InitContainers[i]) {
			errs = append(errs, field.Forbidden(p, "only cpu and memory resources for init or sidecar containers are mutable"))
		}
		if changed && !isSidecar(&old.Spec.InitContainers[i]) {
			for _, rp := range pod.Spec.InitContainers[i].ResizePolicy {
				if rp.RestartPolicy == corev1.RestartContainer {
					errs = append(errs, field.Forbidden(p, "non-sidecar init containers with a resize policy of RestartContainer cannot be resized"))
				}
			}
		}
	}
	for i := range old.Spec.Containers {
		errs = append(errs, validateContainerResize(&pod.Spec.Containers[i].Resources, &old.Spec.Containers[i].Resources,
			specPath.Child("containers").Index(i).Child("resources"))...)
		c := &masked.Containers[i]
		keepOldCPUMemory(c, &old.Spec.Containers[i])
		if !semanticEqual(*c, old.Spec.Containers[i]) {
			errs = append(errs, field.Forbidden(specPath, "only cpu and memory resources are mutable"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if !semanticEqual(*masked, old.Spec) {
		errs = append(errs, field.Forbidden(specPath, "only cpu and memory resources are mutable"))
	}
	return errs
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// resizeSupported is upstream's version-skew check: a node that reports
// resources in the status of its running containers handles resizes.
func resizeSupported(pod *corev1.Pod) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running != nil {
			return c.Resources != nil
		}
	}
	return true
}

// validateResizeOrdering: containers may not be added, removed, reordered
// or renamed by a resize.
func validateResizeOrdering(pod, old *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	check := func(name string, cs, oldCs []corev1.Container) {
		p := specPath.Child(name)
		if len(cs) != len(oldCs) {
			errs = append(errs, field.Forbidden(p, name+" may not be added or removed on resize"))
			return
		}
		for i := range oldCs {
			if cs[i].Name != oldCs[i].Name {
				errs = append(errs, field.Forbidden(p.Index(i).Child("name"), name+" may not be renamed or reordered on resize"))
			}
		}
	}
	check("containers", pod.Spec.Containers, old.Spec.Containers)
	check("initContainers", pod.Spec.InitContainers, old.Spec.InitContainers)
	return errs
}

// validateContainerResize: requests and limits may change, not disappear.
func validateContainerResize(req, old *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if resourcesRemoved(req.Requests, old.Requests) {
		errs = append(errs, field.Forbidden(fldPath.Child("requests"), "resource requests cannot be removed"))
	}
	if resourcesRemoved(req.Limits, old.Limits) {
		errs = append(errs, field.Forbidden(fldPath.Child("limits"), "resource limits cannot be removed"))
	}
	return errs
}

func resourcesRemoved(list, old corev1.ResourceList) bool {
	for name := range old {
		if _, ok := list[name]; !ok {
			return true
		}
	}
	return false
}

// keepOldCPUMemory sets c's cpu and memory (and resize policy) to old's,
// so what remains different is what a resize may not change.
func keepOldCPUMemory(c, old *corev1.Container) {
	c.Resources.Limits = withOldCPUMemory(c.Resources.Limits, old.Resources.Limits)
	c.Resources.Requests = withOldCPUMemory(c.Resources.Requests, old.Resources.Requests)
	c.ResizePolicy = old.ResizePolicy
}

func withOldCPUMemory(list, old corev1.ResourceList) corev1.ResourceList {
	if list == nil && old == nil {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range list {
		if k != corev1.ResourceCPU && k != corev1.ResourceMemory {
			out[k] = v
		}
	}
	for _, k := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if v, ok := old[k]; ok {
			out[k] = v
		}
	}
	if len(out) == 0 && old == nil {
		return nil
	}
	return out
}

// podQOSOf is the class the pod was given (status.qosClass), computed when
// the status does not have it.
func podQOSOf(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return computePodQOS(pod)
}

// computePodQOS is upstream's ComputePodQOS: cpu and memory of regular and
// init containers (or the pod-level resources when set) are summed;
// Guaranteed needs cpu and memory limits everywhere, equal to the requests.
func computePodQOS(pod *corev1.Pod) corev1.PodQOSClass {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	add := func(dst corev1.ResourceList, src corev1.ResourceList) []corev1.ResourceName {
		var found []corev1.ResourceName
		for name, q := range src {
			if (name != corev1.ResourceCPU && name != corev1.ResourceMemory) || q.Sign() <= 0 {
				continue
			}
			found = append(found, name)
			sum := q.DeepCopy()
			if cur, ok := dst[name]; ok {
				sum.Add(cur)
			}
			dst[name] = sum
		}
		return found
	}
	if r := pod.Spec.Resources; r != nil && len(r.Requests)+len(r.Limits) > 0 {
		add(requests, r.Requests)
		guaranteed = len(add(limits, r.Limits)) == 2
	} else {
		for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
			add(requests, c.Resources.Requests)
			if len(add(limits, c.Resources.Limits)) != 2 {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
