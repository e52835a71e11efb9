package quota

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

var podCountName = CountName(schema.GroupResource{Resource: "pods"})

// podResources are the fixed names pods are measured by; hugepages and
// extended resources (requests.<name>) come on top.
var podResources = []corev1.ResourceName{
	podCountName,
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods,
}

// constrained are the names that, when quota'd, every container must set:
// upstream calls this coupling a mistake and keeps it for compatibility.
var constrained = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory,
}

// deviceClassPrefix names implicit extended resources of DRA device
// classes.
const deviceClassPrefix = "deviceclass.resource.kubernetes.io/"

type podEvaluator struct{ now func() time.Time }

func (p *podEvaluator) GroupResource() schema.GroupResource {
	return schema.GroupResource{Resource: "pods"}
}

// Handles: creates, resizes, and updates that move a pod between the
// Terminating and NotTerminating scopes (activeDeadlineSeconds set).
func (p *podEvaluator) Handles(op Operation, subresource string, obj, old runtime.Object) bool {
	switch subresource {
	case "":
		if op == Update {
			pod, ok1 := obj.(*corev1.Pod)
			oldPod, ok2 := old.(*corev1.Pod)
			if ok1 && ok2 && isTerminating(pod) != isTerminating(oldPod) {
				return true
			}
		}
		return op == Create
	case "resize":
		return op == Update
	}
	return false
}

func (p *podEvaluator) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	out := Intersection(names, podResources)
	for _, n := range names {
		if strings.HasPrefix(string(n), corev1.ResourceHugePagesPrefix) ||
			strings.HasPrefix(string(n), corev1.ResourceRequestsHugePagesPrefix) ||
			isExtendedQuotaName(n) {
			out = append(out, n)
		}
	}
	return out
}

// isExtendedQuotaName: requests.<extended resource>, the only form quota
// takes for extended resources (they cannot be overcommitted).
func isExtendedQuotaName(n corev1.ResourceName) bool {
	s := string(n)
	if !strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return !isNative(n) || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix+deviceClassPrefix)
}

// isNative: unqualified names and names in kubernetes.io.
func isNative(n corev1.ResourceName) bool {
	return !strings.Contains(string(n), "/") || strings.Contains(string(n), corev1.ResourceDefaultNamespacePrefix)
}

// isExtended: a resource a container may request that quota tracks as
// requests.<name>.
func isExtended(n corev1.ResourceName) bool {
	if strings.HasPrefix(string(n), deviceClassPrefix) {
		return true
	}
	if isNative(n) || strings.HasPrefix(string(n), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(n))) == 0
}

func (p *podEvaluator) MatchesScope(sel corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	pod, err := asPod(obj)
	if err != nil {
		return false, err
	}
	switch sel.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return isTerminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !isTerminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(pod), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(pod), nil
	case corev1.ResourceQuotaScopePriorityClass:
		if sel.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		var have labels.Set
		if pod.Spec.PriorityClassName != "" {
			have = labels.Set{string(corev1.ResourceQuotaScopePriorityClass): pod.Spec.PriorityClassName}
		}
		return selectorMatches(sel, have)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return usesCrossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// Constraints: when a quota limits cpu or memory (requests or limits),
// every container must state it, with upstream's message
// "must specify limits.cpu for: c; requests.memory for: c,d". Pods with
// pod-level resources are exempt, as upstream with PodLevelResources on.
func (p *podEvaluator) Constraints(required []corev1.ResourceName, obj runtime.Object) error {
	pod, err := asPod(obj)
	if err != nil {
		return err
	}
	if podLevelResourcesSet(pod) {
		return nil
	}
	var need []corev1.ResourceName
	for _, n := range required {
		if slices.Contains(constrained, n) && !slices.Contains(need, n) {
			need = append(need, n)
		}
	}
	missing := map[corev1.ResourceName][]string{}
	check := func(c *corev1.Container) {
		has := containerComputeUsage(c.Resources.Requests, c.Resources.Limits)
		for _, n := range need {
			if _, ok := has[n]; !ok && !slices.Contains(missing[n], c.Name) {
				missing[n] = append(missing[n], c.Name)
			}
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		check(&pod.Spec.InitContainers[i])
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, string(n))
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		cs := missing[corev1.ResourceName(n)]
		sort.Strings(cs)
		parts = append(parts, fmt.Sprintf("%s for: %s", n, strings.Join(cs, ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(parts, "; "))
}

// Usage: count/pods always (it counts what is stored); pods and compute
// only while the pod is not terminal and not stuck deleting past its
// grace period, so a lost node does not block new pods.
func (p *podEvaluator) Usage(obj runtime.Object) (corev1.ResourceList, error) {
	pod, err := asPod(obj)
	if err != nil {
		return nil, err
	}
	out := corev1.ResourceList{podCountName: one.DeepCopy()}
	if !p.charged(pod) {
		return out, nil
	}
	return Add(out, containerComputeUsage(podRequests(pod), podLimits(pod))), nil
}

func (p *podEvaluator) charged(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		end := pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
		if p.now().After(end) {
			return false
		}
	}
	return true
}

// containerComputeUsage turns requests and limits into quota names.
func containerComputeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: one.DeepCopy()}
	for _, r := range []struct{ name, req, lim corev1.ResourceName }{
		{corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
		{corev1.ResourceMemory, corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory},
		{corev1.ResourceEphemeralStorage, corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsEphemeralStorage},
	} {
		if q, ok := requests[r.name]; ok {
			out[r.name], out[r.req] = q.DeepCopy(), q.DeepCopy()
		}
		if q, ok := limits[r.name]; ok {
			out[r.lim] = q.DeepCopy()
		}
	}
	for n, q := range requests {
		if strings.HasPrefix(string(n), corev1.ResourceHugePagesPrefix) {
			out[n] = q.DeepCopy()
			out[corev1.DefaultResourceRequestsPrefix+n] = q.DeepCopy()
		} else if isExtended(n) {
			out[corev1.DefaultResourceRequestsPrefix+n] = q.DeepCopy()
		}
	}
	return out
}

func asPod(obj runtime.Object) (*corev1.Pod, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("expect *v1.Pod, got %T", obj)
	}
	return pod, nil
}

func isTerminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// isBestEffort: no cpu or memory request or limit anywhere (the stored
// QoS class when the server set one).
func isBestEffort(pod *corev1.Pod) bool {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass == corev1.PodQOSBestEffort
	}
	compute := func(r *corev1.ResourceRequirements) bool {
		for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := r.Requests[n]; ok && !q.IsZero() {
				return true
			}
			if q, ok := r.Limits[n]; ok && !q.IsZero() {
				return true
			}
		}
		return false
	}
	if pod.Spec.Resources != nil && podLevelResourcesSet(pod) {
		return !compute(pod.Spec.Resources)
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if compute(&cs[i].Resources) {
				return false
			}
		}
	}
	return true
}

func usesCrossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	cross := func(t *corev1.PodAffinityTerm) bool { return len(t.Namespaces) != 0 || t.NamespaceSelector != nil }
	check := func(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) bool {
		for i := range req {
			if cross(&req[i]) {
				return true
			}
		}
		for i := range pref {
			if cross(&pref[i].PodAffinityTerm) {
				return true
			}
		}
		return false
	}
	if pa := a.PodAffinity; pa != nil && check(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	if pa := a.PodAntiAffinity; pa != nil && check(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	return false
}
