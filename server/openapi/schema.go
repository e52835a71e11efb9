package openapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Vendor extensions we publish; kube-openapi looks them up in lower case.
const (
	extGVK             = "x-kubernetes-group-version-kind"
	extListType        = "x-kubernetes-list-type"
	extListMapKeys     = "x-kubernetes-list-map-keys"
	extMapType         = "x-kubernetes-map-type"
	extPatchStrategy   = "x-kubernetes-patch-strategy"
	extPatchMergeKey   = "x-kubernetes-patch-merge-key"
	extUnions          = "x-kubernetes-unions"
	extPreserveUnknown = "x-kubernetes-preserve-unknown-fields"
	extAction          = "x-kubernetes-action"
)

const (
	v2RefPrefix = "#/definitions/"
	v3RefPrefix = "#/components/schemas/"
)

// dialect is what differs between the Swagger 2.0 and OpenAPI 3.0 renderings
// of the same Go types. Upstream's v3 wraps a $ref that has siblings in
// allOf (3.0 ignores $ref siblings), publishes defaults and uses oneOf for
// int-or-string and quantities; its v2 does none of that.
type dialect struct {
	refPrefix string
	v3        bool
}

type (
	openAPITyped interface {
		OpenAPISchemaType() []string
		OpenAPISchemaFormat() string
	}
	openAPIV3OneOf interface {
		OpenAPIV3OneOfTypes() []string
	}
	swaggerDocumented interface {
		SwaggerDoc() map[string]string
	}
)

var (
	rawExtensionType  = reflect.TypeFor[runtime.RawExtension]()
	timeType          = reflect.TypeFor[time.Time]()
	jsonUnmarshalType = reflect.TypeFor[json.Unmarshaler]()
)

// generator turns Go types into named schema definitions by reflection.
type generator struct {
	d     dialect
	sem   *semantics
	req   requiredness
	defs  map[string]*spec.Schema
	names map[reflect.Type]string
}

func newGenerator(d dialect, sem *semantics) *generator {
	return &generator{d: d, sem: sem, req: newRequiredness(), defs: map[string]*spec.Schema{}, names: map[reflect.Type]string{}}
}

// define makes sure the named type t has a definition and returns its name.
func (g *generator) define(t reflect.Type) (string, error) {
	t = deref(t)
	if name, ok := g.names[t]; ok {
		return name, nil
	}
	if !isDefinition(t) {
		return "", fmt.Errorf("%v cannot be a named definition", t)
	}
	name := definitionName(t)
	if _, taken := g.defs[name]; taken {
		return "", fmt.Errorf("definition %s would describe two Go types, %v and another", name, t)
	}
	s := &spec.Schema{}
	// Registered before filling so that recursive types end in a $ref.
	g.names[t], g.defs[name] = name, s
	if c, ok := reflect.New(t).Interface().(openAPITyped); ok {
		g.fillCustom(t, name, s, c)
		return name, nil
	}
	if err := g.fillStruct(t, name, s); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return name, nil
}

// fillCustom describes a type that declares its own OpenAPI type, such as
// Quantity, IntOrString or Time.
func (g *generator) fillCustom(t reflect.Type, name string, s *spec.Schema, c openAPITyped) {
	s.Description = typeDoc(t, name)
	s.Format = c.OpenAPISchemaFormat()
	if o, ok := c.(openAPIV3OneOf); ok && g.d.v3 && len(o.OpenAPIV3OneOfTypes()) > 0 {
		for _, typ := range o.OpenAPIV3OneOfTypes() {
			s.OneOf = append(s.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}}})
		}
		return
	}
	s.Type = c.OpenAPISchemaType()
}

func (g *generator) fillStruct(t reflect.Type, name string, s *spec.Schema) error {
	docs := swaggerDocs(t)
	s.Description = typeDoc(t, name)
	s.Type = spec.StringOrArray{"object"}
	props := map[string]spec.Schema{}
	var required []string
	if err := g.addFields(t, name, docs, props, &required); err != nil {
		return err
	}
	if len(props) > 0 {
		s.Properties = props
	}
	s.Required = required
	ext := g.sem.typeExtensions(name)
	if t == rawExtensionType {
		// Embedded objects of any kind; server-side apply must keep them whole.
		ext = map[string]any{extPreserveUnknown: true}
	}
	setExtensions(s, ext)
	return nil
}

// addFields adds the JSON properties of struct t, descending into embedded
// structs the way encoding/json promotes their fields.
func (g *generator) addFields(t reflect.Type, def string, docs map[string]string, props map[string]spec.Schema, required *[]string) error {
	for i := range t.NumField() {
		f := t.Field(i)
		jf, ok := jsonFieldOf(f)
		if !ok {
			continue
		}
		if jf.inline {
			et := deref(f.Type)
			if err := g.addFields(et, def, swaggerDocs(et), props, required); err != nil {
				return err
			}
			continue
		}
		p, err := g.property(def, f, jf, docs[jf.name])
		if err != nil {
			return fmt.Errorf("field %s: %w", jf.name, err)
		}
		props[jf.name] = p
		if g.req.isRequired(def, jf.name, jf.omitEmpty) {
			*required = append(*required, jf.name)
		}
	}
	return nil
}

// property is the schema of one struct field with its description, default
// and merge semantics.
func (g *generator) property(def string, f reflect.StructField, jf jsonField, desc string) (spec.Schema, error) {
	base, err := g.schemaFor(f.Type)
	if err != nil {
		return spec.Schema{}, err
	}
	ext := map[string]any{}
	if v := f.Tag.Get("patchStrategy"); v != "" {
		ext[extPatchStrategy] = v
	}
	if v := f.Tag.Get("patchMergeKey"); v != "" {
		ext[extPatchMergeKey] = v
	}
	var dflt any
	if sf, ok := g.sem.field(def, jf.name); ok {
		maps.Copy(ext, fieldExtensions(sf.Type))
		dflt = normalizeDefault(sf.Default)
	} else {
		maps.Copy(ext, fallbackListExtensions(f))
		dflt = enforcedDefault(f.Type, jf.omitEmpty)
	}
	return g.decorate(base, desc, dflt, ext), nil
}

// schemaFor is the bare schema of a type in a field, item or value position:
// a $ref for named definitions, an inline schema otherwise.
func (g *generator) schemaFor(t reflect.Type) (spec.Schema, error) {
	t = deref(t)
	if isDefinition(t) {
		name, err := g.define(t)
		return refSchema(g.d.refPrefix + name), err
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return typed("string", "byte"), nil
		}
		items, err := g.elementSchema(t.Elem())
		s := typed("array", "")
		s.Items = &spec.SchemaOrArray{Schema: &items}
		return s, err
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return spec.Schema{}, fmt.Errorf("map key %v is not a string", t.Key())
		}
		values, err := g.elementSchema(t.Elem())
		s := typed("object", "")
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &values}
		return s, err
	case reflect.Interface:
		return typed("object", ""), nil
	}
	if t == timeType {
		return typed("string", "date-time"), nil
	}
	typ, format, ok := primitiveOf(t.Kind())
	if !ok {
		return spec.Schema{}, fmt.Errorf("unsupported Go type %v", t)
	}
	return typed(typ, format), nil
}

// elementSchema is the schema of list items and map values, which upstream
// gives the zero value of non-pointer elements as default.
func (g *generator) elementSchema(t reflect.Type) (spec.Schema, error) {
	s, err := g.schemaFor(t)
	if err != nil {
		return s, err
	}
	return g.decorate(s, "", enforcedDefault(t, false), nil), nil
}

// decorate adds a description, default and extensions to a schema. In v3 a
// $ref with siblings moves into allOf, as upstream publishes it.
func (g *generator) decorate(s spec.Schema, desc string, dflt any, ext map[string]any) spec.Schema {
	if !g.d.v3 {
		dflt = nil
	}
	if g.d.v3 && s.Ref.String() != "" && (desc != "" || dflt != nil || len(ext) > 0) {
		s = spec.Schema{SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{s}}}
	}
	s.Description = desc
	s.Default = dflt
	setExtensions(&s, ext)
	return s
}

func setExtensions(s *spec.Schema, ext map[string]any) {
	if len(ext) == 0 {
		return
	}
	if s.Extensions == nil {
		s.Extensions = spec.Extensions{}
	}
	for k, v := range ext {
		s.Extensions[strings.ToLower(k)] = v
	}
}

// enforcedDefault is the default upstream's generator forces on a field or
// element that cannot be omitted: {} for structs, the zero value for scalars
// that are not omitempty, nothing for pointers, collections and types with
// their own JSON decoding.
func enforcedDefault(t reflect.Type, omitEmpty bool) any {
	if t.Implements(jsonUnmarshalType) || reflect.PointerTo(t).Implements(jsonUnmarshalType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return nil
	case reflect.Struct:
		if t.NumField() == 1 && t.Field(0).Anonymous {
			return enforcedDefault(t.Field(0).Type, omitEmpty)
		}
		return map[string]any{}
	case reflect.String:
		if !omitEmpty {
			return ""
		}
	case reflect.Bool:
		if !omitEmpty {
			return false
		}
	default:
		if _, _, ok := primitiveOf(t.Kind()); ok && !omitEmpty {
			return 0
		}
	}
	return nil
}

// jsonField is how encoding/json sees a struct field.
type jsonField struct {
	name      string
	omitEmpty bool
	inline    bool
}

func jsonFieldOf(f reflect.StructField) (jsonField, bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return jsonField{}, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	jf := jsonField{name: name, omitEmpty: hasTagOption(opts, "omitempty")}
	if f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct {
		jf.inline = true
		return jf, true
	}
	if !f.IsExported() {
		return jsonField{}, false
	}
	if jf.name == "" {
		jf.name = f.Name
	}
	return jf, true
}

func hasTagOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// isDefinition reports whether upstream gives t a named definition: structs
// and types that declare their own OpenAPI type.
func isDefinition(t reflect.Type) bool {
	if t.Name() == "" || t.PkgPath() == "" || t == timeType {
		return false
	}
	if t.Kind() == reflect.Struct {
		return true
	}
	_, ok := reflect.New(t).Interface().(openAPITyped)
	return ok
}

func primitiveOf(k reflect.Kind) (typ, format string, ok bool) {
	switch k {
	case reflect.String:
		return "string", "", true
	case reflect.Bool:
		return "boolean", "", true
	case reflect.Int, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint16:
		return "integer", "int32", true
	case reflect.Int64, reflect.Uint32, reflect.Uint64:
		return "integer", "int64", true
	case reflect.Int8, reflect.Uint8:
		return "integer", "byte", true
	case reflect.Float32:
		return "number", "float", true
	case reflect.Float64:
		return "number", "double", true
	}
	return "", "", false
}

func typed(typ, format string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, Format: format}}
}

func refSchema(ref string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(ref)}}
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// swaggerDocs are the generated field descriptions of t, keyed by JSON name
// with "" for the type itself.
func swaggerDocs(t reflect.Type) map[string]string {
	if d, ok := reflect.New(t).Interface().(swaggerDocumented); ok {
		return d.SwaggerDoc()
	}
	return nil
}
