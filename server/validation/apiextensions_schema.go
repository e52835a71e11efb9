package validation

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"skiff/server/cel"
	crdschema "skiff/server/crd/schema"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks of a CRD version's openAPIV3Schema. The structural-schema and
// OpenAPI rules are package crd/schema's and the compilation of CEL rules
// package cel's; the static form of each x-kubernetes-validations entry
// (upstream checks it with the OpenAPI rules) is here.

var newlines = regexp.MustCompile(`[\n\r]+`)

// validateCRDSchema checks one schema (a version's, or the one all versions
// share) at fldPath (spec.versions[i].schema or spec.validation).
func validateCRDSchema(v *apiextensionsv1.CustomResourceValidation, statusEnabled bool, fldPath *field.Path) field.ErrorList {
	if v == nil || v.OpenAPIV3Schema == nil {
		return nil
	}
	s := v.OpenAPIV3Schema
	sp := fldPath.Child("openAPIV3Schema")
	var errs field.ErrorList
	if statusEnabled {
		errs = append(errs, crdschema.CheckStatusSubresourceRoot(s, sp)...)
	}
	structural := crdschema.CheckStructural(s, sp, true)
	var rules field.ErrorList
	walkSchema(s, sp, func(n *apiextensionsv1.JSONSchemaProps, p *field.Path) {
		rules = append(rules, checkValidationRules(n, p)...)
	})
	errs = append(append(errs, structural...), rules...)
	// CEL types come from the schema: a schema that is not structural or
	// breaks the rules above would only give confusing compile errors.
	if len(structural) == 0 && len(rules) == 0 {
		_, celErrs := cel.CompileSchema(s, sp)
		errs = append(errs, celErrs...)
	}
	return errs
}

// walkSchema calls fn for s and every schema below it, with its path, in
// upstream's order of traversal.
func walkSchema(s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path, fn func(*apiextensionsv1.JSONSchemaProps, *field.Path)) {
	if s == nil {
		return
	}
	fn(s, fldPath)
	if s.AdditionalProperties != nil {
		walkSchema(s.AdditionalProperties.Schema, fldPath.Child("additionalProperties"), fn)
	}
	for _, name := range sortedSchemaKeys(s.Properties) {
		p := s.Properties[name]
		walkSchema(&p, fldPath.Child("properties").Key(name), fn)
	}
	walkSchema(s.Not, fldPath.Child("not"), fn)
	for _, junction := range []struct {
		name    string
		schemas []apiextensionsv1.JSONSchemaProps
	}{{"allOf", s.AllOf}, {"oneOf", s.OneOf}, {"anyOf", s.AnyOf}} {
		for i := range junction.schemas {
			walkSchema(&junction.schemas[i], fldPath.Child(junction.name).Index(i), fn)
		}
	}
	for _, name := range sortedSchemaKeys(s.Definitions) {
		d := s.Definitions[name]
		walkSchema(&d, fldPath.Child("definitions").Key(name), fn)
	}
	if s.Items != nil {
		walkSchema(s.Items.Schema, fldPath.Child("items"), fn)
		for i := range s.Items.JSONSchemas {
			walkSchema(&s.Items.JSONSchemas[i], fldPath.Child("items").Index(i), fn)
		}
	}
	for _, name := range sortedSchemaKeys(s.Dependencies) {
		walkSchema(s.Dependencies[name].Schema, fldPath.Child("dependencies").Key(name), fn)
	}
}

// checkValidationRules: the form of each x-kubernetes-validations entry;
// compiling the rule is the CEL package's.
func checkValidationRules(s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range s.XValidations {
		rp := fldPath.Child("x-kubernetes-validations").Index(i)
		rule, msg := strings.TrimSpace(r.Rule), strings.TrimSpace(r.Message)
		switch {
		case rule == "":
			errs = append(errs, field.Required(rp.Child("rule"), "rule is not specified"))
		case r.Message != "" && msg == "":
			errs = append(errs, field.Invalid(rp.Child("message"), r.Message, "must be non-empty if specified"))
		case newlines.MatchString(msg):
			errs = append(errs, field.Invalid(rp.Child("message"), r.Message, "must not contain line breaks"))
		case newlines.MatchString(rule) && msg == "":
			errs = append(errs, field.Required(rp.Child("message"), "message must be specified if rule contains line breaks"))
		}
		if r.MessageExpression != "" && strings.TrimSpace(r.MessageExpression) == "" {
			errs = append(errs, field.Required(rp.Child("messageExpression"), "messageExpression must be non-empty if specified"))
		}
		if r.Reason != nil && !slices.Contains(validationReasons, string(*r.Reason)) {
			errs = append(errs, field.NotSupported(rp.Child("reason"), *r.Reason, validationReasons))
		}
		fp := rp.Child("fieldPath")
		if r.FieldPath != "" && strings.TrimSpace(r.FieldPath) == "" {
			errs = append(errs, field.Invalid(fp, r.FieldPath, "must be non-empty if specified"))
		}
		if newlines.MatchString(r.FieldPath) {
			errs = append(errs, field.Invalid(fp, r.FieldPath, "must not contain line breaks"))
		}
		if r.FieldPath != "" {
			if _, _, err := cel.ValidFieldPath(r.FieldPath, s, true); err != nil {
				errs = append(errs, field.Invalid(fp, r.FieldPath, "must be a valid path"))
			}
		}
	}
	return errs
}

// specHasSchemaWith reports whether pred holds somewhere in a version's
// schema.
func specHasSchemaWith(spec *apiextensionsv1.CustomResourceDefinitionSpec, pred func(*apiextensionsv1.JSONSchemaProps) bool) bool {
	for _, v := range spec.Versions {
		if v.Schema != nil && schemaHas(v.Schema.OpenAPIV3Schema, pred) {
			return true
		}
	}
	return false
}

// schemaHas reports whether pred holds for s or any schema below it.
func schemaHas(s *apiextensionsv1.JSONSchemaProps, pred func(*apiextensionsv1.JSONSchemaProps) bool) bool {
	if s == nil {
		return false
	}
	if pred(s) {
		return true
	}
	var children []*apiextensionsv1.JSONSchemaProps
	if s.Items != nil {
		children = append(children, s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			children = append(children, &s.Items.JSONSchemas[i])
		}
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			children = append(children, &list[i])
		}
	}
	children = append(children, s.Not)
	for _, m := range []map[string]apiextensionsv1.JSONSchemaProps{s.Properties, s.PatternProperties, s.Definitions} {
		for k := range m {
			p := m[k]
			children = append(children, &p)
		}
	}
	if s.AdditionalProperties != nil {
		children = append(children, s.AdditionalProperties.Schema)
	}
	if s.AdditionalItems != nil {
		children = append(children, s.AdditionalItems.Schema)
	}
	for _, d := range s.Dependencies {
		children = append(children, d.Schema)
	}
	for _, c := range children {
		if schemaHas(c, pred) {
			return true
		}
	}
	return false
}

func sortedSchemaKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
