package openapi

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/applyconfigurations"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// semantics answers the questions reflection cannot: list types, map keys,
// atomic structs, unions and +default values. Upstream writes them as
// comment markers, which do not survive compilation, but client-go embeds the
// structured-merge-diff schema generated from upstream's OpenAPI for every
// k8s.io/api type, so we read them back from there.
type semantics struct {
	schema *smdschema.Schema
}

// loadSemantics extracts client-go's embedded schema. Converting one object
// is the only public way to reach it; the parse is cached by client-go.
func loadSemantics() (*semantics, error) {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.Namespace{})
	tc := applyconfigurations.NewTypeConverter(scheme)
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
	tv, err := tc.ObjectToTyped(ns)
	if err != nil {
		return nil, fmt.Errorf("read client-go merge schema: %w", err)
	}
	return &semantics{schema: tv.Schema()}, nil
}

// structMap is the schema of the definition name, if it is a struct there.
func (s *semantics) structMap(def string) (*smdschema.Map, bool) {
	if s == nil {
		return nil, false
	}
	td, ok := s.schema.FindNamedType(def)
	if !ok || td.Map == nil {
		return nil, false
	}
	return td.Map, true
}

// field is the schema of one property of a struct definition.
func (s *semantics) field(def, name string) (smdschema.StructField, bool) {
	m, ok := s.structMap(def)
	if !ok {
		return smdschema.StructField{}, false
	}
	return m.FindField(name)
}

// typeExtensions are the definition-level extensions: whether the struct is
// atomic or granular for server-side apply, and its unions.
func (s *semantics) typeExtensions(def string) map[string]any {
	m, ok := s.structMap(def)
	if !ok {
		return nil
	}
	ext := map[string]any{}
	if v := mapTypeOf(m.ElementRelationship); v != "" {
		ext[extMapType] = v
	}
	if u := unionsExtension(m.Unions); u != nil {
		ext[extUnions] = u
	}
	return ext
}

// fieldExtensions are the list-type, list-map-keys and map-type extensions
// of one property as upstream publishes them.
func fieldExtensions(tr smdschema.TypeRef) map[string]any {
	ext := map[string]any{}
	if tr.NamedType != nil {
		if tr.ElementRelationship != nil {
			if v := mapTypeOf(*tr.ElementRelationship); v != "" {
				ext[extMapType] = v
			}
		}
		return ext
	}
	switch {
	case tr.Inlined.List != nil:
		l := tr.Inlined.List
		switch {
		case l.ElementRelationship == smdschema.Associative && len(l.Keys) > 0:
			ext[extListType] = "map"
			ext[extListMapKeys] = stringsToAny(l.Keys)
		case l.ElementRelationship == smdschema.Associative:
			ext[extListType] = "set"
		default:
			ext[extListType] = "atomic"
		}
	case tr.Inlined.Map != nil:
		if v := mapTypeOf(tr.Inlined.Map.ElementRelationship); v != "" {
			ext[extMapType] = v
		}
	}
	return ext
}

func mapTypeOf(r smdschema.ElementRelationship) string {
	switch r {
	case smdschema.Atomic:
		return "atomic"
	case smdschema.Separable:
		return "granular"
	}
	return ""
}

// unionsExtension renders unions in the shape upstream's generator emits and
// kube-openapi's schemaconv reads back.
func unionsExtension(unions []smdschema.Union) []any {
	if len(unions) == 0 {
		return nil
	}
	out := make([]any, 0, len(unions))
	for _, u := range unions {
		fields := map[string]any{}
		for _, f := range u.Fields {
			fields[f.FieldName] = string(f.DiscriminatorValue)
		}
		entry := map[string]any{"fields-to-discriminateBy": fields}
		if u.Discriminator != nil {
			entry["discriminator"] = *u.Discriminator
		}
		out = append(out, entry)
	}
	return out
}

// fallbackListExtensions derives the list semantics of a type client-go does
// not know from its strategic-merge-patch tags, as upstream's schemaconv
// does when a list carries no list-type marker.
func fallbackListExtensions(f reflect.StructField) map[string]any {
	if deref(f.Type).Kind() != reflect.Slice || deref(f.Type).Elem().Kind() == reflect.Uint8 {
		return nil
	}
	if !slices.Contains(strings.Split(f.Tag.Get("patchStrategy"), ","), "merge") {
		return nil
	}
	if key := f.Tag.Get("patchMergeKey"); key != "" {
		return map[string]any{extListType: "map", extListMapKeys: []any{key}}
	}
	return map[string]any{extListType: "set"}
}

// normalizeDefault turns a YAML-decoded default into JSON-marshalable values.
func normalizeDefault(v any) any {
	switch t := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = normalizeDefault(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = normalizeDefault(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalizeDefault(e)
		}
		return out
	}
	return v
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
