package validation

import (
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/admission/policy"
)

// validateMutatingPoliciesKind validates MutatingAdmissionPolicies and
// their bindings as upstream's admissionregistration validation does; it
// reports whether obj is one of them.
func validateMutatingPoliciesKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingAdmissionPolicy:
		return validateMutatingAdmissionPolicy(o), true
	case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
		return validateMutatingAdmissionPolicyBinding(o), true
	}
	return nil, false
}

func updateMutatingPoliciesKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingAdmissionPolicy:
		prev := old.(*admissionregistrationv1.MutatingAdmissionPolicy)
		return append(validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta), validateMutatingAdmissionPolicy(o)...), true
	case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
		prev := old.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
		return append(validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta), validateMutatingAdmissionPolicyBinding(o)...), true
	}
	return nil, false
}

// mutatingOperations are what a mutating policy may match: it cannot
// mutate a DELETE.
var mutatingOperations = []string{"*", "CONNECT", "CREATE", "UPDATE"}

var reinvocationPolicies = []string{"IfNeeded", "Never"}

func validateMutatingAdmissionPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) field.ErrorList {
	errs := validateMeta(&p.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	spec := &p.Spec
	switch {
	case spec.FailurePolicy == nil:
		errs = append(errs, field.Required(specPath.Child("failurePolicy"), ""))
	case *spec.FailurePolicy != admissionregistrationv1.Fail && *spec.FailurePolicy != admissionregistrationv1.Ignore:
		errs = append(errs, field.NotSupported(specPath.Child("failurePolicy"), *spec.FailurePolicy, []string{"Fail", "Ignore"}))
	}
	if spec.ParamKind != nil {
		errs = append(errs, validatePolicyParamKind(spec.ParamKind, specPath.Child("paramKind"))...)
	}
	if spec.MatchConstraints == nil {
		errs = append(errs, field.Required(specPath.Child("matchConstraints"), ""))
	} else {
		errs = append(errs, validatePolicyMatchResources(spec.MatchConstraints, specPath.Child("matchConstraints"))...)
		// The rules give the expressions their types.
		if len(spec.MatchConstraints.ResourceRules) == 0 {
			errs = append(errs, field.Required(specPath.Child("matchConstraints", "resourceRules"), ""))
		}
		errs = append(errs, validateMutatingOperations(spec.MatchConstraints, specPath.Child("matchConstraints", "resourceRules", "operations"))...)
	}
	errs = append(errs, validatePolicyMatchConditions(spec.MatchConditions, specPath.Child("matchConditions"))...)
	for i, v := range spec.Variables {
		errs = append(errs, validatePolicyVariable(v, specPath.Child("variables").Index(i))...)
	}
	if len(spec.Mutations) == 0 {
		errs = append(errs, field.Required(specPath.Child("mutations"), "mutations must contain at least one item"))
	}
	for i, m := range spec.Mutations {
		errs = append(errs, validateMutation(m, specPath.Child("mutations").Index(i))...)
	}
	switch {
	case spec.ReinvocationPolicy == "":
		errs = append(errs, field.Required(specPath.Child("reinvocationPolicy"), ""))
	case !policyHas(reinvocationPolicies, string(spec.ReinvocationPolicy)):
		errs = append(errs, field.NotSupported(specPath.Child("reinvocationPolicy"), spec.ReinvocationPolicy, reinvocationPolicies))
	}
	return append(errs, policy.CompileMutatingErrors(spec, specPath)...)
}

func validateMutatingOperations(m *admissionregistrationv1.MatchResources, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, rule := range m.ResourceRules {
		for _, op := range rule.Operations {
			if !policyHas(mutatingOperations, string(op)) {
				errs = append(errs, field.NotSupported(fld, op, mutatingOperations))
			}
		}
	}
	return errs
}

// validateMutation checks the patch type union; the expressions' compile
// errors come from policy.CompileMutatingErrors.
func validateMutation(m admissionregistrationv1.Mutation, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch m.PatchType {
	case "":
		errs = append(errs, field.Required(fld.Child("patchType"), ""))
	case admissionregistrationv1.PatchTypeJSONPatch:
		if m.JSONPatch == nil {
			errs = append(errs, field.Required(fld.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
		} else if isBlank(m.JSONPatch.Expression) {
			errs = append(errs, field.Required(fld.Child("jsonPatch", "expression"), ""))
		}
		if m.ApplyConfiguration != nil {
			errs = append(errs, field.Invalid(fld.Child("applyConfiguration"), "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
		}
	case admissionregistrationv1.PatchTypeApplyConfiguration:
		if m.ApplyConfiguration == nil {
			errs = append(errs, field.Required(fld.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
		} else if isBlank(m.ApplyConfiguration.Expression) {
			errs = append(errs, field.Required(fld.Child("applyConfiguration", "expression"), ""))
		}
		if m.JSONPatch != nil {
			errs = append(errs, field.Invalid(fld.Child("jsonPatch"), "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
		}
	default:
		errs = append(errs, field.NotSupported(fld.Child("patchType"), m.PatchType, []string{"ApplyConfiguration", "JSONPatch"}))
	}
	return errs
}

func validateMutatingAdmissionPolicyBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	errs := validateMeta(&b.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	spec := &b.Spec
	if spec.PolicyName == "" {
		errs = append(errs, field.Required(specPath.Child("policyName"), ""))
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.PolicyName, false) {
			errs = append(errs, field.Invalid(specPath.Child("policyName"), spec.PolicyName, msg))
		}
	}
	errs = append(errs, validatePolicyParamRef(spec.ParamRef, specPath.Child("paramRef"))...)
	if spec.MatchResources != nil {
		errs = append(errs, validatePolicyMatchResources(spec.MatchResources, specPath.Child("matchResources"))...)
		errs = append(errs, validateMutatingOperations(spec.MatchResources, specPath.Child("matchResources", "resourceRules", "operations"))...)
	}
	return errs
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }
