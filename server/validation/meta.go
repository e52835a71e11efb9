package validation

import (
	"fmt"
	"math"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type nameFunc = apivalidation.ValidateNameFunc

var (
	metaPath = field.NewPath("metadata")
	specPath = field.NewPath("spec")
)

// nameIsPathSegment is the rule for kinds whose names only have to survive
// being a URL path segment (RBAC roles and bindings, for instance).
func nameIsPathSegment(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// validateMeta checks the metadata of a new object. The request's namespace is
// the API server's business, so for namespaced kinds only the syntax of a
// namespace that is present is checked here.
func validateMeta(m *metav1.ObjectMeta, namespaced bool, nameFn nameFunc) field.ErrorList {
	requiresNamespace := namespaced && m.Namespace != ""
	return apivalidation.ValidateObjectMeta(m, requiresNamespace, nameFn, metaPath)
}

func validateMetaUpdate(m, old *metav1.ObjectMeta) field.ErrorList {
	return apivalidation.ValidateObjectMetaUpdate(m, old, metaPath)
}

func immutable(newVal, oldVal any, fldPath *field.Path) field.ErrorList {
	return apivalidation.ValidateImmutableField(newVal, oldVal, fldPath)
}

func nonNegative(value int64, fldPath *field.Path) field.ErrorList {
	if value < 0 {
		return field.ErrorList{field.Invalid(fldPath, value, "must be greater than or equal to 0")}
	}
	return nil
}

func positive(value int64, fldPath *field.Path) field.ErrorList {
	if value <= 0 {
		return field.ErrorList{field.Invalid(fldPath, value, "must be greater than zero")}
	}
	return nil
}

func deref[T any](p *T, fallback T) T {
	if p == nil {
		return fallback
	}
	return *p
}

func semanticEqual(a, b any) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

// messages turns the string results of the apimachinery predicates into
// Invalid errors at one path.
func messages(fldPath *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func dns1123Label(value string, fldPath *field.Path) field.ErrorList {
	return messages(fldPath, value, content.IsDNS1123Label(value))
}

func dns1123Subdomain(value string, fldPath *field.Path) field.ErrorList {
	return messages(fldPath, value, content.IsDNS1123Subdomain(value))
}

func qualifiedName(value string, fldPath *field.Path) field.ErrorList {
	return messages(fldPath, value, content.IsLabelKey(value))
}

func validateLabels(l map[string]string, fldPath *field.Path) field.ErrorList {
	return metavalidation.ValidateLabels(l, fldPath)
}

func validateAnnotations(a map[string]string, fldPath *field.Path) field.ErrorList {
	return apivalidation.ValidateAnnotations(a, fldPath)
}

func validateLabelSelector(sel *metav1.LabelSelector, fldPath *field.Path) field.ErrorList {
	return metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, fldPath)
}

// legacyIP validates IPs in fields that predate strict parsing; they accept
// non-canonical spellings but not ambiguous ones.
func legacyIP(value string, fldPath *field.Path) field.ErrorList {
	return utilvalidation.IsValidIPForLegacyField(fldPath, value, true, nil)
}

func legacyCIDR(value string, fldPath *field.Path) field.ErrorList {
	return utilvalidation.IsValidCIDRForLegacyField(fldPath, value, true, nil)
}

func portNum(port int32, fldPath *field.Path) field.ErrorList {
	return messages(fldPath, port, utilvalidation.IsValidPortNum(int(port)))
}

// portNumOrName validates an IntOrString that names or numbers a port.
func portNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		return messages(fldPath, port.StrVal, utilvalidation.IsValidPortName(port.StrVal))
	}
	return messages(fldPath, port.IntValue(), utilvalidation.IsValidPortNum(port.IntValue()))
}

// positiveIntOrPercent accepts a non-negative integer or a percentage string.
func positiveIntOrPercent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.String {
		return messages(fldPath, v, utilvalidation.IsValidPercent(v.StrVal))
	}
	return nonNegative(int64(v.IntValue()), fldPath)
}

// intOrPercentValue returns the number an IntOrString stands for, reading a
// percentage as its number of percent; ok is false when it is malformed.
func intOrPercentValue(v *intstr.IntOrString) (value int, isPercent, ok bool) {
	if v == nil {
		return 0, false, true
	}
	if v.Type == intstr.Int {
		return v.IntValue(), false, true
	}
	s, found := strings.CutSuffix(v.StrVal, "%")
	if !found {
		return 0, false, false
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return 0, true, false
	}
	return n, true, true
}

func notMoreThan100Percent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	value, isPercent, ok := intOrPercentValue(v)
	if ok && isPercent && value > 100 {
		return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
	}
	return nil
}

func inInt32Range(value int64, lo int64, fldPath *field.Path) field.ErrorList {
	if value < lo || value > math.MaxInt32 {
		return field.ErrorList{field.Invalid(fldPath, value, utilvalidation.InclusiveRangeError(int(lo), math.MaxInt32))}
	}
	return nil
}

// selectorMatchesTemplate reports the upstream error for a workload whose pod
// template would not be selected by its own selector.
func selectorMatchesTemplate(sel labels.Selector, tmplLabels map[string]string, fldPath *field.Path) field.ErrorList {
	if sel.Empty() || sel.Matches(labels.Set(tmplLabels)) {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath.Child("metadata", "labels"), tmplLabels, "`selector` does not match template `labels`")}
}

// quantityNonNegative is upstream's ValidateResourceQuantityValue core.
func quantityNonNegative(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be greater than or equal to 0")}
	}
	return nil
}

func notSupported[T ~string](fldPath *field.Path, value T, valid ...T) field.ErrorList {
	return field.ErrorList{field.NotSupported(fldPath, value, valid)}
}

// enum validates a required enumerated string field.
func enum[T ~string](value T, fldPath *field.Path, valid ...T) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	for _, v := range valid {
		if value == v {
			return nil
		}
	}
	return notSupported(fldPath, value, valid...)
}

// optionalEnum validates an enumerated string that may be empty.
func optionalEnum[T ~string](value T, fldPath *field.Path, valid ...T) field.ErrorList {
	if value == "" {
		return nil
	}
	return enum(value, fldPath, valid...)
}
