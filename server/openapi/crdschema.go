package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// CRD-specific vendor extensions, as the structural schema publishes them.
const (
	extEmbeddedResource = "x-kubernetes-embedded-resource"
	extIntOrString      = "x-kubernetes-int-or-string"
	extValidations      = "x-kubernetes-validations"
	extSelectableFields = "x-kubernetes-selectable-fields"
)

// crdSchema converts a CRD's openAPIV3Schema to the OpenAPI schema upstream
// publishes from its structural form: every keyword a structural schema
// keeps, extensions only where they are set to something, and the JSON
// pieces (default, enum, example) decoded to plain values. Keywords that a
// structural schema cannot hold ($ref, definitions, patternProperties, ...)
// are rejected by the CRD API and are not carried.
func crdSchema(in *apiextensionsv1.JSONSchemaProps) (*spec.Schema, error) {
	if in == nil {
		return nil, nil
	}
	out := &spec.Schema{}
	p := &out.SchemaProps
	if in.Type != "" {
		p.Type = spec.StringOrArray{in.Type}
	}
	p.Format, p.Title, p.Description = in.Format, in.Title, in.Description
	p.Nullable = in.Nullable
	p.Maximum, p.ExclusiveMaximum, p.Minimum, p.ExclusiveMinimum = in.Maximum, in.ExclusiveMaximum, in.Minimum, in.ExclusiveMinimum
	p.MaxLength, p.MinLength, p.Pattern = in.MaxLength, in.MinLength, in.Pattern
	p.MaxItems, p.MinItems, p.UniqueItems, p.MultipleOf = in.MaxItems, in.MinItems, in.UniqueItems, in.MultipleOf
	p.MaxProperties, p.MinProperties = in.MaxProperties, in.MinProperties
	p.Required = slices.Clone(in.Required)
	var err error
	if p.Default, err = jsonValue(in.Default); err != nil {
		return nil, fmt.Errorf("default: %w", err)
	}
	if out.Example, err = jsonValue(in.Example); err != nil {
		return nil, fmt.Errorf("example: %w", err)
	}
	for i := range in.Enum {
		v, err := jsonValue(&in.Enum[i])
		if err != nil {
			return nil, fmt.Errorf("enum[%d]: %w", i, err)
		}
		p.Enum = append(p.Enum, v)
	}
	if in.ExternalDocs != nil {
		out.ExternalDocs = &spec.ExternalDocumentation{Description: in.ExternalDocs.Description, URL: in.ExternalDocs.URL}
	}
	if err := addCRDSubschemas(out, in); err != nil {
		return nil, err
	}
	if err := setCRDExtensions(out, in); err != nil {
		return nil, err
	}
	return out, nil
}

// addCRDSubschemas converts the schemas nested in in.
func addCRDSubschemas(out *spec.Schema, in *apiextensionsv1.JSONSchemaProps) error {
	p := &out.SchemaProps
	var err error
	if in.Items != nil && in.Items.Schema != nil {
		items, err := crdSchema(in.Items.Schema)
		if err != nil {
			return fmt.Errorf("items: %w", err)
		}
		p.Items = &spec.SchemaOrArray{Schema: items}
	}
	if in.Properties != nil {
		p.Properties = make(map[string]spec.Schema, len(in.Properties))
		for name, prop := range in.Properties {
			s, err := crdSchema(&prop)
			if err != nil {
				return fmt.Errorf("properties[%s]: %w", name, err)
			}
			p.Properties[name] = *s
		}
	}
	if ap := in.AdditionalProperties; ap != nil {
		p.AdditionalProperties = &spec.SchemaOrBool{Allows: ap.Allows}
		if ap.Schema != nil {
			if p.AdditionalProperties.Schema, err = crdSchema(ap.Schema); err != nil {
				return fmt.Errorf("additionalProperties: %w", err)
			}
		}
	}
	for _, j := range []struct {
		name string
		in   []apiextensionsv1.JSONSchemaProps
		out  *[]spec.Schema
	}{{"allOf", in.AllOf, &p.AllOf}, {"anyOf", in.AnyOf, &p.AnyOf}, {"oneOf", in.OneOf, &p.OneOf}} {
		for i := range j.in {
			s, err := crdSchema(&j.in[i])
			if err != nil {
				return fmt.Errorf("%s[%d]: %w", j.name, i, err)
			}
			*j.out = append(*j.out, *s)
		}
	}
	if in.Not != nil {
		if p.Not, err = crdSchema(in.Not); err != nil {
			return fmt.Errorf("not: %w", err)
		}
	}
	return nil
}

// setCRDExtensions writes the x-kubernetes-* keywords as extensions, with
// the plain bool, string and []any values the type converter reads.
func setCRDExtensions(out *spec.Schema, in *apiextensionsv1.JSONSchemaProps) error {
	ext := map[string]any{}
	if in.XPreserveUnknownFields != nil && *in.XPreserveUnknownFields {
		ext[extPreserveUnknown] = true
	}
	if in.XEmbeddedResource {
		ext[extEmbeddedResource] = true
	}
	if in.XIntOrString {
		ext[extIntOrString] = true
	}
	if len(in.XListMapKeys) > 0 {
		keys := make([]any, len(in.XListMapKeys))
		for i, k := range in.XListMapKeys {
			keys[i] = k
		}
		ext[extListMapKeys] = keys
	}
	if in.XListType != nil {
		ext[extListType] = *in.XListType
	}
	if in.XMapType != nil {
		ext[extMapType] = *in.XMapType
	}
	if len(in.XValidations) > 0 {
		rules, err := plainJSON(in.XValidations)
		if err != nil {
			return fmt.Errorf("x-kubernetes-validations: %w", err)
		}
		ext[extValidations] = rules
	}
	setExtensions(out, ext)
	return nil
}

func jsonValue(j *apiextensionsv1.JSON) (any, error) {
	if j == nil || len(j.Raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(j.Raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// plainJSON turns a typed value into the map[string]any/[]any form an
// extension value read back from JSON has.
func plainJSON(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(raw, &out)
}

// hasInvalidTypes reports a type no structural schema has; upstream
// publishes such a version without its schema.
func hasInvalidTypes(s *apiextensionsv1.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	switch s.Type {
	case "", "object", "array", "string", "integer", "number", "boolean":
	default:
		return true
	}
	if s.Items != nil && hasInvalidTypes(s.Items.Schema) {
		return true
	}
	for _, p := range s.Properties {
		if hasInvalidTypes(&p) {
			return true
		}
	}
	if s.AdditionalProperties != nil && hasInvalidTypes(s.AdditionalProperties.Schema) {
		return true
	}
	for _, group := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range group {
			if hasInvalidTypes(&group[i]) {
				return true
			}
		}
	}
	return hasInvalidTypes(s.Not)
}

// visitStructural calls fn on s and then on the schemas that describe
// values (properties, items, additionalProperties), not on those inside
// allOf/anyOf/oneOf/not, as upstream's structural visitor does. fn runs
// before the children, so it may drop them.
func visitStructural(s *spec.Schema, fn func(*spec.Schema)) {
	if s == nil {
		return
	}
	fn(s)
	if s.Items != nil {
		visitStructural(s.Items.Schema, fn)
	}
	for name, p := range s.Properties {
		visitStructural(&p, fn)
		s.Properties[name] = p
	}
	if s.AdditionalProperties != nil {
		visitStructural(s.AdditionalProperties.Schema, fn)
	}
}

// intOrStringAnyOf is the anyOf x-kubernetes-int-or-string stands for.
func intOrStringAnyOf() []spec.Schema {
	return []spec.Schema{
		{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"integer"}}},
		{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}},
	}
}

// unfold spells out x-kubernetes-int-or-string as the anyOf it means,
// unless the schema says so already, as upstream's Unfold does.
func unfold(s *spec.Schema) {
	visitStructural(s, func(s *spec.Schema) {
		if on, _ := s.Extensions[extIntOrString].(bool); !on {
			return
		}
		want := intOrStringAnyOf()
		if reflect.DeepEqual(s.AnyOf, want) || (len(s.AllOf) > 0 && reflect.DeepEqual(s.AllOf[0].AnyOf, want)) {
			return
		}
		if s.AnyOf == nil {
			s.AnyOf = want
			return
		}
		s.AllOf = append([]spec.Schema{{SchemaProps: spec.SchemaProps{AnyOf: want}}}, s.AllOf...)
	})
}

// toV2 removes what Swagger 2.0 and kubectl's v2 readers cannot take, as
// upstream's ToStructuralOpenAPIV2 does, and the defaults, which upstream
// prunes from every v2 definition.
func toV2(s *spec.Schema) {
	visitStructural(s, func(s *spec.Schema) {
		s.AllOf, s.OneOf, s.AnyOf, s.Not = nil, nil, nil, nil
		s.Default = nil
		preserve, _ := s.Extensions[extPreserveUnknown].(bool)
		if s.Nullable {
			// kubectl breaks on untyped values with items or properties.
			s.Type, s.Nullable, s.Items, s.Properties = nil, false, nil, nil
		}
		if preserve {
			// kubectl would reject the unknown fields next to declared ones.
			s.Items, s.Properties = nil, nil
		}
		if s.Items == nil && s.Type.Contains("array") {
			s.Type = nil // kubectl cannot cope with an array without items
		}
		if preserve && s.Type.Contains("object") {
			s.Type = nil
		}
		for name, p := range s.Properties {
			if p.Nullable {
				s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
			}
		}
		if len(s.Required) == 0 {
			s.Required = nil
		}
		if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil && ap.Schema.Nullable {
			s.Required = nil
		}
	})
}
