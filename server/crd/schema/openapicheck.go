package schema

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file holds the schema checks upstream's CRD validation
// (apis/apiextensions/validation/validation.go,
// ValidateCustomResourceDefinitionOpenAPISchema) makes besides the
// structural rules, with the options a newly created v1 CRD gets: defaults
// allowed, property types, atomic set items and map-list keys enforced.
// x-kubernetes-validations rules are the CEL engine's to check.

var (
	metaFields     = sets.New("metadata", "kind", "apiVersion")
	openapiV3Types = sets.New("string", "number", "integer", "boolean", "array", "object")
)

// openapiChecker carries what upstream's specStandardValidatorV3 carries down
// the schema tree.
type openapiChecker struct {
	allowDefaults          bool
	disallowDefaultsReason string
	insideResourceMeta     bool
}

func (c openapiChecker) forbidDefaults(reason string) openapiChecker {
	c.allowDefaults = false
	c.disallowDefaultsReason = reason
	return c
}

func (c openapiChecker) check(s *props, fld *field.Path, isRoot bool) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := c.node(s, fld)
	if s.UniqueItems {
		errs = append(errs, field.Forbidden(fld.Child("uniqueItems"), "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
	}
	if s.AdditionalProperties != nil {
		// properties are for structs, additionalProperties for maps; both
		// at once contradict the convention that unknown fields are dropped.
		if len(s.Properties) != 0 && (!s.AdditionalProperties.Allows || s.AdditionalProperties.Schema != nil) {
			errs = append(errs, field.Forbidden(fld.Child("additionalProperties"), "additionalProperties and properties are mutual exclusive"))
		}
		sub := c
		if c.insideResourceMeta {
			// pruning a default in a map without the actual value is ambiguous
			sub = c.forbidDefaults("inside additionalProperties applying to object metadata")
		}
		errs = append(errs, sub.check(s.AdditionalProperties.Schema, fld.Child("additionalProperties"), false)...)
	}
	for _, k := range propertyNames(s.Properties) {
		sub := c
		if (isRoot || s.XEmbeddedResource) && metaFields.Has(k) {
			sub.insideResourceMeta = true
			if isRoot {
				sub = sub.forbidDefaults(fmt.Sprintf("in top-level %s", k))
			}
		}
		p := s.Properties[k]
		errs = append(errs, sub.check(&p, fld.Child("properties").Key(k), false)...)
	}
	errs = append(errs, c.check(s.Not, fld.Child("not"), false)...)
	for _, j := range []struct {
		name string
		list []props
	}{{"allOf", s.AllOf}, {"oneOf", s.OneOf}, {"anyOf", s.AnyOf}} {
		for i := range j.list {
			errs = append(errs, c.check(&j.list[i], fld.Child(j.name).Index(i), false)...)
		}
	}
	for _, k := range propertyNames(s.Definitions) {
		d := s.Definitions[k]
		errs = append(errs, c.check(&d, fld.Child("definitions").Key(k), false)...)
	}
	if s.Items != nil {
		errs = append(errs, c.check(s.Items.Schema, fld.Child("items"), false)...)
		for i := range s.Items.JSONSchemas {
			errs = append(errs, c.check(&s.Items.JSONSchemas[i], fld.Child("items").Index(i), false)...)
		}
	}
	for k, d := range s.Dependencies {
		errs = append(errs, c.check(d.Schema, fld.Child("dependencies").Key(k), false)...)
	}
	if s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields {
		errs = append(errs, field.Invalid(fld.Child("x-kubernetes-preserve-unknown-fields"), false, "must be true or undefined"))
	}
	errs = append(errs, mapTypeChecks(s, fld)...)
	errs = append(errs, listTypeChecks(s, fld)...)
	errs = append(errs, listKeysMapSetChecks(s, fld)...)
	return errs
}

// node is upstream's specStandardValidatorV3.validate: the unsupported
// OpenAPI features, with their own messages.
func (c openapiChecker) node(s *props, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Type != "" && !openapiV3Types.Has(s.Type) {
		errs = append(errs, field.NotSupported(fld.Child("type"), s.Type, sets.List(openapiV3Types)))
	}
	if s.Default != nil && !c.allowDefaults {
		detail := "must not be set"
		if c.disallowDefaultsReason != "" {
			detail += " " + c.disallowDefaultsReason
		}
		errs = append(errs, field.Forbidden(fld.Child("default"), detail))
	}
	forbidden := []struct {
		set        bool
		name, what string
	}{
		{s.ID != "", "id", "id is not supported"},
		{s.AdditionalItems != nil, "additionalItems", "additionalItems is not supported"},
		{len(s.PatternProperties) != 0, "patternProperties", "patternProperties is not supported"},
		{len(s.Definitions) != 0, "definitions", "definitions is not supported"},
		{s.Dependencies != nil, "dependencies", "dependencies is not supported"},
		{s.Ref != nil, "$ref", "$ref is not supported"},
		{s.Type == "null", "type", "type cannot be set to null, use nullable as an alternative"},
		{s.Items != nil && len(s.Items.JSONSchemas) != 0, "items", "items must be a schema object and not an array"},
		{c.insideResourceMeta && s.XEmbeddedResource, "x-kubernetes-embedded-resource", "must not be used inside of resource meta"},
	}
	for _, f := range forbidden {
		if f.set {
			errs = append(errs, field.Forbidden(fld.Child(f.name), f.what))
		}
	}
	return errs
}

func mapTypeChecks(s *props, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.XMapType == nil {
		return nil
	}
	if s.Type != "object" {
		if s.Type == "" {
			errs = append(errs, field.Required(fld.Child("type"), "must be object if x-kubernetes-map-type is specified"))
		} else {
			errs = append(errs, field.Invalid(fld.Child("type"), s.Type, "must be object if x-kubernetes-map-type is specified"))
		}
	}
	if *s.XMapType != "atomic" && *s.XMapType != "granular" {
		errs = append(errs, field.NotSupported(fld.Child("x-kubernetes-map-type"), *s.XMapType, []string{"atomic", "granular"}))
	}
	return errs
}

func listTypeChecks(s *props, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	lt := s.XListType
	items := itemsOf(s)
	if lt != nil && s.Type != "array" {
		if s.Type == "" {
			errs = append(errs, field.Required(fld.Child("type"), "must be array if x-kubernetes-list-type is specified"))
		} else {
			errs = append(errs, field.Invalid(fld.Child("type"), s.Type, "must be array if x-kubernetes-list-type is specified"))
		}
	} else if lt != nil && *lt == "set" && items != nil {
		switch items.Type {
		case "array":
			if items.XListType != nil && *items.XListType != "atomic" {
				errs = append(errs, field.Invalid(fld.Child("items").Child("x-kubernetes-list-type"), items.XListType, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		case "object":
			if items.XMapType == nil || *items.XMapType != "atomic" {
				errs = append(errs, field.Invalid(fld.Child("items").Child("x-kubernetes-map-type"), items.XListType, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		}
	}
	if lt != nil && *lt != "atomic" && *lt != "set" && *lt != "map" {
		errs = append(errs, field.NotSupported(fld.Child("x-kubernetes-list-type"), *lt, []string{"atomic", "set", "map"}))
	}
	if len(s.XListMapKeys) > 0 {
		if lt == nil {
			errs = append(errs, field.Required(fld.Child("x-kubernetes-list-type"), "must be map if x-kubernetes-list-map-keys is non-empty"))
		} else if *lt != "map" {
			errs = append(errs, field.Invalid(fld.Child("x-kubernetes-list-type"), *lt, "must be map if x-kubernetes-list-map-keys is non-empty"))
		}
	}
	if lt == nil || *lt != "map" {
		return errs
	}
	if len(s.XListMapKeys) == 0 {
		errs = append(errs, field.Required(fld.Child("x-kubernetes-list-map-keys"), "must not be empty if x-kubernetes-list-type is map"))
	}
	if s.Items == nil {
		errs = append(errs, field.Required(fld.Child("items"), "must have a schema if x-kubernetes-list-type is map"))
	}
	if s.Items != nil && items == nil {
		errs = append(errs, field.Invalid(fld.Child("items"), s.Items, "must only have a single schema if x-kubernetes-list-type is map"))
	}
	if items != nil && items.Type != "object" {
		errs = append(errs, field.Invalid(fld.Child("items").Child("type"), items.Type, "must be object if parent array's x-kubernetes-list-type is map"))
	}
	if items != nil && items.Type == "object" {
		seen := map[string]bool{}
		for _, k := range s.XListMapKeys {
			if p, ok := items.Properties[k]; !ok {
				errs = append(errs, field.Invalid(fld.Child("x-kubernetes-list-map-keys"), s.XListMapKeys, "entries must all be names of item properties"))
			} else if p.Type == "array" || p.Type == "object" {
				errs = append(errs, field.Invalid(fld.Child("items").Child("properties").Key(k).Child("type"), items.Type, "must be a scalar type if parent array's x-kubernetes-list-type is map"))
			}
			if seen[k] {
				errs = append(errs, field.Invalid(fld.Child("x-kubernetes-list-map-keys"), s.XListMapKeys, "must not contain duplicate entries"))
			}
			seen[k] = true
		}
	}
	return errs
}

// listKeysMapSetChecks: items of sets and maps cannot be null, and map keys
// must always be present (required or defaulted) and non-null.
func listKeysMapSetChecks(s *props, fld *field.Path) field.ErrorList {
	items := itemsOf(s)
	if items == nil || s.XListType == nil || (*s.XListType != "set" && *s.XListType != "map") {
		return nil
	}
	var errs field.ErrorList
	if items.Nullable {
		errs = append(errs, field.Forbidden(fld.Child("items").Child("nullable"), "cannot be nullable when x-kubernetes-list-type is "+*s.XListType))
	}
	if *s.XListType != "map" {
		return errs
	}
	required := sets.New(items.Required...)
	for _, k := range s.XListMapKeys {
		p, ok := items.Properties[k]
		if !ok {
			continue // reported by listTypeChecks
		}
		if !required.Has(k) && p.Default == nil {
			errs = append(errs, field.Required(fld.Child("items").Child("properties").Key(k).Child("default"), "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"))
		}
		if p.Nullable {
			errs = append(errs, field.Forbidden(fld.Child("items").Child("properties").Key(k).Child("nullable"), "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"))
		}
	}
	return errs
}
