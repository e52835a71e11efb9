package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource names that may appear without a domain in limit ranges.
var standardResourceNames = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceStorage, corev1.ResourceRequestsStorage, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
}

// Resource names that may appear without a domain in resource quotas.
var standardQuotaResourceNames = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsStorage, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourcePersistentVolumeClaims, corev1.ResourceConfigMaps,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
}

// validateResourceName checks a resource name, where names without a domain
// must come from the given standard list (huge pages always qualify).
func validateResourceName(name corev1.ResourceName, standard []corev1.ResourceName, msg string, fldPath *field.Path) field.ErrorList {
	errs := qualifiedName(string(name), fldPath)
	if len(errs) != 0 || strings.Contains(string(name), "/") {
		return errs
	}
	s := strings.TrimPrefix(string(name), corev1.DefaultResourceRequestsPrefix)
	if sets.New(standard...).Has(name) || strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, name, msg)}
}

func validateLimitRange(lr *corev1.LimitRange) field.ErrorList {
	errs := validateMeta(&lr.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	limitsPath := specPath.Child("limits")
	types := sets.New[corev1.LimitType]()
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		idxPath := limitsPath.Index(i)
		errs = append(errs, validateLimitType(item.Type, idxPath.Child("type"))...)
		if types.Has(item.Type) {
			errs = append(errs, field.Duplicate(idxPath.Child("type"), item.Type))
		}
		types.Insert(item.Type)
		errs = append(errs, validateLimitRangeItem(item, idxPath)...)
	}
	return errs
}

func validateLimitType(t corev1.LimitType, fldPath *field.Path) field.ErrorList {
	errs := qualifiedName(string(t), fldPath)
	if !strings.Contains(string(t), "/") && t != corev1.LimitTypePod && t != corev1.LimitTypeContainer && t != corev1.LimitTypePersistentVolumeClaim {
		errs = append(errs, field.Invalid(fldPath, t, "must be a standard limit type or fully qualified"))
	}
	return errs
}

func validateLimitRangeItem(item *corev1.LimitRangeItem, idxPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	lists := []struct {
		name string
		rl   corev1.ResourceList
	}{{"max", item.Max}, {"min", item.Min}, {"default", item.Default}, {"defaultRequest", item.DefaultRequest}, {"maxLimitRequestRatio", item.MaxLimitRequestRatio}}
	keys := sets.New[corev1.ResourceName]()
	for _, l := range lists {
		for name := range l.rl {
			errs = append(errs, validateResourceName(name, standardResourceNames, "must be a standard resource type or fully qualified", idxPath.Child(l.name).Key(string(name)))...)
			keys.Insert(name)
		}
	}
	if item.Type == corev1.LimitTypePod {
		// Pods are never defaulted as a whole; only containers are.
		if len(item.Default) > 0 {
			errs = append(errs, field.Forbidden(idxPath.Child("default"), "may not be specified when `type` is 'Pod'"))
		}
		if len(item.DefaultRequest) > 0 {
			errs = append(errs, field.Forbidden(idxPath.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
		}
	}
	if item.Type == corev1.LimitTypePersistentVolumeClaim {
		_, hasMin := item.Min[corev1.ResourceStorage]
		_, hasMax := item.Max[corev1.ResourceStorage]
		if !hasMin && !hasMax {
			errs = append(errs, field.Required(idxPath.Child("limits"), "either minimum or maximum storage value is required, but neither was provided"))
		}
	}
	for _, name := range sets.List(keys) {
		errs = append(errs, validateLimitOrder(item, name, idxPath)...)
	}
	return errs
}

// validateLimitOrder requires min <= defaultRequest <= default <= max for
// one resource, so that a defaulted container can satisfy its own range.
func validateLimitOrder(item *corev1.LimitRangeItem, name corev1.ResourceName, idxPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	key := string(name)
	minQ, hasMin := item.Min[name]
	maxQ, hasMax := item.Max[name]
	def, hasDef := item.Default[name]
	defReq, hasDefReq := item.DefaultRequest[name]
	greater := func(a, b resource.Quantity) bool { return a.Cmp(b) > 0 }
	if hasMin && hasMax && greater(minQ, maxQ) {
		errs = append(errs, field.Invalid(idxPath.Child("min").Key(key), minQ, fmt.Sprintf("min value %s is greater than max value %s", minQ.String(), maxQ.String())))
	}
	if hasDefReq && hasMin && greater(minQ, defReq) {
		errs = append(errs, field.Invalid(idxPath.Child("defaultRequest").Key(key), defReq, fmt.Sprintf("min value %s is greater than default request value %s", minQ.String(), defReq.String())))
	}
	if hasDefReq && hasMax && greater(defReq, maxQ) {
		errs = append(errs, field.Invalid(idxPath.Child("defaultRequest").Key(key), defReq, fmt.Sprintf("default request value %s is greater than max value %s", defReq.String(), maxQ.String())))
	}
	if hasDefReq && hasDef && greater(defReq, def) {
		errs = append(errs, field.Invalid(idxPath.Child("defaultRequest").Key(key), defReq, fmt.Sprintf("default request value %s is greater than default limit value %s", defReq.String(), def.String())))
	}
	if hasDef && hasMin && greater(minQ, def) {
		errs = append(errs, field.Invalid(idxPath.Child("default").Key(key), minQ, fmt.Sprintf("min value %s is greater than default value %s", minQ.String(), def.String())))
	}
	if hasDef && hasMax && greater(def, maxQ) {
		errs = append(errs, field.Invalid(idxPath.Child("default").Key(key), maxQ, fmt.Sprintf("default value %s is greater than max value %s", def.String(), maxQ.String())))
	}
	if ratio, ok := item.MaxLimitRequestRatio[name]; ok && ratio.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
		errs = append(errs, field.Invalid(idxPath.Child("maxLimitRequestRatio").Key(key), ratio, fmt.Sprintf("ratio %s is less than 1", ratio.String())))
	}
	if !overcommitAllowed(name) && hasDef && hasDefReq && def.Cmp(defReq) != 0 {
		errs = append(errs, field.Invalid(idxPath.Child("defaultRequest").Key(key), defReq,
			fmt.Sprintf("default value %s must equal to defaultRequest value %s in %s", def.String(), defReq.String(), name)))
	}
	return errs
}

func validateResourceQuota(rq *corev1.ResourceQuota) field.ErrorList {
	errs := validateMeta(&rq.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateQuotaList(rq.Spec.Hard, specPath.Child("hard"))...)
	errs = append(errs, validateQuotaList(rq.Status.Hard, field.NewPath("status", "hard"))...)
	errs = append(errs, validateQuotaList(rq.Status.Used, field.NewPath("status", "used"))...)
	scopesPath := specPath.Child("scopes")
	scopes := sets.New[corev1.ResourceQuotaScope]()
	for _, s := range rq.Spec.Scopes {
		if !standardQuotaScope(s) {
			errs = append(errs, field.Invalid(scopesPath, rq.Spec.Scopes, "unsupported scope"))
		}
		scopes.Insert(s)
	}
	// A pod is either best-effort or not, terminating or not: such a pair
	// of scopes can never match anything.
	for _, pair := range [][2]corev1.ResourceQuotaScope{
		{corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort},
		{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating},
	} {
		if scopes.HasAll(pair[0], pair[1]) {
			errs = append(errs, field.Invalid(scopesPath, rq.Spec.Scopes, "conflicting scopes"))
		}
	}
	if sel := rq.Spec.ScopeSelector; sel != nil {
		for i, req := range sel.MatchExpressions {
			p := specPath.Child("scopeSelector", "matchExpressions").Index(i)
			if !standardQuotaScope(req.ScopeName) {
				errs = append(errs, field.Invalid(p.Child("scopeName"), req.ScopeName, "unsupported scope"))
			}
			errs = append(errs, enum(req.Operator, p.Child("operator"), corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn,
				corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist)...)
		}
	}
	return errs
}

func standardQuotaScope(s corev1.ResourceQuotaScope) bool {
	switch s {
	case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
		corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity,
		corev1.ResourceQuotaScopeVolumeAttributesClass:
		return true
	}
	return false
}

func validateQuotaList(list corev1.ResourceList, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range list {
		p := fldPath.Key(string(name))
		errs = append(errs, validateResourceName(name, standardQuotaResourceNames, "must be a standard resource for quota", p)...)
		errs = append(errs, validateQuantity(name, q, p)...)
	}
	return errs
}

func validateResourceQuotaUpdate(rq, old *corev1.ResourceQuota) field.ErrorList {
	errs := validateMetaUpdate(&rq.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateResourceQuota(rq)...)
	// Usage was counted against the old scopes; changing them would make
	// the recorded usage meaningless.
	if !sets.New(rq.Spec.Scopes...).Equal(sets.New(old.Spec.Scopes...)) {
		errs = append(errs, field.Invalid(specPath.Child("scopes"), rq.Spec.Scopes, "field is immutable"))
	}
	return errs
}
