package validation

import (
	"math"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const podUpdateForbidden = "pod updates may not change fields other than `spec.containers[*].image`," +
	"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations)," +
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	errs := validateMetaUpdate(&pod.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePodSpec(&pod.Spec, true, specPath)...)
	if len(pod.Spec.Containers) != len(old.Spec.Containers) {
		return append(errs, field.Forbidden(specPath.Child("containers"), "pod updates may not add or remove containers"))
	}
	if len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		return append(errs, field.Forbidden(specPath.Child("initContainers"), "pod updates may not add or remove containers"))
	}
	if dErrs := validateActiveDeadlineUpdate(pod.Spec.ActiveDeadlineSeconds, old.Spec.ActiveDeadlineSeconds,
		specPath.Child("activeDeadlineSeconds")); len(dErrs) != 0 {
		return append(errs, dErrs...)
	}
	errs = append(errs, validateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)
	errs = append(errs, validateSchedulingGatesUpdate(pod.Spec.SchedulingGates, old.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)
	merged := mergeMutablePodFields(&pod.Spec, &old.Spec)
	if !semanticEqual(merged, &pod.Spec) {
		detail := podUpdateForbidden
		if changed := changedPodSpecFields(merged, &pod.Spec); len(changed) != 0 {
			detail += "\nchanged: " + strings.Join(changed, ", ")
		}
		errs = append(errs, field.Forbidden(specPath, detail))
	}
	return errs
}

// mergeMutablePodFields returns the old spec with every field a pod update
// may change taken from the new one; if that differs from the new spec, the
// update touched something immutable.
func mergeMutablePodFields(spec, old *corev1.PodSpec) *corev1.PodSpec {
	merged := old.DeepCopy()
	for i := range merged.Containers {
		merged.Containers[i].Image = spec.Containers[i].Image
	}
	for i := range merged.InitContainers {
		merged.InitContainers[i].Image = spec.InitContainers[i].Image
	}
	merged.ActiveDeadlineSeconds = spec.ActiveDeadlineSeconds
	merged.Tolerations = spec.Tolerations
	merged.SchedulingGates = spec.SchedulingGates
	// Negative grace periods were once accepted and are now repaired to 1.
	if g := old.TerminationGracePeriodSeconds; g != nil && *g < 0 && deref(spec.TerminationGracePeriodSeconds, 0) == 1 {
		merged.TerminationGracePeriodSeconds = spec.TerminationGracePeriodSeconds
	}
	// While the pod is held back by scheduling gates its placement may still
	// be narrowed by adding node selector terms.
	if len(old.SchedulingGates) != 0 && selectorOnlyAdds(spec.NodeSelector, old.NodeSelector) {
		merged.NodeSelector = spec.NodeSelector
	}
	return merged
}

func selectorOnlyAdds(spec, old map[string]string) bool {
	for k, v := range old {
		if nv, ok := spec[k]; !ok || nv != v {
			return false
		}
	}
	return true
}

// changedPodSpecFields names the top-level spec fields that differ, to tell
// the user what the update tried to change.
func changedPodSpecFields(a, b *corev1.PodSpec) []string {
	var changed []string
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	t := va.Type()
	for i := 0; i < t.NumField(); i++ {
		if semanticEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		changed = append(changed, "spec."+name)
	}
	return changed
}

func validateActiveDeadlineUpdate(newVal, oldVal *int64, fldPath *field.Path) field.ErrorList {
	switch {
	case newVal == nil && oldVal != nil:
		return field.ErrorList{field.Invalid(fldPath, newVal, "must not update from a positive integer to nil value")}
	case newVal == nil:
		return nil
	case *newVal < 0 || *newVal > math.MaxInt32:
		return inInt32Range(*newVal, 0, fldPath)
	case oldVal != nil && *oldVal < *newVal:
		return field.ErrorList{field.Invalid(fldPath, *newVal, "must be less than or equal to previous value")}
	}
	return nil
}

// validateOnlyAddedTolerations lets an update add tolerations and adjust
// tolerationSeconds, but not drop or rewrite existing ones: the pod may
// already be running on a node only because of them.
func validateOnlyAddedTolerations(tolerations, old []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, o := range old {
		found := false
		for _, n := range tolerations {
			candidate := o
			candidate.TolerationSeconds = n.TolerationSeconds
			if reflect.DeepEqual(candidate, n) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

// validateSchedulingGatesUpdate: gates can only be removed; adding one to a
// pod that may already be scheduled would have no effect.
func validateSchedulingGatesUpdate(gates, old []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	oldNames := map[string]bool{}
	for _, g := range old {
		oldNames[g.Name] = true
	}
	for i, g := range gates {
		if !oldNames[g.Name] {
			return field.ErrorList{field.Forbidden(fldPath.Index(i), "only deletion is allowed, but found new scheduling gate '"+g.Name+"'")}
		}
	}
	return nil
}
