package schema

import (
	"fmt"
	"regexp"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file holds upstream's structural-schema rules
// (apiserver/schema/validation.go, complete.go, convert.go): every node of
// the structural part has a type, logical junctors (allOf, anyOf, oneOf,
// not) only restrict values of fields the structural part declares, and the
// Kubernetes extensions are consistent.

type level int

const (
	rootLevel level = iota
	itemLevel
	fieldLevel
)

type props = apiextensionsv1.JSONSchemaProps

// unsupported mirrors upstream's NewStructural failures: fields a structural
// schema cannot express. Reported only when nothing else is wrong, because
// the OpenAPI checks report the same fields with better paths.
func unsupported(s *props) error {
	if s == nil {
		return nil
	}
	switch {
	case s.ID != "":
		return fmt.Errorf("OpenAPIV3Schema 'id' is not supported")
	case s.Schema != "":
		return fmt.Errorf("OpenAPIV3Schema 'schema' is not supported")
	case s.Ref != nil && *s.Ref != "":
		return fmt.Errorf("OpenAPIV3Schema '$ref' is not supported")
	case len(s.PatternProperties) > 0:
		return fmt.Errorf("OpenAPIV3Schema 'patternProperties' is not supported")
	case len(s.Dependencies) > 0:
		return fmt.Errorf("OpenAPIV3Schema 'dependencies' is not supported")
	case s.AdditionalItems != nil:
		return fmt.Errorf("OpenAPIV3Schema 'additionalItems' is not supported")
	case len(s.Definitions) > 0:
		return fmt.Errorf("OpenAPIV3Schema 'definitions' is not supported")
	case s.Items != nil && len(s.Items.JSONSchemas) > 0:
		return fmt.Errorf("OpenAPIV3Schema 'items' must be a schema, but is an array")
	case s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields:
		return fmt.Errorf("internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined")
	}
	children := []*props{itemsOf(s), s.Not}
	if _, ap := additional(s); ap != nil {
		children = append(children, ap)
	}
	for _, list := range [][]props{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			children = append(children, &list[i])
		}
	}
	for _, k := range propertyNames(s.Properties) {
		p := s.Properties[k]
		children = append(children, &p)
	}
	for _, c := range children {
		if err := unsupported(c); err != nil {
			return err
		}
	}
	return nil
}

// validateStructural is upstream's ValidateStructural: invariants plus
// completeness, sorted by message as upstream does.
func validateStructural(fld *field.Path, s *props, lvl level) field.ErrorList {
	errs := structuralInvariants(s, lvl, fld)
	errs = append(errs, valueValidationCompleteness(s, s, fld, fld)...)
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

func structuralInvariants(s *props, lvl level, fld *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	items := itemsOf(s)
	if s.Type == "array" && items == nil {
		errs = append(errs, field.Required(fld.Child("items"), "must be specified"))
	}
	errs = append(errs, structuralInvariants(items, itemLevel, fld.Child("items"))...)
	for _, k := range propertyNames(s.Properties) {
		p := s.Properties[k]
		errs = append(errs, structuralInvariants(&p, fieldLevel, fld.Child("properties").Key(k))...)
	}
	hasAP, ap := additional(s)
	if hasAP {
		if lvl == rootLevel {
			errs = append(errs, field.Forbidden(fld.Child("additionalProperties"), "must not be used at the root"))
		}
		errs = append(errs, structuralInvariants(ap, fieldLevel, fld.Child("additionalProperties"))...)
	}

	if s.XIntOrString && preservesUnknown(s) {
		errs = append(errs, field.Invalid(fld.Child("x-kubernetes-preserve-unknown-fields"), true, "must be false if x-kubernetes-int-or-string is true"))
	}
	if s.XIntOrString && s.XEmbeddedResource {
		errs = append(errs, field.Invalid(fld.Child("x-kubernetes-embedded-resource"), true, "must be false if x-kubernetes-int-or-string is true"))
	}

	errs = append(errs, valueValidation(s, isIntOrStringAnyOf(s.AnyOf), isIntOrStringAllOf(s.AllOf), lvl, fld)...)
	errs = append(errs, typeInvariants(s, lvl, hasAP, fld)...)
	return errs
}

// typeInvariants checks type, embedded-resource and metadata rules of one
// structural node.
func typeInvariants(s *props, lvl level, hasAP bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	checkMetadata := lvl == rootLevel || s.XEmbeddedResource
	if s.XEmbeddedResource && s.Type != "object" {
		if s.Type == "" {
			errs = append(errs, field.Required(fld.Child("type"), "must be object if x-kubernetes-embedded-resource is true"))
		} else {
			errs = append(errs, field.Invalid(fld.Child("type"), s.Type, "must be object if x-kubernetes-embedded-resource is true"))
		}
	} else if s.Type == "" && !s.XIntOrString && !preservesUnknown(s) {
		switch lvl {
		case rootLevel:
			errs = append(errs, field.Required(fld.Child("type"), "must not be empty at the root"))
		case itemLevel:
			errs = append(errs, field.Required(fld.Child("type"), "must not be empty for specified array items"))
		case fieldLevel:
			errs = append(errs, field.Required(fld.Child("type"), "must not be empty for specified object fields"))
		}
	}
	if s.XEmbeddedResource && hasAP {
		errs = append(errs, field.Forbidden(fld.Child("additionalProperties"), "must not be used if x-kubernetes-embedded-resource is set"))
	}
	if lvl == rootLevel && s.Type != "" && s.Type != "object" {
		errs = append(errs, field.Invalid(fld.Child("type"), s.Type, "must be object at the root"))
	}
	for _, k := range []string{"kind", "apiVersion"} {
		if p, ok := s.Properties[k]; ok && checkMetadata && p.Type != "string" {
			errs = append(errs, field.Invalid(fld.Child("properties").Key(k).Child("type"), p.Type, "must be string"))
		}
	}
	if m, ok := s.Properties["metadata"]; ok {
		errs = append(errs, metadataInvariants(m, checkMetadata, lvl, fld.Child("properties").Key("metadata"))...)
	}
	if s.XEmbeddedResource && !preservesUnknown(s) && len(s.Properties) == 0 {
		errs = append(errs, field.Required(fld.Child("properties"), "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))
	}
	return errs
}

// metadataInvariants restricts a root metadata schema to name and
// generateName: the API server owns ObjectMeta's shape.
func metadataInvariants(m props, checkMetadata bool, lvl level, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if checkMetadata && m.Type != "object" {
		errs = append(errs, field.Invalid(fld.Child("type"), m.Type, "must be object"))
	}
	if lvl != rootLevel {
		return errs
	}
	_, name := m.Properties["name"]
	_, generateName := m.Properties["generateName"]
	if (name && generateName && len(m.Properties) == 2) || ((name || generateName) && len(m.Properties) == 1) {
		m.Properties = nil
	}
	m.Type = ""
	m.Default = nil // forbidden separately by the OpenAPI checks
	if !isZero(m) {
		errs = append(errs, field.Forbidden(fld, "must not specify anything other than name and generateName, but metadata is implicitly specified"))
	}
	return errs
}

// isIntOrStringAnyOf detects `anyOf: [{type: integer}, {type: string}]`,
// the one place a type may appear under a junctor.
func isIntOrStringAnyOf(anyOf []props) bool {
	return len(anyOf) == 2 && onlyType(anyOf[0], "integer") && onlyType(anyOf[1], "string")
}

// isIntOrStringAllOf detects the same pattern as the first allOf entry.
func isIntOrStringAllOf(allOf []props) bool {
	return len(allOf) >= 1 && isIntOrStringAnyOf(allOf[0].AnyOf)
}

// valueValidation checks the junctors of a node and its pattern.
func valueValidation(v *props, skipAnyOf, skipFirstAllOfAnyOf bool, lvl level, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !skipAnyOf {
		for i := range v.AnyOf {
			errs = append(errs, nestedValueValidation(&v.AnyOf[i], false, lvl, fld.Child("anyOf").Index(i))...)
		}
	}
	for i := range v.AllOf {
		errs = append(errs, nestedValueValidation(&v.AllOf[i], skipFirstAllOfAnyOf && i == 0, lvl, fld.Child("allOf").Index(i))...)
	}
	for i := range v.OneOf {
		errs = append(errs, nestedValueValidation(&v.OneOf[i], false, lvl, fld.Child("oneOf").Index(i))...)
	}
	if v.Not != nil {
		errs = append(errs, nestedValueValidation(v.Not, false, lvl, fld.Child("not"))...)
	}
	if v.Pattern != "" {
		if _, err := regexp.Compile(v.Pattern); err != nil {
			errs = append(errs, field.Invalid(fld.Child("pattern"), v.Pattern, fmt.Sprintf("must be a valid regular expression, but isn't: %v", err)))
		}
	}
	return errs
}

// nestedValueValidation checks a schema under a junctor: only value
// validations are allowed there.
func nestedValueValidation(v *props, skipAnyOf bool, lvl level, fld *field.Path) field.ErrorList {
	errs := valueValidation(v, skipAnyOf, false, lvl, fld)
	if items := itemsOf(v); items != nil {
		errs = append(errs, nestedValueValidation(items, false, lvl, fld.Child("items"))...)
	}
	for _, k := range propertyNames(v.Properties) {
		p := v.Properties[k]
		errs = append(errs, nestedValueValidation(&p, false, fieldLevel, fld.Child("properties").Key(k))...)
	}
	forbid := func(name, detail string) {
		errs = append(errs, field.Forbidden(fld.Child(name), detail))
	}
	if v.Type != "" {
		forbid("type", "must be empty to be structural")
	}
	if v.AdditionalProperties != nil && (v.AdditionalProperties.Schema != nil || v.AdditionalProperties.Allows) {
		forbid("additionalProperties", "must be undefined to be structural")
	}
	if _, ok := decodeJSON(v.Default); ok {
		forbid("default", "must be undefined to be structural")
	}
	if v.Title != "" {
		forbid("title", "must be empty to be structural")
	}
	if v.Description != "" {
		forbid("description", "must be empty to be structural")
	}
	if v.Nullable {
		forbid("nullable", "must be false to be structural")
	}
	if preservesUnknown(v) {
		forbid("x-kubernetes-preserve-unknown-fields", "must be false to be structural")
	}
	if v.XEmbeddedResource {
		forbid("x-kubernetes-embedded-resource", "must be false to be structural")
	}
	if v.XIntOrString {
		forbid("x-kubernetes-int-or-string", "must be false to be structural")
	}
	if len(v.XListMapKeys) > 0 {
		forbid("x-kubernetes-list-map-keys", "must be empty to be structural")
	}
	if v.XListType != nil {
		forbid("x-kubernetes-list-type", "must be undefined to be structural")
	}
	if v.XMapType != nil {
		forbid("x-kubernetes-map-type", "must be undefined to be structural")
	}
	if len(v.XValidations) > 0 {
		forbid("x-kubernetes-validations", "must be empty to be structural")
	}
	if _, ok := v.Properties["metadata"]; ok {
		errs = append(errs, field.Forbidden(fld.Child("properties").Key("metadata"), "must not be specified in a nested context"))
	}
	return errs
}

// valueValidationCompleteness checks that every property or items a junctor
// of v speaks about is declared in the structural node s. As upstream, it
// starts at the root's junctors only.
func valueValidationCompleteness(v, s *props, sPath, vPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if s == nil {
		return field.ErrorList{field.Required(sPath, fmt.Sprintf("because it is defined in %s", vPath.String()))}
	}
	var errs field.ErrorList
	errs = append(errs, nestedCompleteness(v.Not, s, sPath, vPath.Child("not"))...)
	for _, j := range []struct {
		name string
		list []props
	}{{"allOf", v.AllOf}, {"anyOf", v.AnyOf}, {"oneOf", v.OneOf}} {
		for i := range j.list {
			errs = append(errs, nestedCompleteness(&j.list[i], s, sPath, vPath.Child(j.name).Index(i))...)
		}
	}
	return errs
}

func nestedCompleteness(v, s *props, sPath, vPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if s == nil {
		return field.ErrorList{field.Required(sPath, fmt.Sprintf("because it is defined in %s", vPath.String()))}
	}
	errs := valueValidationCompleteness(v, s, sPath, vPath)
	errs = append(errs, nestedCompleteness(itemsOf(v), itemsOf(s), sPath.Child("items"), vPath.Child("items"))...)
	for _, k := range propertyNames(v.Properties) {
		vp := v.Properties[k]
		sp, ok := s.Properties[k]
		if !ok {
			errs = append(errs, field.Required(sPath.Child("properties").Key(k), fmt.Sprintf("because it is defined in %s", vPath.Child("properties").Key(k))))
			continue
		}
		errs = append(errs, nestedCompleteness(&vp, &sp, sPath.Child("properties").Key(k), vPath.Child("properties").Key(k))...)
	}
	return errs
}
