package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validateTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		idxPath := fldPath.Index(i)
		if t.Key != "" {
			errs = append(errs, metavalidation.ValidateLabelName(t.Key, idxPath.Child("key"))...)
		}
		// An empty key can only mean "tolerate everything".
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(idxPath.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := content.IsLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(idxPath.Child("operator"), t, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, notSupported(idxPath.Child("operator"), t.Operator, corev1.TolerationOpEqual, corev1.TolerationOpExists)...)
		}
		if t.Effect != "" {
			errs = append(errs, validateTaintEffect(t.Effect, idxPath.Child("effect"))...)
		}
	}
	return errs
}

func validateTaintEffect(effect corev1.TaintEffect, fldPath *field.Path) field.ErrorList {
	return enum(effect, fldPath, corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute)
}

// validateTaints checks node taints; a key may carry each effect once.
func validateTaints(taints []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.TaintEffect]sets.Set[string]{}
	for i, t := range taints {
		idxPath := fldPath.Index(i)
		errs = append(errs, metavalidation.ValidateLabelName(t.Key, idxPath.Child("key"))...)
		if msgs := content.IsLabelValue(t.Value); len(msgs) != 0 {
			errs = append(errs, field.Invalid(idxPath.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		errs = append(errs, validateTaintEffect(t.Effect, idxPath.Child("effect"))...)
		if seen[t.Effect].Has(t.Key) {
			dup := field.Duplicate(idxPath, t)
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if seen[t.Effect] == nil {
			seen[t.Effect] = sets.New[string]()
		}
		seen[t.Effect].Insert(t.Key)
	}
	return errs
}

func validateAffinity(a *corev1.Affinity, fldPath *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		naPath := fldPath.Child("nodeAffinity")
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			errs = append(errs, validateNodeSelector(na.RequiredDuringSchedulingIgnoredDuringExecution, naPath.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		prefPath := naPath.Child("preferredDuringSchedulingIgnoredDuringExecution")
		for i, term := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			errs = append(errs, validateWeight(term.Weight, prefPath.Index(i).Child("weight"))...)
			errs = append(errs, validateNodeSelectorTerm(term.Preference, prefPath.Index(i).Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAntiAffinity"))...)
	}
	return errs
}

func validateWeight(w int32, fldPath *field.Path) field.ErrorList {
	if w <= 0 || w > 100 {
		return field.ErrorList{field.Invalid(fldPath, w, "must be in the range 1-100")}
	}
	return nil
}

func validateNodeSelector(ns *corev1.NodeSelector, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, term := range ns.NodeSelectorTerms {
		errs = append(errs, validateNodeSelectorTerm(term, termsPath.Index(i))...)
	}
	return errs
}

func validateNodeSelectorTerm(term corev1.NodeSelectorTerm, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, req := range term.MatchExpressions {
		errs = append(errs, validateNodeSelectorRequirement(req, fldPath.Child("matchExpressions").Index(i))...)
	}
	for i, req := range term.MatchFields {
		errs = append(errs, validateNodeFieldRequirement(req, fldPath.Child("matchFields").Index(i))...)
	}
	return errs
}

func validateNodeSelectorRequirement(req corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	valuesPath := fldPath.Child("values")
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(valuesPath, "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(valuesPath, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(valuesPath, "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		errs = append(errs, field.Invalid(fldPath.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	return append(errs, metavalidation.ValidateLabelName(req.Key, fldPath.Child("key"))...)
}

// validateNodeFieldRequirement: node fields can only be matched by name, so
// exactly one value with In or NotIn is meaningful.
func validateNodeFieldRequirement(req corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(fldPath.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	default:
		errs = append(errs, field.Invalid(fldPath.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	if req.Key != "metadata.name" {
		return append(errs, field.Invalid(fldPath.Child("key"), req.Key, "not a valid field selector key"))
	}
	for i, v := range req.Values {
		errs = append(errs, messages(fldPath.Child("values").Index(i), v, apivalidation.NameIsDNSSubdomain(v, false))...)
	}
	return errs
}

func validatePodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	reqPath := fldPath.Child("requiredDuringSchedulingIgnoredDuringExecution")
	for i, term := range required {
		errs = append(errs, validatePodAffinityTerm(term, reqPath.Index(i))...)
	}
	prefPath := fldPath.Child("preferredDuringSchedulingIgnoredDuringExecution")
	for i, wt := range preferred {
		errs = append(errs, validateWeight(wt.Weight, prefPath.Index(i).Child("weight"))...)
		errs = append(errs, validatePodAffinityTerm(wt.PodAffinityTerm, prefPath.Index(i).Child("podAffinityTerm"))...)
	}
	return errs
}

func validatePodAffinityTerm(term corev1.PodAffinityTerm, fldPath *field.Path) field.ErrorList {
	errs := validateLabelSelector(term.LabelSelector, fldPath.Child("labelSelector"))
	errs = append(errs, validateLabelSelector(term.NamespaceSelector, fldPath.Child("namespaceSelector"))...)
	for _, ns := range term.Namespaces {
		errs = append(errs, messages(fldPath.Child("namespace"), ns, apivalidation.ValidateNamespaceName(ns, false))...)
	}
	errs = append(errs, validateMatchLabelKeys(term.MatchLabelKeys, term.MismatchLabelKeys, fldPath)...)
	if term.TopologyKey == "" {
		errs = append(errs, field.Required(fldPath.Child("topologyKey"), "can not be empty"))
	}
	return append(errs, metavalidation.ValidateLabelName(term.TopologyKey, fldPath.Child("topologyKey"))...)
}

// validateMatchLabelKeys: a key may not be both matched and mismatched.
func validateMatchLabelKeys(match, mismatch []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, k := range match {
		errs = append(errs, metavalidation.ValidateLabelName(k, fldPath.Child("matchLabelKeys").Index(i))...)
	}
	matchSet := sets.New(match...)
	for i, k := range mismatch {
		p := fldPath.Child("mismatchLabelKeys").Index(i)
		errs = append(errs, metavalidation.ValidateLabelName(k, p)...)
		if matchSet.Has(k) {
			errs = append(errs, field.Invalid(p, k, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
	return errs
}

func validateTopologySpread(constraints []corev1.TopologySpreadConstraint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range constraints {
		p := fldPath.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
		} else {
			errs = append(errs, metavalidation.ValidateLabelName(c.TopologyKey, p.Child("topologyKey"))...)
		}
		errs = append(errs, enum(c.WhenUnsatisfiable, p.Child("whenUnsatisfiable"), corev1.DoNotSchedule, corev1.ScheduleAnyway)...)
		key := fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)
		if seen.Has(key) {
			errs = append(errs, field.Duplicate(p.Child("{topologyKey, whenUnsatisfiable}"), key))
		}
		seen.Insert(key)
		if c.MinDomains != nil {
			if *c.MinDomains <= 0 {
				errs = append(errs, field.Invalid(p.Child("minDomains"), *c.MinDomains, "must be greater than zero"))
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				errs = append(errs, field.Invalid(p.Child("minDomains"), *c.MinDomains,
					fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", corev1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		if c.NodeAffinityPolicy != nil {
			errs = append(errs, enum(*c.NodeAffinityPolicy, p.Child("nodeAffinityPolicy"), corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore)...)
		}
		if c.NodeTaintsPolicy != nil {
			errs = append(errs, enum(*c.NodeTaintsPolicy, p.Child("nodeTaintsPolicy"), corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore)...)
		}
		errs = append(errs, validateLabelSelector(c.LabelSelector, p.Child("labelSelector"))...)
	}
	return errs
}
