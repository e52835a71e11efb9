package validation

import (
	"fmt"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/admission/policy"
)

// validatePoliciesKind validates ValidatingAdmissionPolicies and their
// bindings as upstream's admissionregistration validation does; it
// reports whether obj is one of them.
func validatePoliciesKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		return validateAdmissionPolicy(o), true
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		return validateAdmissionPolicyBinding(o), true
	}
	return nil, false
}

// updatePoliciesKind validates updates. A write to the main resource keeps
// the stored status and one to /status the stored spec, so checking both
// covers either path.
func updatePoliciesKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		prev := old.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		errs := validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta)
		errs = append(errs, validateAdmissionPolicy(o)...)
		return append(errs, validateAdmissionPolicyStatus(&o.Status)...), true
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		prev := old.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		return append(validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta), validateAdmissionPolicyBinding(o)...), true
	}
	return nil, false
}

func validateAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
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
		if len(spec.MatchConstraints.ResourceRules) == 0 {
			errs = append(errs, field.Required(specPath.Child("matchConstraints", "resourceRules"), ""))
		}
	}
	errs = append(errs, validatePolicyMatchConditions(spec.MatchConditions, specPath.Child("matchConditions"))...)
	for i, v := range spec.Variables {
		errs = append(errs, validatePolicyVariable(v, specPath.Child("variables").Index(i))...)
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		msg := "validations or auditAnnotations must contain at least one item"
		errs = append(errs, field.Required(specPath.Child("validations"), msg), field.Required(specPath.Child("auditAnnotations"), msg))
	}
	for i, v := range spec.Validations {
		errs = append(errs, validatePolicyValidation(v, specPath.Child("validations").Index(i))...)
	}
	errs = append(errs, validatePolicyAuditAnnotations(p.Name, spec.AuditAnnotations, specPath.Child("auditAnnotations"))...)
	return append(errs, policy.CompileErrors(spec, specPath)...)
}

func validatePolicyParamKind(pk *admissionregistrationv1.ParamKind, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pk.APIVersion == "" {
		errs = append(errs, field.Required(fld.Child("apiVersion"), ""))
	} else if strings.Count(pk.APIVersion, "/") > 1 {
		errs = append(errs, field.Invalid(fld.Child("apiVersion"), pk.APIVersion, fmt.Sprintf("unexpected GroupVersion string: %v", pk.APIVersion)))
	} else {
		group, version, found := strings.Cut(pk.APIVersion, "/")
		if !found {
			group, version = "", group
		}
		if group != "" {
			if msgs := utilvalidation.IsDNS1123Subdomain(group); len(msgs) > 0 {
				errs = append(errs, field.Invalid(fld.Child("apiVersion"), group, strings.Join(msgs, ",")))
			}
		}
		if version == "" {
			errs = append(errs, field.Invalid(fld.Child("apiVersion"), pk.APIVersion, "version must be specified"))
		} else if msgs := utilvalidation.IsDNS1035Label(version); len(msgs) > 0 {
			errs = append(errs, field.Invalid(fld.Child("apiVersion"), version, strings.Join(msgs, ",")))
		}
	}
	if pk.Kind == "" {
		errs = append(errs, field.Required(fld.Child("kind"), ""))
	} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(fld.Child("kind"), pk.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	return errs
}

func validatePolicyMatchResources(m *admissionregistrationv1.MatchResources, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m == nil {
		return nil
	}
	switch {
	case m.MatchPolicy == nil:
		errs = append(errs, field.Required(fld.Child("matchPolicy"), ""))
	case *m.MatchPolicy != admissionregistrationv1.Exact && *m.MatchPolicy != admissionregistrationv1.Equivalent:
		errs = append(errs, field.NotSupported(fld.Child("matchPolicy"), *m.MatchPolicy, []string{"Equivalent", "Exact"}))
	}
	if m.NamespaceSelector == nil {
		errs = append(errs, field.Required(fld.Child("namespaceSelector"), ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(m.NamespaceSelector, metavalidation.LabelSelectorValidationOptions{}, fld.Child("namespaceSelector"))...)
	}
	if m.ObjectSelector == nil {
		errs = append(errs, field.Required(fld.Child("objectSelector"), ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(m.ObjectSelector, metavalidation.LabelSelectorValidationOptions{}, fld.Child("objectSelector"))...)
	}
	for i, r := range m.ResourceRules {
		errs = append(errs, validatePolicyNamedRule(r, fld.Child("resourceRules").Index(i))...)
	}
	for i, r := range m.ExcludeResourceRules {
		errs = append(errs, validatePolicyNamedRule(r, fld.Child("excludeResourceRules").Index(i))...)
	}
	return errs
}

func validatePolicyNamedRule(r admissionregistrationv1.NamedRuleWithOperations, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, n := range r.ResourceNames {
		for _, msg := range content.IsPathSegmentName(n) {
			errs = append(errs, field.Invalid(fld.Child("resourceNames").Index(i), n, msg))
		}
		if seen[n] {
			errs = append(errs, field.Duplicate(fld.Child("resourceNames").Index(i), n))
		}
		seen[n] = true
	}
	return append(errs, validatePolicyRuleWithOperations(r.RuleWithOperations, fld)...)
}

var policyRuleOperations = []string{"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}

func validatePolicyRuleWithOperations(r admissionregistrationv1.RuleWithOperations, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	ops := fld.Child("operations")
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(ops, ""))
	}
	for i, op := range r.Operations {
		if op == admissionregistrationv1.OperationAll && len(r.Operations) > 1 {
			errs = append(errs, field.Invalid(ops, r.Operations, "if '*' is present, must not specify other operations"))
		}
		if !policyHas(policyRuleOperations, string(op)) {
			errs = append(errs, field.NotSupported(ops.Index(i), op, policyRuleOperations))
		}
	}
	return append(errs, validatePolicyAdmissionRule(r.Rule, fld)...)
}

func policyHas(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func validatePolicyAdmissionRule(r admissionregistrationv1.Rule, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(fld.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && policyHas(r.APIGroups, "*") {
		errs = append(errs, field.Invalid(fld.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(fld.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && policyHas(r.APIVersions, "*") {
		errs = append(errs, field.Invalid(fld.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(fld.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validatePolicyRuleResources(r.Resources, fld.Child("resources"))...)
	if r.Scope != nil && !policyHas([]string{"*", "Cluster", "Namespaced"}, string(*r.Scope)) {
		errs = append(errs, field.NotSupported(fld.Child("scope"), *r.Scope, []string{"*", "Cluster", "Namespaced"}))
	}
	return errs
}

// validatePolicyRuleResources is upstream's validateResources: resource and
// resource/subresource patterns whose wildcards do not overlap.
func validatePolicyRuleResources(resources []string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(fld, ""))
	}
	wildSub, wildRes := map[string]bool{}, map[string]bool{}
	doubleWild, singleWild, plain := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(fld.Index(i), ""))
			continue
		}
		doubleWild = doubleWild || rs == "*/*"
		singleWild = singleWild || rs == "*"
		res, sub, found := strings.Cut(rs, "/")
		if !found {
			plain = rs != "*"
			continue
		}
		if wildSub[res] {
			errs = append(errs, field.Invalid(fld.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if wildRes[sub] {
			errs = append(errs, field.Invalid(fld.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			wildSub[res] = true
		}
		if res == "*" {
			wildRes[sub] = true
		}
	}
	if len(resources) > 1 && doubleWild {
		errs = append(errs, field.Invalid(fld, resources, "if '*/*' is present, must not specify other resources"))
	}
	if singleWild && plain {
		errs = append(errs, field.Invalid(fld, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

func validatePolicyMatchConditions(mcs []admissionregistrationv1.MatchCondition, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(mcs) > 64 {
		errs = append(errs, field.TooMany(fld, len(mcs), 64))
	}
	seen := map[string]bool{}
	for i, mc := range mcs {
		p := fld.Index(i)
		if strings.TrimSpace(mc.Expression) == "" {
			errs = append(errs, field.Required(p.Child("expression"), ""))
		}
		if mc.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			errs = append(errs, metavalidation.ValidateLabelName(mc.Name, p.Child("name"))...)
			if seen[mc.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), mc.Name))
			}
			seen[mc.Name] = true
		}
	}
	return errs
}

var policyCELIdent = regexp.MustCompile("^[_a-zA-Z][_a-zA-Z0-9]*$")

var policyCELReserved = map[string]bool{"true": true, "false": true, "null": true, "in": true, "as": true, "break": true,
	"const": true, "continue": true, "else": true, "for": true, "function": true, "if": true, "import": true,
	"let": true, "loop": true, "package": true, "namespace": true, "return": true, "var": true, "void": true, "while": true}

func validatePolicyVariable(v admissionregistrationv1.Variable, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Name) == "" {
		errs = append(errs, field.Required(fld.Child("name"), "name is not specified"))
	} else if !policyCELIdent.MatchString(v.Name) || policyCELReserved[v.Name] {
		errs = append(errs, field.Invalid(fld.Child("name"), v.Name, "must be a valid CEL identifier"))
	}
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(fld.Child("expression"), "expression is not specified"))
	}
	return errs
}

var policyValidationReasons = []string{"Forbidden", "Invalid", "RequestEntityTooLarge"}

func validatePolicyValidation(v admissionregistrationv1.Validation, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(fld.Child("expression"), "expression is not specified"))
	}
	if v.MessageExpression != "" && strings.TrimSpace(v.MessageExpression) == "" {
		errs = append(errs, field.Invalid(fld.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
	}
	msg := strings.TrimSpace(v.Message)
	switch {
	case v.Message != "" && msg == "":
		errs = append(errs, field.Invalid(fld.Child("message"), v.Message, "must be non-empty if specified"))
	case strings.ContainsAny(msg, "\n\r"):
		errs = append(errs, field.Invalid(fld.Child("message"), v.Message, "must not contain line breaks"))
	}
	if v.Reason != nil && !policyHas(policyValidationReasons, string(*v.Reason)) {
		errs = append(errs, field.NotSupported(fld.Child("reason"), *v.Reason, policyValidationReasons))
	}
	return errs
}

func validatePolicyAuditAnnotations(policyName string, as []admissionregistrationv1.AuditAnnotation, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(as) > 20 {
		errs = append(errs, field.Invalid(fld, as, "must not have more than 20 auditAnnotations"))
	}
	seen := map[string]bool{}
	for i, a := range as {
		p := fld.Index(i)
		if policyName != "" {
			errs = append(errs, metavalidation.ValidateLabelName(policyName+"/"+a.Key, p.Child("key"))...)
		} else {
			errs = append(errs, field.Invalid(p.Child("key"), a.Key, "requires metadata.name be non-empty"))
		}
		if seen[a.Key] {
			errs = append(errs, field.Duplicate(p.Child("key"), a.Key))
		}
		seen[a.Key] = true
		switch ve := strings.TrimSpace(a.ValueExpression); {
		case ve == "":
			errs = append(errs, field.Required(p.Child("valueExpression"), "valueExpression is not specified"))
		case len(ve) > 5*1024:
			errs = append(errs, field.Required(p.Child("valueExpression"), fmt.Sprintf("must not exceed %d bytes in length", 5*1024)))
		}
	}
	return errs
}

func validateAdmissionPolicyStatus(s *admissionregistrationv1.ValidatingAdmissionPolicyStatus) field.ErrorList {
	var errs field.ErrorList
	if s.TypeChecking != nil {
		fld := field.NewPath("status", "typeChecking", "expressionWarnings")
		for i, w := range s.TypeChecking.ExpressionWarnings {
			if w.Warning == "" {
				errs = append(errs, field.Required(fld.Index(i).Child("warning"), ""))
			}
			if strings.TrimSpace(w.FieldRef) == "" {
				errs = append(errs, field.Required(fld.Index(i).Child("fieldRef"), ""))
			}
		}
	}
	return append(errs, metavalidation.ValidateConditions(s.Conditions, field.NewPath("status", "conditions"))...)
}

func validateAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
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
	errs = append(errs, validatePolicyMatchResources(spec.MatchResources, specPath.Child("matchResources"))...)
	return append(errs, validatePolicyValidationActions(spec.ValidationActions, specPath.Child("validationActions"))...)
}

func validatePolicyParamRef(pr *admissionregistrationv1.ParamRef, fld *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	var errs field.ErrorList
	if pr.Name != "" {
		for _, msg := range content.IsPathSegmentName(pr.Name) {
			errs = append(errs, field.Invalid(fld.Child("name"), pr.Name, msg))
		}
		if pr.Selector != nil {
			errs = append(errs, field.Forbidden(fld.Child("name"), `name and selector are mutually exclusive`))
		}
	}
	if pr.Selector != nil {
		errs = append(errs, metavalidation.ValidateLabelSelector(pr.Selector, metavalidation.LabelSelectorValidationOptions{}, fld.Child("selector"))...)
		if pr.Name != "" {
			errs = append(errs, field.Forbidden(fld.Child("selector"), `name and selector are mutually exclusive`))
		}
	}
	if pr.Name == "" && pr.Selector == nil {
		errs = append(errs, field.Required(fld, `one of name or selector must be specified`))
	}
	switch {
	case pr.ParameterNotFoundAction == nil || *pr.ParameterNotFoundAction == "":
		errs = append(errs, field.Required(fld.Child("parameterNotFoundAction"), ""))
	case *pr.ParameterNotFoundAction != admissionregistrationv1.DenyAction && *pr.ParameterNotFoundAction != admissionregistrationv1.AllowAction:
		errs = append(errs, field.NotSupported(fld.Child("parameterNotFoundAction"), pr.ParameterNotFoundAction, []string{"Deny", "Allow"}))
	}
	return errs
}

func validatePolicyValidationActions(actions []admissionregistrationv1.ValidationAction, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[admissionregistrationv1.ValidationAction]bool{}
	for i, a := range actions {
		if a != admissionregistrationv1.Deny && a != admissionregistrationv1.Warn && a != admissionregistrationv1.Audit {
			errs = append(errs, field.NotSupported(fld.Index(i), a, []string{"Audit", "Deny", "Warn"}))
		}
		if seen[a] {
			errs = append(errs, field.Duplicate(fld.Index(i), a))
		}
		seen[a] = true
	}
	if seen[admissionregistrationv1.Deny] && seen[admissionregistrationv1.Warn] {
		errs = append(errs, field.Invalid(fld, actions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if len(seen) == 0 {
		errs = append(errs, field.Required(fld, "at least one validation action is required"))
	}
	return errs
}
