package cel

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"google.golang.org/protobuf/types/known/structpb"
)

// The type names of MutatingAdmissionPolicy expressions, as upstream's:
// `Object` is the admitted object's type and `Object.<field>...` the type
// of any field below it; `JSONPatch` is one JSON Patch operation.
const (
	ObjectTypeName    = "Object"
	JSONPatchTypeName = "JSONPatch"
)

// ObjectType and JSONPatchType are what a mutation expression must
// return: an apply configuration (ApplyConfiguration) or a list of
// JSONPatch (JSONPatch).
var (
	ObjectType    = types.NewObjectType(ObjectTypeName)
	JSONPatchType = types.NewObjectType(JSONPatchTypeName)
)

// MutationTypes declares the types mutation expressions build their
// results with and the jsonpatch.escapeKey function. The Object types are
// dynamic, as upstream's: any field may be set and each holds any value;
// the apply step checks the result against the resource's schema. It
// wraps the environment's provider, so it must come after NewEnv's schema
// types.
func MutationTypes() cel.EnvOption {
	return func(e *cel.Env) (*cel.Env, error) {
		p := &mutationTypeProvider{base: e.CELTypeProvider()}
		e, err := cel.CustomTypeProvider(p)(e)
		if err != nil {
			return nil, err
		}
		return cel.Lib(jsonPatchLib{})(e)
	}
}

type mutationTypeProvider struct{ base types.Provider }

func isObjectTypeName(name string) bool {
	return name == ObjectTypeName || strings.HasPrefix(name, ObjectTypeName+".")
}

func (p *mutationTypeProvider) EnumValue(name string) ref.Val { return p.base.EnumValue(name) }

func (p *mutationTypeProvider) FindIdent(name string) (ref.Val, bool) { return p.base.FindIdent(name) }

func (p *mutationTypeProvider) FindStructType(name string) (*types.Type, bool) {
	if name == JSONPatchTypeName || isObjectTypeName(name) {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.base.FindStructType(name)
}

func (p *mutationTypeProvider) FindStructFieldNames(name string) ([]string, bool) {
	switch {
	case name == JSONPatchTypeName:
		return []string{"op", "from", "path", "value"}, true
	case isObjectTypeName(name):
		return nil, true // any field
	}
	return p.base.FindStructFieldNames(name)
}

func (p *mutationTypeProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	switch {
	case name == JSONPatchTypeName:
		switch field {
		case "op", "from", "path":
			return &types.FieldType{Type: types.StringType}, true
		case "value":
			return &types.FieldType{Type: types.DynType}, true
		}
		return nil, false
	case isObjectTypeName(name):
		return &types.FieldType{Type: types.DynType}, true
	}
	return p.base.FindStructFieldType(name, field)
}

func (p *mutationTypeProvider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	switch {
	case name == JSONPatchTypeName:
		return newJSONPatchVal(fields)
	case isObjectTypeName(name):
		return &ObjectVal{typeName: name, fields: fields}
	}
	return p.base.NewValue(name, fields)
}

// ObjectVal is an `Object...{...}` value: the fields set, by name.
type ObjectVal struct {
	typeName string
	fields   map[string]ref.Val
}

var (
	_ ref.Val        = (*ObjectVal)(nil)
	_ traits.Zeroer  = (*ObjectVal)(nil)
	_ traits.Indexer = (*ObjectVal)(nil)
)

// Get reads a field (so that expressions may look into what they built).
func (v *ObjectVal) Get(key ref.Val) ref.Val {
	if k, ok := key.(types.String); ok {
		if f, ok := v.fields[string(k)]; ok {
			return f
		}
	}
	return types.NewErr("no such field: %v", key)
}

// ConvertToNative gives the JSON form (map[string]any, or a protobuf
// Struct/Value for marshalling).
func (v *ObjectVal) ConvertToNative(t reflect.Type) (any, error) {
	m, err := v.native()
	if err != nil {
		return nil, err
	}
	switch t {
	case reflect.TypeFor[map[string]any](), reflect.TypeFor[any]():
		return m, nil
	case reflect.TypeFor[*structpb.Struct]():
		return structpb.NewStruct(m)
	case reflect.TypeFor[*structpb.Value]():
		return structpb.NewValue(m)
	}
	return nil, fmt.Errorf("unable to convert %s to %v", v.typeName, t)
}

func (v *ObjectVal) native() (map[string]any, error) {
	out := make(map[string]any, len(v.fields))
	for k, f := range v.fields {
		n, err := JSONValue(f)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		out[k] = n
	}
	return out, nil
}

// JSONValue converts a CEL value to its JSON form: objects and maps to
// map[string]any, lists to []any, scalars as they are (a JSONPatch value
// is marshalled from it).
func JSONValue(v ref.Val) (any, error) {
	switch x := v.(type) {
	case *ObjectVal:
		return x.native()
	case types.Null:
		return nil, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is of type %s, not string", k, k.Type().TypeName())
			}
			n, err := JSONValue(x.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = n
		}
		return out, nil
	case traits.Lister:
		var out []any
		for it := x.Iterator(); it.HasNext() == types.True; {
			n, err := JSONValue(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, n)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return int64(x), nil
	case types.Double:
		return float64(x), nil
	case types.String:
		return string(x), nil
	case types.Bool:
		return bool(x), nil
	case types.Bytes:
		return []byte(x), nil
	}
	if types.IsError(v) {
		return nil, fmt.Errorf("%v", v)
	}
	n, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, fmt.Errorf("value of type %s has no JSON form: %w", v.Type().TypeName(), err)
	}
	return n.(*structpb.Value).AsInterface(), nil
}

func (v *ObjectVal) ConvertToType(t ref.Type) ref.Val {
	switch {
	case t.TypeName() == v.typeName:
		return v
	case t == types.TypeType:
		return types.NewTypeTypeWithParam(types.NewObjectType(v.typeName))
	}
	return types.NewErr("unsupported conversion of %s into %v", v.typeName, t)
}

func (v *ObjectVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(*ObjectVal)
	if !ok || o.typeName != v.typeName || len(o.fields) != len(v.fields) {
		return types.False
	}
	for k, f := range v.fields {
		g, ok := o.fields[k]
		if !ok || f.Equal(g) != types.True {
			return types.False
		}
	}
	return types.True
}

func (v *ObjectVal) Type() ref.Type { return types.NewObjectType(v.typeName) }

func (v *ObjectVal) Value() any {
	m, err := v.native()
	if err != nil {
		return types.WrapErr(err)
	}
	return m
}

// IsZeroValue reports an object with no field set.
func (v *ObjectVal) IsZeroValue() bool { return len(v.fields) == 0 }

// CheckTypeNames reports type names that do not follow the field path
// from the root (`Object{spec: Object.metadata{}}`), as upstream refuses
// them: the names are the only schema an expression states.
func (v *ObjectVal) CheckTypeNames() error {
	return errors.Join(checkTypeNames(v, v.typeName)...)
}

func checkTypeNames(v ref.Val, want string) []error {
	var errs []error
	switch x := v.(type) {
	case *ObjectVal:
		if x.typeName != want {
			errs = append(errs, fmt.Errorf("unexpected type name %q, expected %q, which matches field name path from root Object type", x.typeName, want))
		}
		for k, f := range x.fields {
			errs = append(errs, checkTypeNames(f, want+"."+k)...)
		}
	case traits.Mapper:
		for it := x.Iterator(); it.HasNext() == types.True; {
			errs = append(errs, checkTypeNames(x.Get(it.Next()), want)...)
		}
	case traits.Lister:
		for it := x.Iterator(); it.HasNext() == types.True; {
			errs = append(errs, checkTypeNames(it.Next(), want)...)
		}
	}
	return errs
}

// JSONPatchVal is one `JSONPatch{op: ..., path: ..., value: ...}`.
type JSONPatchVal struct {
	Op, From, Path string
	// Val is the value, nil when not set.
	Val ref.Val
}

func newJSONPatchVal(fields map[string]ref.Val) ref.Val {
	out := &JSONPatchVal{}
	for name, v := range fields {
		if name == "value" {
			out.Val = v
			continue
		}
		s, ok := v.(types.String)
		if !ok {
			return types.NewErr("unexpected type %s for JSONPatch %q field", v.Type().TypeName(), name)
		}
		switch name {
		case "op":
			out.Op = string(s)
		case "path":
			out.Path = string(s)
		case "from":
			out.From = string(s)
		default:
			return types.NewErr("unexpected JSONPatch field: %s", name)
		}
	}
	return out
}

var (
	_ ref.Val        = (*JSONPatchVal)(nil)
	_ traits.Indexer = (*JSONPatchVal)(nil)
)

func (p *JSONPatchVal) ConvertToNative(t reflect.Type) (any, error) {
	if t == reflect.TypeFor[*JSONPatchVal]() {
		return p, nil
	}
	return nil, fmt.Errorf("cannot convert JSONPatch to %v", t)
}

func (p *JSONPatchVal) ConvertToType(t ref.Type) ref.Val {
	switch {
	case t.TypeName() == JSONPatchTypeName:
		return p
	case t == types.TypeType:
		return types.NewTypeTypeWithParam(JSONPatchType)
	}
	return types.NewErr("unsupported conversion of JSONPatch into %v", t)
}

func (p *JSONPatchVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(*JSONPatchVal)
	if !ok || p.Op != o.Op || p.From != o.From || p.Path != o.Path || (p.Val == nil) != (o.Val == nil) {
		return types.False
	}
	if p.Val == nil {
		return types.True
	}
	return p.Val.Equal(o.Val)
}

func (p *JSONPatchVal) Get(key ref.Val) ref.Val {
	switch key {
	case types.String("op"):
		return types.String(p.Op)
	case types.String("path"):
		return types.String(p.Path)
	case types.String("from"):
		return types.String(p.From)
	case types.String("value"):
		if p.Val != nil {
			return p.Val
		}
		return types.NullValue
	}
	return types.NewErr("no such JSONPatch field: %v", key)
}

func (p *JSONPatchVal) Type() ref.Type { return JSONPatchType }
func (p *JSONPatchVal) Value() any     { return p }

// jsonPatchLib is upstream's JSONPatch library: jsonpatch.escapeKey
// escapes '~' and '/' in a path key (RFC 6901).
type jsonPatchLib struct{}

func (jsonPatchLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("jsonpatch.escapeKey",
			cel.Overload("string_jsonpatch_escapeKey_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					s, ok := v.(types.String)
					if !ok {
						return types.MaybeNoSuchOverloadErr(v)
					}
					return types.String(jsonPointerEscaper.Replace(string(s)))
				}))),
	}
}

func (jsonPatchLib) ProgramOptions() []cel.ProgramOption { return nil }

var jsonPointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
