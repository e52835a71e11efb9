package cel

import (
	"encoding/json"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// DeclType is the CEL type of a schema node: a scalar, a list, a map or an
// object with named fields. MaxElements (list items, map entries, string
// length) and MinSerializedSize feed the cost estimates.
type DeclType struct {
	name     string
	Fields   map[string]*DeclField // by escaped name; objects only
	KeyType  *DeclType             // maps only
	ElemType *DeclType             // lists and maps
	// MaxElements is maxItems/maxProperties/maxLength (or the estimate of
	// how many fit in a request when the schema sets no limit).
	MaxElements int64
	// MinSerializedSize is the smallest JSON encoding of a value.
	MinSerializedSize int64
	celType           *cel.Type
}

// DeclField is an object field.
type DeclField struct {
	Name     string
	Type     *DeclType
	Required bool
}

func newListType(elem *DeclType, maxItems int64) *DeclType {
	return &DeclType{name: "list", ElemType: elem, MaxElements: maxItems, celType: cel.ListType(elem.CelType()), MinSerializedSize: 2}
}

func newMapType(key, elem *DeclType, maxProperties int64) *DeclType {
	return &DeclType{name: "map", KeyType: key, ElemType: elem, MaxElements: maxProperties,
		celType: cel.MapType(key.CelType(), elem.CelType()), MinSerializedSize: 2}
}

func newObjectType(name string, fields map[string]*DeclField) *DeclType {
	return &DeclType{name: name, Fields: fields, celType: cel.ObjectType(name), MinSerializedSize: 2}
}

func newSimpleType(name string, t *cel.Type, minSize int64) *DeclType {
	return &DeclType{name: name, celType: t, MinSerializedSize: minSize}
}

// CelType is the type variables of this DeclType are declared with.
func (t *DeclType) CelType() *cel.Type { return t.celType }

// TypeName is the object type's name (or "list", "map", a scalar's name).
func (t *DeclType) TypeName() string { return t.name }

func (t *DeclType) isList() bool   { return t.KeyType == nil && t.ElemType != nil && t.Fields == nil }
func (t *DeclType) isMap() bool    { return t.KeyType != nil && t.ElemType != nil && t.Fields == nil }
func (t *DeclType) isObject() bool { return t.KeyType == nil && t.ElemType == nil && t.Fields != nil }

// MaybeAssignTypeName names object types below t after their path from
// name ("name.spec", "name.items.@idx", "name.labels.@elem") so that each
// can be registered with the type provider; unnamed ("object") types get
// the name, named ones keep theirs.
func (t *DeclType) MaybeAssignTypeName(name string) *DeclType {
	switch {
	case t.isObject():
		updated := false
		if t.name != "object" {
			name = t.name
		} else {
			updated = true
		}
		fields := make(map[string]*DeclField, len(t.Fields))
		for fn, f := range t.Fields {
			ft := f.Type.MaybeAssignTypeName(name + "." + fn)
			if ft != f.Type {
				updated = true
				f = &DeclField{Name: f.Name, Type: ft, Required: f.Required}
			}
			fields[fn] = f
		}
		if !updated {
			return t
		}
		nt := newObjectType(name, fields)
		nt.MinSerializedSize = t.MinSerializedSize
		nt.MaxElements = t.MaxElements
		return nt
	case t.isMap():
		if e := t.ElemType.MaybeAssignTypeName(name + ".@elem"); e != t.ElemType {
			return newMapType(t.KeyType, e, t.MaxElements)
		}
	case t.isList():
		if e := t.ElemType.MaybeAssignTypeName(name + ".@idx"); e != t.ElemType {
			return newListType(e, t.MaxElements)
		}
	}
	return t
}

// collectObjectTypes gathers every named object type reachable from t.
func collectObjectTypes(t *DeclType, into map[string]*DeclType) {
	switch {
	case t.isObject():
		into[t.name] = t
		for _, f := range t.Fields {
			collectObjectTypes(f.Type, into)
		}
	case t.isMap(), t.isList():
		collectObjectTypes(t.ElemType, into)
	}
}

func zeroIfNegative(v int64) int64 {
	if v < 0 {
		return 0
	}
	return v
}

// SchemaDeclType converts a schema to its CEL type as upstream does, or
// nil when the schema has no CEL representation (no type and only
// x-kubernetes-preserve-unknown-fields; arrays without items). A resource
// root (the top level, or x-kubernetes-embedded-resource) gets apiVersion,
// kind and metadata.name/generateName.
func SchemaDeclType(s *apiextensionsv1.JSONSchemaProps, isResourceRoot bool) *DeclType {
	if s == nil {
		return nil
	}
	if s.XIntOrString {
		// An int-or-string is dynamically typed; its smallest form is "0".
		dyn := newSimpleType("dyn", cel.DynType, 1)
		if s.MaxLength != nil {
			dyn.MaxElements = zeroIfNegative(*s.MaxLength) * 4
		} else {
			dyn.MaxElements = estimateMaxStringLength(s)
		}
		return dyn
	}
	if isResourceRoot {
		s = withTypeAndObjectMeta(s)
	}
	switch s.Type {
	case "array":
		if s.Items == nil || s.Items.Schema == nil {
			return nil
		}
		items := SchemaDeclType(s.Items.Schema, s.Items.Schema.XEmbeddedResource)
		if items == nil {
			return nil
		}
		maxItems := (MaxRequestSizeBytes - 2) / (items.MinSerializedSize + 1)
		if s.MaxItems != nil {
			maxItems = zeroIfNegative(*s.MaxItems)
		}
		return newListType(items, maxItems)
	case "object":
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			props := SchemaDeclType(s.AdditionalProperties.Schema, s.AdditionalProperties.Schema.XEmbeddedResource)
			if props == nil {
				return nil
			}
			maxProps := (MaxRequestSizeBytes - 2) / (props.MinSerializedSize + 6)
			if s.MaxProperties != nil {
				maxProps = zeroIfNegative(*s.MaxProperties)
			}
			return newMapType(stringDeclType(), props, maxProps)
		}
		return objectDeclType(s)
	case "string":
		return stringSchemaDeclType(s)
	case "boolean":
		return newSimpleType("bool", cel.BoolType, minBoolSize)
	case "number":
		return newSimpleType("double", cel.DoubleType, minNumberSize)
	case "integer":
		return newSimpleType("int", cel.IntType, minNumberSize)
	}
	return nil
}

// stringDeclType is the type of map keys. Like upstream's, it declares no
// maximum length, so key sizes count as 0 in estimates.
func stringDeclType() *DeclType {
	return newSimpleType("string", cel.StringType, minStringSize)
}

func objectDeclType(s *apiextensionsv1.JSONSchemaProps) *DeclType {
	required := map[string]bool{}
	for _, f := range s.Required {
		required[f] = true
	}
	fields := make(map[string]*DeclField, len(s.Properties))
	minSize := int64(2)
	for name, prop := range s.Properties {
		prop := prop
		ft := SchemaDeclType(&prop, prop.XEmbeddedResource)
		if ft == nil {
			continue
		}
		if escaped, ok := Escape(name); ok {
			fields[escaped] = &DeclField{Name: escaped, Type: ft, Required: required[name]}
		}
		if required[name] && prop.Default == nil {
			minSize += int64(len(name)) + ft.MinSerializedSize + 4
		}
	}
	t := newObjectType("object", fields)
	t.MinSerializedSize = minSize
	return t
}

func stringSchemaDeclType(s *apiextensionsv1.JSONSchemaProps) *DeclType {
	var t *DeclType
	switch s.Format {
	case "byte":
		t = newSimpleType("bytes", cel.BytesType, minStringSize)
		if s.MaxLength != nil {
			t.MaxElements = zeroIfNegative(*s.MaxLength)
		} else {
			t.MaxElements = estimateMaxStringLength(s)
		}
		return t
	case "duration":
		t = newSimpleType("duration", cel.DurationType, minDurationSizeJSON)
	case "date":
		t = newSimpleType("timestamp", cel.TimestampType, jsonDateSize)
	case "date-time":
		t = newSimpleType("timestamp", cel.TimestampType, minDatetimeSizeJSON)
	}
	if t != nil {
		t.MaxElements = estimateMaxStringLength(s)
		return t
	}
	t = newSimpleType("string", cel.StringType, minStringSize)
	switch {
	case s.MaxLength != nil:
		// maxLength counts characters; a character is up to 4 bytes.
		t.MaxElements = zeroIfNegative(*s.MaxLength) * 4
	case len(s.Enum) > 0:
		t.MaxElements = maxEnumLength(s.Enum)
	default:
		t.MaxElements = estimateMaxStringLength(s)
	}
	return t
}

func estimateMaxStringLength(s *apiextensionsv1.JSONSchemaProps) int64 {
	if s.XIntOrString {
		return MaxRequestSizeBytes - 2
	}
	switch s.Format {
	case "duration":
		return maxDurationSizeJSON
	case "date":
		return jsonDateSize
	case "date-time":
		return maxDatetimeSizeJSON
	}
	return MaxRequestSizeBytes - 2
}

func maxEnumLength(enum []apiextensionsv1.JSON) int64 {
	var maxLen int64
	for _, e := range enum {
		var s string
		if json.Unmarshal(e.Raw, &s) == nil && int64(len(s)) > maxLen {
			maxLen = int64(len(s))
		}
	}
	return maxLen
}

// nameMaxLength caps metadata.name (and generateName, one less) in
// resource roots, as the API server does.
const nameMaxLength = int64(apimachineryvalidation.DNS1123SubdomainMaxLength)

// withTypeAndObjectMeta returns s with the properties every resource has
// that rules may read: apiVersion, kind, metadata.name and
// metadata.generateName (the rest of metadata is not visible to rules).
func withTypeAndObjectMeta(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.Properties != nil &&
		s.Properties["kind"].Type == "string" &&
		s.Properties["apiVersion"].Type == "string" &&
		s.Properties["metadata"].Type == "object" &&
		s.Properties["metadata"].Properties != nil &&
		s.Properties["metadata"].Properties["name"].Type == "string" &&
		s.Properties["metadata"].Properties["generateName"].Type == "string" {
		return s
	}
	result := *s
	props := make(map[string]apiextensionsv1.JSONSchemaProps, len(s.Properties)+3)
	for k, p := range s.Properties {
		props[k] = p
	}
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	props["kind"] = str
	props["apiVersion"] = str
	metaProps := s.Properties["metadata"].Properties
	props["metadata"] = apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"name":         cappedString(metaProps["name"], nameMaxLength),
			"generateName": cappedString(metaProps["generateName"], nameMaxLength-1),
		},
	}
	result.Properties = props
	return &result
}

func cappedString(existing apiextensionsv1.JSONSchemaProps, maxLength int64) apiextensionsv1.JSONSchemaProps {
	if existing.MaxLength != nil && *existing.MaxLength < maxLength {
		maxLength = *existing.MaxLength
	}
	return apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: &maxLength}
}

// declTypeProvider resolves the schema's object types (by their assigned
// names) on top of the environment's own provider, so that the checker
// knows each object's fields.
type declTypeProvider struct {
	objects map[string]*DeclType
	base    types.Provider
	adapter types.Adapter
}

func newDeclTypeProvider(base types.Provider, adapter types.Adapter, roots ...*DeclType) *declTypeProvider {
	p := &declTypeProvider{objects: map[string]*DeclType{}, base: base, adapter: adapter}
	for _, r := range roots {
		collectObjectTypes(r, p.objects)
	}
	return p
}

func (p *declTypeProvider) EnumValue(name string) ref.Val { return p.base.EnumValue(name) }

func (p *declTypeProvider) FindIdent(name string) (ref.Val, bool) { return p.base.FindIdent(name) }

func (p *declTypeProvider) FindStructType(name string) (*types.Type, bool) {
	if t, ok := p.objects[name]; ok {
		return types.NewTypeTypeWithParam(t.CelType()), true
	}
	return p.base.FindStructType(name)
}

func (p *declTypeProvider) FindStructFieldNames(name string) ([]string, bool) {
	if t, ok := p.objects[name]; ok {
		names := make([]string, 0, len(t.Fields))
		for n := range t.Fields {
			names = append(names, n)
		}
		return names, true
	}
	return p.base.FindStructFieldNames(name)
}

func (p *declTypeProvider) FindStructFieldType(name, fieldName string) (*types.FieldType, bool) {
	t, ok := p.objects[name]
	if !ok {
		return p.base.FindStructFieldType(name, fieldName)
	}
	f, ok := t.Fields[fieldName]
	if !ok && celReservedSymbols[fieldName] {
		// Since 1.31 `self.namespace` reaches the field escaped as
		// __namespace__.
		f, ok = t.Fields["__"+fieldName+"__"]
	}
	if !ok {
		return nil, false
	}
	return &types.FieldType{Type: f.Type.CelType()}, true
}

func (p *declTypeProvider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.objects[name]; ok {
		return types.NewErr("cannot construct schema object type %s", name)
	}
	return p.base.NewValue(name, fields)
}

func (p *declTypeProvider) NativeToValue(v any) ref.Val { return p.adapter.NativeToValue(v) }

var _ fmt.Stringer = (*DeclType)(nil)

func (t *DeclType) String() string { return t.name }
