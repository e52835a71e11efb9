package validation

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateWorkloadSelector checks the label selector of a replicated
// workload; kind is used in upstream's wording of the empty-selector error.
func validateWorkloadSelector(sel *metav1.LabelSelector, kind string, fldPath *field.Path) (labels.Selector, field.ErrorList) {
	var errs field.ErrorList
	selPath := fldPath.Child("selector")
	if sel == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, validateLabelSelector(sel, selPath)...)
		// An empty selector would adopt every pod in the namespace.
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, sel, "empty selector is invalid for "+kind))
		}
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, append(errs, field.Invalid(selPath, sel, "invalid label selector"))
	}
	return s, errs
}

// validateReplicatedTemplate validates the pod template of a controller that
// keeps pods running forever: only restartPolicy Always makes sense, and a
// deadline would kill the pods the controller is meant to keep.
func validateReplicatedTemplate(tmpl *corev1.PodTemplateSpec, sel labels.Selector, kind string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sel != nil {
		errs = append(errs, selectorMatchesTemplate(sel, tmpl.Labels, fldPath)...)
	}
	errs = append(errs, validatePodTemplateSpec(tmpl, fldPath)...)
	errs = append(errs, alwaysRestart(&tmpl.Spec, kind, fldPath.Child("spec"))...)
	return errs
}

func alwaysRestart(spec *corev1.PodSpec, kind string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, notSupported(fldPath.Child("restartPolicy"), spec.RestartPolicy, corev1.RestartPolicyAlways)...)
	}
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("activeDeadlineSeconds"), fmt.Sprintf("activeDeadlineSeconds in %s is not Supported", kind)))
	}
	return errs
}

func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	errs := validateMeta(&d.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	spec := &d.Spec
	errs = append(errs, nonNegative(int64(deref(spec.Replicas, 0)), specPath.Child("replicas"))...)
	sel, selErrs := validateWorkloadSelector(spec.Selector, "deployment", specPath)
	errs = append(errs, selErrs...)
	errs = append(errs, validateReplicatedTemplate(&spec.Template, sel, "ReplicaSet", specPath.Child("template"))...)
	errs = append(errs, validateDeploymentStrategy(&spec.Strategy, specPath.Child("strategy"))...)
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*spec.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	if pds := spec.ProgressDeadlineSeconds; pds != nil {
		errs = append(errs, positive(int64(*pds), specPath.Child("progressDeadlineSeconds"))...)
		if *pds <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(specPath.Child("progressDeadlineSeconds"), *pds, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"),
				fmt.Sprintf("may not be specified when strategy `type` is '%s'", appsv1.RecreateDeploymentStrategyType))}
		}
		return nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
	default:
		return notSupported(fldPath.Child("type"), s.Type, appsv1.RecreateDeploymentStrategyType, appsv1.RollingUpdateDeploymentStrategyType)
	}
	ru, ruPath := s.RollingUpdate, fldPath.Child("rollingUpdate")
	errs := positiveIntOrPercent(ru.MaxUnavailable, ruPath.Child("maxUnavailable"))
	errs = append(errs, positiveIntOrPercent(ru.MaxSurge, ruPath.Child("maxSurge"))...)
	// With neither surge nor unavailability a rollout could never progress.
	if u, _, _ := intOrPercentValue(ru.MaxUnavailable); u == 0 {
		if s, _, _ := intOrPercentValue(ru.MaxSurge); s == 0 {
			errs = append(errs, field.Invalid(ruPath.Child("maxUnavailable"), ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0"))
		}
	}
	return append(errs, notMoreThan100Percent(ru.MaxUnavailable, ruPath.Child("maxUnavailable"))...)
}

func validateReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	errs := validateMeta(&rs.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	spec := &rs.Spec
	errs = append(errs, nonNegative(int64(deref(spec.Replicas, 0)), specPath.Child("replicas"))...)
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	// Upstream words the ReplicaSet error as for deployments; kept verbatim.
	sel, selErrs := validateWorkloadSelector(spec.Selector, "deployment", specPath)
	errs = append(errs, selErrs...)
	return append(errs, validateReplicatedTemplate(&spec.Template, sel, "ReplicaSet", specPath.Child("template"))...)
}

func validateDaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	errs := validateMeta(&ds.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	spec := &ds.Spec
	selPath := specPath.Child("selector")
	errs = append(errs, validateLabelSelector(spec.Selector, selPath)...)
	// A missing selector selects nothing, which the template check reports.
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !sel.Matches(labels.Set(spec.Template.Labels)) {
		errs = append(errs, field.Invalid(specPath.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	if spec.Selector != nil && len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(selPath, spec.Selector, "empty selector is invalid for daemonset"))
	}
	errs = append(errs, validatePodTemplateSpec(&spec.Template, specPath.Child("template"))...)
	errs = append(errs, alwaysRestart(&spec.Template.Spec, "DaemonSet", specPath.Child("template", "spec"))...)
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*spec.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	return append(errs, validateDaemonSetStrategy(&spec.UpdateStrategy, specPath.Child("updateStrategy"))...)
}

func validateDaemonSetStrategy(s *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
	default:
		return notSupported(fldPath.Child("type"), s.Type, appsv1.RollingUpdateDaemonSetStrategyType, appsv1.OnDeleteDaemonSetStrategyType)
	}
	ru, ruPath := s.RollingUpdate, fldPath.Child("rollingUpdate")
	errs := positiveIntOrPercent(ru.MaxUnavailable, ruPath.Child("maxUnavailable"))
	errs = append(errs, positiveIntOrPercent(ru.MaxSurge, ruPath.Child("maxSurge"))...)
	errs = append(errs, notMoreThan100Percent(ru.MaxUnavailable, ruPath.Child("maxUnavailable"))...)
	errs = append(errs, notMoreThan100Percent(ru.MaxSurge, ruPath.Child("maxSurge"))...)
	// One pod per node: the update either replaces in place or surges, and
	// must do exactly one of the two to make progress.
	u, _, _ := intOrPercentValue(ru.MaxUnavailable)
	sg, _, _ := intOrPercentValue(ru.MaxSurge)
	switch {
	case u != 0 && sg != 0:
		errs = append(errs, field.Invalid(ruPath.Child("maxSurge"), ru.MaxSurge, "may not be set when maxUnavailable is non-zero"))
	case u == 0 && sg == 0:
		errs = append(errs, field.Required(ruPath.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

func validateStatefulSet(ss *appsv1.StatefulSet) field.ErrorList {
	errs := validateMeta(&ss.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	spec := &ss.Spec
	errs = append(errs, validateStatefulSetPolicies(spec)...)
	errs = append(errs, nonNegative(int64(deref(spec.Replicas, 0)), specPath.Child("replicas"))...)
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*spec.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	if spec.Ordinals != nil {
		errs = append(errs, nonNegative(int64(spec.Ordinals.Start), specPath.Child("ordinals", "start"))...)
	}
	sel, selErrs := validateWorkloadSelector(spec.Selector, "statefulset", specPath)
	errs = append(errs, selErrs...)
	if sel != nil {
		errs = append(errs, selectorMatchesTemplate(sel, spec.Template.Labels, specPath.Child("template"))...)
	}
	errs = append(errs, validatePodTemplateSpec(statefulSetTemplate(spec), specPath.Child("template"))...)
	errs = append(errs, alwaysRestart(&spec.Template.Spec, "StatefulSet", specPath.Child("template", "spec"))...)
	claimsPath := specPath.Child("volumeClaimTemplates")
	for i := range spec.VolumeClaimTemplates {
		claim := &spec.VolumeClaimTemplates[i]
		if claim.Name == "" {
			errs = append(errs, field.Required(claimsPath.Index(i).Child("metadata", "name"), ""))
		} else {
			errs = append(errs, dns1123Label(claim.Name, claimsPath.Index(i).Child("metadata", "name"))...)
		}
		errs = append(errs, validatePVCSpec(&claim.Spec, claimsPath.Index(i).Child("spec"))...)
	}
	return errs
}

// statefulSetTemplate returns the template as its pods will see it: every
// claim template becomes a volume, so containers may mount claims by name.
func statefulSetTemplate(spec *appsv1.StatefulSetSpec) *corev1.PodTemplateSpec {
	if len(spec.VolumeClaimTemplates) == 0 {
		return &spec.Template
	}
	tmpl := spec.Template.DeepCopy()
	names := sets.New[string]()
	for _, v := range tmpl.Spec.Volumes {
		names.Insert(v.Name)
	}
	for _, claim := range spec.VolumeClaimTemplates {
		if claim.Name == "" || names.Has(claim.Name) || len(dns1123Label(claim.Name, specPath)) != 0 {
			continue
		}
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
		}})
	}
	return tmpl
}

func validateStatefulSetPolicies(spec *appsv1.StatefulSetSpec) field.ErrorList {
	var errs field.ErrorList
	switch spec.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(specPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(specPath.Child("podManagementPolicy"), spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	usPath := specPath.Child("updateStrategy")
	us := spec.UpdateStrategy
	switch us.Type {
	case "":
		errs = append(errs, field.Required(usPath, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if us.RollingUpdate != nil {
			errs = append(errs, field.Invalid(usPath.Child("rollingUpdate"), us.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := us.RollingUpdate; ru != nil {
			errs = append(errs, nonNegative(int64(deref(ru.Partition, 0)), usPath.Child("rollingUpdate", "partition"))...)
			errs = append(errs, positiveIntOrPercent(ru.MaxUnavailable, usPath.Child("rollingUpdate", "maxUnavailable"))...)
		}
	default:
		errs = append(errs, field.Invalid(usPath, us, fmt.Sprintf("must be '%s' or '%s'",
			appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		pp := specPath.Child("persistentVolumeClaimRetentionPolicy")
		valid := []appsv1.PersistentVolumeClaimRetentionPolicyType{appsv1.DeletePersistentVolumeClaimRetentionPolicyType, appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
		errs = append(errs, enum(p.WhenDeleted, pp.Child("whenDeleted"), valid...)...)
		errs = append(errs, enum(p.WhenScaled, pp.Child("whenScaled"), valid...)...)
	}
	return errs
}

// validateStatefulSetUpdate: pod identity and storage are derived from the
// rest of the spec, so only the listed fields may change in place.
func validateStatefulSetUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	errs := validateMetaUpdate(&ss.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateStatefulSet(ss)...)
	clone := ss.Spec.DeepCopy()
	clone.Replicas = old.Spec.Replicas
	clone.Template = old.Spec.Template
	clone.UpdateStrategy = old.Spec.UpdateStrategy
	clone.MinReadySeconds = old.Spec.MinReadySeconds
	clone.Ordinals = old.Spec.Ordinals
	clone.RevisionHistoryLimit = old.Spec.RevisionHistoryLimit
	clone.PersistentVolumeClaimRetentionPolicy = old.Spec.PersistentVolumeClaimRetentionPolicy
	if !semanticEqual(*clone, old.Spec) {
		errs = append(errs, field.Forbidden(specPath, "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "+
			"'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
	}
	return errs
}

func validateReplicationController(rc *corev1.ReplicationController) field.ErrorList {
	errs := validateMeta(&rc.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	spec := &rc.Spec
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	sel := labels.Set(spec.Selector).AsSelector()
	if sel.Empty() {
		errs = append(errs, field.Required(specPath.Child("selector"), ""))
	}
	errs = append(errs, validateLabels(spec.Selector, specPath.Child("selector"))...)
	errs = append(errs, nonNegative(int64(deref(spec.Replicas, 0)), specPath.Child("replicas"))...)
	if spec.Template == nil {
		return append(errs, field.Required(specPath.Child("template"), ""))
	}
	return append(errs, validateReplicatedTemplate(spec.Template, sel, "ReplicationController", specPath.Child("template"))...)
}

func validateControllerRevision(cr *appsv1.ControllerRevision) field.ErrorList {
	errs := validateMeta(&cr.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	if cr.Data.Raw == nil && cr.Data.Object == nil {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(errs, nonNegative(cr.Revision, field.NewPath("revision"))...)
}
