package schema

import (
	"bytes"
	"reflect"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The algorithms here walk apiextensionsv1.JSONSchemaProps directly rather
// than a converted "structural" tree as upstream does; these helpers give the
// few views of a node upstream's Structural type encodes.

var nullLiteral = []byte("null")

// itemsOf is the single items schema (upstream rejects items arrays).
func itemsOf(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s == nil || s.Items == nil {
		return nil
	}
	return s.Items.Schema
}

// additional reports whether additionalProperties is set at all (upstream's
// StructuralOrBool is non-nil even for `false`) and its schema, if any.
func additional(s *apiextensionsv1.JSONSchemaProps) (bool, *apiextensionsv1.JSONSchemaProps) {
	if s == nil || s.AdditionalProperties == nil {
		return false, nil
	}
	return true, s.AdditionalProperties.Schema
}

func preservesUnknown(s *apiextensionsv1.JSONSchemaProps) bool {
	return s != nil && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}

// decodeJSON decodes a raw schema value with int64 preservation, as the v1 to
// internal conversion does; a null literal means "unset".
func decodeJSON(j *apiextensionsv1.JSON) (any, bool) {
	if j == nil || len(j.Raw) == 0 || bytes.Equal(bytes.TrimSpace(j.Raw), nullLiteral) {
		return nil, false
	}
	var v any
	if err := utiljson.Unmarshal(j.Raw, &v); err != nil {
		return nil, false
	}
	return v, v != nil
}

// defaultOf returns a fresh decoded copy of s's default, so callers may hand
// it to an object without deep copying.
func defaultOf(s *apiextensionsv1.JSONSchemaProps) (any, bool) {
	if s == nil {
		return nil, false
	}
	return decodeJSON(s.Default)
}

// withEmbedded treats s as a resource root: apiVersion, kind and metadata are
// implicit there, as upstream does by setting x-kubernetes-embedded-resource
// on a shallow clone.
func withEmbedded(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s == nil {
		s = &apiextensionsv1.JSONSchemaProps{}
	}
	if s.XEmbeddedResource {
		return s
	}
	clone := *s
	clone.XEmbeddedResource = true
	return &clone
}

// propertyNames returns the keys of s's properties in a stable order so
// that error lists do not depend on map iteration.
func propertyNames(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// isZero reports whether s sets nothing, treating empty lists and maps and a
// null default or example as unset, as upstream's conversion to its
// structural type does.
func isZero(s apiextensionsv1.JSONSchemaProps) bool {
	if len(s.Enum) == 0 {
		s.Enum = nil
	}
	if len(s.Required) == 0 {
		s.Required = nil
	}
	if len(s.Properties) == 0 {
		s.Properties = nil
	}
	if len(s.AllOf) == 0 {
		s.AllOf = nil
	}
	if len(s.AnyOf) == 0 {
		s.AnyOf = nil
	}
	if len(s.OneOf) == 0 {
		s.OneOf = nil
	}
	if len(s.XListMapKeys) == 0 {
		s.XListMapKeys = nil
	}
	if len(s.XValidations) == 0 {
		s.XValidations = nil
	}
	if len(s.PatternProperties) == 0 {
		s.PatternProperties = nil
	}
	if len(s.Definitions) == 0 {
		s.Definitions = nil
	}
	if len(s.Dependencies) == 0 {
		s.Dependencies = nil
	}
	if _, ok := decodeJSON(s.Default); !ok {
		s.Default = nil
	}
	if _, ok := decodeJSON(s.Example); !ok {
		s.Example = nil
	}
	return reflect.DeepEqual(s, apiextensionsv1.JSONSchemaProps{})
}

// onlyType reports whether s sets type t and nothing else.
func onlyType(s apiextensionsv1.JSONSchemaProps, t string) bool {
	if s.Type != t {
		return false
	}
	s.Type = ""
	return isZero(s)
}
