package quota

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A pod's effective requests and limits, as upstream's
// k8s.io/component-helpers/resource computes them with the 1.37 default
// gates (in-place resize GA, pod-level resources and their in-place
// resize beta on): containers summed, init containers as a running
// maximum with restartable (sidecar) ones adding up, pod-level values
// replacing what they name, overhead added. While a resize is pending the
// larger of spec, allocated and actual is charged, so a resize cannot
// shrink usage before the kubelet has made it real.

func podRequests(pod *corev1.Pod) corev1.ResourceList {
	reqs := aggregateContainers(pod, containerSpecRequests)
	infeasible := resizeInfeasible(pod)
	var allocated, actuated corev1.ResourceList
	if pod.Status.AllocatedResources != nil && pod.Status.Resources != nil && pod.Status.Resources.Requests != nil {
		allocated, actuated = pod.Status.AllocatedResources, pod.Status.Resources.Requests
	} else {
		allocated = aggregateContainers(pod, containerAllocatedRequests)
		actuated = aggregateContainers(pod, containerActuatedRequests)
	}
	if infeasible {
		reqs = maxOf(actuated, allocated)
	} else {
		reqs = maxOf(reqs, actuated, allocated)
	}
	if podLevelRequestsSet(pod) {
		eff := pod.Spec.Resources.Requests
		if pod.Status.Resources != nil {
			eff = podLevelEffective(pod, eff, pod.Status.Resources.Requests, pod.Status.AllocatedResources)
		}
		applyPodLevel(reqs, eff)
	}
	if pod.Spec.Overhead != nil {
		addInto(reqs, pod.Spec.Overhead)
	}
	return reqs
}

func podLimits(pod *corev1.Pod) corev1.ResourceList {
	spec := aggregateContainers(pod, containerSpecLimits)
	var actuated corev1.ResourceList
	if pod.Status.Resources != nil && pod.Status.Resources.Limits != nil {
		actuated = pod.Status.Resources.Limits
	} else {
		actuated = aggregateContainers(pod, containerActuatedLimits)
	}
	var limits corev1.ResourceList
	if resizeInfeasible(pod) {
		limits = maxOf(actuated)
	} else {
		limits = maxOf(spec, actuated)
	}
	if podLevelResourcesSet(pod) {
		eff := pod.Spec.Resources.Limits
		if pod.Status.Resources != nil {
			eff = podLevelEffective(pod, eff, pod.Status.Resources.Limits)
		}
		applyPodLevel(limits, eff)
	}
	for n, q := range pod.Spec.Overhead {
		if v, ok := limits[n]; ok && !v.IsZero() {
			v.Add(q)
			limits[n] = v
		}
	}
	return limits
}

type containerResources func(c *corev1.Container, cs *corev1.ContainerStatus, infeasible bool) corev1.ResourceList

func containerSpecRequests(c *corev1.Container, _ *corev1.ContainerStatus, _ bool) corev1.ResourceList {
	return c.Resources.Requests
}

func containerSpecLimits(c *corev1.Container, _ *corev1.ContainerStatus, _ bool) corev1.ResourceList {
	return c.Resources.Limits
}

func containerAllocatedRequests(c *corev1.Container, cs *corev1.ContainerStatus, infeasible bool) corev1.ResourceList {
	if cs != nil && cs.AllocatedResources != nil {
		return cs.AllocatedResources
	}
	if infeasible {
		return nil
	}
	return c.Resources.Requests
}

func containerActuatedRequests(c *corev1.Container, cs *corev1.ContainerStatus, infeasible bool) corev1.ResourceList {
	if cs != nil && cs.Resources != nil && cs.Resources.Requests != nil {
		return cs.Resources.Requests
	}
	return containerAllocatedRequests(c, cs, infeasible)
}

func containerActuatedLimits(c *corev1.Container, cs *corev1.ContainerStatus, infeasible bool) corev1.ResourceList {
	if cs != nil && cs.Resources != nil && cs.Resources.Limits != nil {
		return cs.Resources.Limits
	}
	if infeasible {
		return nil
	}
	return c.Resources.Limits
}

// aggregateContainers follows the sidecar KEP: regular containers and
// restartable init containers add up; each ordinary init container needs
// its own amount plus the sidecars started before it; the pod needs the
// larger of the two.
func aggregateContainers(pod *corev1.Pod, get containerResources) corev1.ResourceList {
	infeasible := resizeInfeasible(pod)
	out := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		addInto(out, get(c, containerStatus(pod, c.Name), infeasible))
	}
	sidecars, inits := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		res := get(c, containerStatus(pod, c.Name), infeasible)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addInto(out, res)
			addInto(sidecars, res)
			res = sidecars
		} else {
			combined := corev1.ResourceList{}
			addInto(combined, res)
			addInto(combined, sidecars)
			res = combined
		}
		maxInto(inits, res)
	}
	maxInto(out, inits)
	return out
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func resizeInfeasible(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResizePending {
			return c.Reason == corev1.PodReasonInfeasible
		}
	}
	return false
}

func maxOf(lists ...corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range lists {
		maxInto(out, l)
	}
	return out
}

func podLevelEffective(pod *corev1.Pod, spec corev1.ResourceList, statuses ...corev1.ResourceList) corev1.ResourceList {
	if resizeInfeasible(pod) {
		spec = nil
	}
	return maxOf(append([]corev1.ResourceList{spec}, statuses...)...)
}

// Pod-level resources cover cpu, memory and hugepages.
func podLevelSupported(n corev1.ResourceName) bool {
	return n == corev1.ResourceCPU || n == corev1.ResourceMemory || strings.HasPrefix(string(n), corev1.ResourceHugePagesPrefix)
}

func applyPodLevel(out, eff corev1.ResourceList) {
	for n, q := range eff {
		if podLevelSupported(n) {
			out[n] = q.DeepCopy()
		}
	}
}

func anySupported(l corev1.ResourceList) bool {
	for n := range l {
		if podLevelSupported(n) {
			return true
		}
	}
	return false
}

func podLevelRequestsSet(pod *corev1.Pod) bool {
	return pod.Spec.Resources != nil && anySupported(pod.Spec.Resources.Requests)
}

func podLevelResourcesSet(pod *corev1.Pod) bool {
	return pod.Spec.Resources != nil && (anySupported(pod.Spec.Resources.Requests) || anySupported(pod.Spec.Resources.Limits))
}
