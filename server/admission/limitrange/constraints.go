package limitrange

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// validatePod checks every container and init container against lr's
// Container items and the pod's totals against its Pod items. All
// violations of one LimitRange are reported together, in upstream's words.
func validatePod(lr *corev1.LimitRange, pod *corev1.Pod) error {
	var errs []error
	for _, item := range lr.Spec.Limits {
		switch item.Type {
		case corev1.LimitTypeContainer:
			for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
				for i := range cs {
					errs = append(errs, checkItem(item, cs[i].Resources.Requests, cs[i].Resources.Limits)...)
				}
			}
		case corev1.LimitTypePod:
			errs = append(errs, checkItem(item, podTotal(pod, false), podTotal(pod, true))...)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// checkItem holds requests and limits to one item's min, max and
// maxLimitRequestRatio.
func checkItem(item corev1.LimitRangeItem, requests, limits corev1.ResourceList) []error {
	kind := string(item.Type)
	var errs []error
	for _, name := range sortedNames(item.Min) {
		errs = appendErr(errs, minConstraint(kind, name, item.Min[name], requests, limits))
	}
	for _, name := range sortedNames(item.Max) {
		errs = appendErr(errs, maxConstraint(kind, name, item.Max[name], requests, limits))
	}
	for _, name := range sortedNames(item.MaxLimitRequestRatio) {
		errs = appendErr(errs, ratioConstraint(kind, name, item.MaxLimitRequestRatio[name], requests, limits))
	}
	return errs
}

// validateClaim holds a claim's storage requests to lr's
// PersistentVolumeClaim items. Claims are never defaulted (a claim must
// ask for its size) and their limits are not user input, so only requests
// count, for max as well.
func validateClaim(lr *corev1.LimitRange, pvc *corev1.PersistentVolumeClaim) error {
	var errs []error
	requests := pvc.Spec.Resources.Requests
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypePersistentVolumeClaim {
			continue
		}
		kind := string(item.Type)
		for _, name := range sortedNames(item.Min) {
			errs = appendErr(errs, minConstraint(kind, name, item.Min[name], requests, nil))
		}
		for _, name := range sortedNames(item.Max) {
			errs = appendErr(errs, maxRequestConstraint(kind, name, item.Max[name], requests))
		}
	}
	return utilerrors.NewAggregate(errs)
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// sortedNames are the list's resource names in order: upstream walks the
// map at random, a fixed order keeps messages stable.
func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// atCommonScale returns the three quantities at a common precision: milli
// units when none would overflow, else whole units (upstream's
// requestLimitEnforcedValues).
func atCommonScale(request, limit, enforced resource.Quantity) (req, lim, enf int64) {
	req, lim, enf = request.Value(), limit.Value(), enforced.Value()
	if req <= resource.MaxMilliValue && lim <= resource.MaxMilliValue && enf <= resource.MaxMilliValue {
		req, lim, enf = request.MilliValue(), limit.MilliValue(), enforced.MilliValue()
	}
	return req, lim, enf
}

func minConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	reqV, limV, enfV := atCommonScale(req, lim, enforced)
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, kind, enforced.String())
	case reqV < enfV:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	case hasLim && limV < enfV:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
	}
	return nil
}

// maxRequestConstraint is max for kinds whose limits are not theirs to set
// (claims): the request is held to it.
func maxRequestConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests corev1.ResourceList) error {
	req, hasReq := requests[name]
	reqV, _, enfV := atCommonScale(req, resource.Quantity{}, enforced)
	switch {
	case !hasReq:
		return fmt.Errorf("maximum %s usage per %s is %s.  No request is specified", name, kind, enforced.String())
	case reqV > enfV:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	}
	return nil
}

func maxConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	reqV, limV, enfV := atCommonScale(req, lim, enforced)
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, kind, enforced.String())
	case limV > enfV:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
	case hasReq && reqV > enfV:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	}
	return nil
}

func ratioConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	reqV, limV, _ := atCommonScale(req, lim, enforced)
	if !hasReq || reqV == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, kind, enforced.String())
	}
	if !hasLim || limV == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, kind, enforced.String())
	}
	ratio := float64(limV) / float64(reqV)
	observed, allowed := ratio, float64(enforced.Value())
	if enforced.Value() <= resource.MaxMilliValue {
		observed, allowed = ratio*1000, float64(enforced.MilliValue())
	}
	if observed > allowed {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, kind, enforced.String(), ratio)
	}
	return nil
}

// podLevelResources are the resources a pod's spec.resources may set
// (PodLevelResources, on by default since 1.34).
var podLevelResources = map[corev1.ResourceName]bool{corev1.ResourceCPU: true, corev1.ResourceMemory: true}

// podTotal is what the pod as a whole requests (or, with limits, limits), from the spec
// only, as upstream's podRequests/podLimits: the sum of the containers and
// the sidecars (restartable init containers), or the largest init
// container plus the sidecars started before it when that is more, and
// spec.resources in place of the sum for cpu and memory when it is set.
func podTotal(pod *corev1.Pod, limits bool) corev1.ResourceList {
	of := func(c *corev1.Container) corev1.ResourceList {
		if limits {
			return c.Resources.Limits
		}
		return c.Resources.Requests
	}
	total := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		add(total, of(&pod.Spec.Containers[i]))
	}
	sidecars, initMax := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var during corev1.ResourceList
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(total, of(c))
			add(sidecars, of(c))
			during = sidecars
		} else {
			during = corev1.ResourceList{}
			add(during, of(c))
			add(during, sidecars)
		}
		maxOf(initMax, during)
	}
	maxOf(total, initMax)
	if r := pod.Spec.Resources; r != nil {
		level := r.Requests
		if limits {
			level = r.Limits
		}
		for name, q := range level {
			if podLevelResources[name] {
				total[name] = q.DeepCopy()
			}
		}
	}
	return total
}

func add(dst, src corev1.ResourceList) {
	for name, q := range src {
		sum, ok := dst[name]
		if !ok {
			dst[name] = q.DeepCopy()
			continue
		}
		sum.Add(q)
		dst[name] = sum
	}
}

func maxOf(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}
