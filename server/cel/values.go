package cel

import (
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

func itemsSchema(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.Items == nil {
		return nil
	}
	return s.Items.Schema
}

func additionalSchema(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.AdditionalProperties == nil {
		return nil
	}
	return s.AdditionalProperties.Schema
}

// UnstructuredToVal wraps an unstructured JSON value as the CEL value its
// schema describes, lazily: objects and lists convert their members on
// access. Strings with format duration, date, date-time and byte become
// durations, timestamps and bytes; int-or-string is an int or a string;
// list-type set and map lists compare regardless of order.
func UnstructuredToVal(u any, s *apiextensionsv1.JSONSchemaProps) ref.Val {
	if u == nil {
		if s.Nullable {
			return types.NullValue
		}
		return types.NewErr("invalid data, got null for schema with nullable=false")
	}
	if s.XIntOrString {
		switch v := u.(type) {
		case string:
			return types.String(v)
		case int64:
			return types.Int(v)
		case int:
			return types.Int(v)
		case int32:
			return types.Int(v)
		}
		return types.NewErr("invalid data, expected XIntOrString value to be either a string or integer")
	}
	switch s.Type {
	case "object":
		m, ok := u.(map[string]any)
		if !ok {
			return types.NewErr("invalid data, expected a map for the provided schema with type=object")
		}
		return objectToVal(m, s)
	case "array":
		l, ok := u.([]any)
		if !ok {
			return types.NewErr("invalid data, expected an array for the provided schema with type=array")
		}
		return arrayToVal(l, s)
	case "string":
		str, ok := u.(string)
		if !ok {
			return types.NewErr("invalid data, expected string, got %T", u)
		}
		return stringToVal(str, s.Format)
	case "number":
		switch v := u.(type) {
		case int64:
			return types.Double(v)
		case int:
			return types.Double(v)
		case int32:
			return types.Double(v)
		case float64:
			return types.Double(v)
		case float32:
			return types.Double(v)
		}
		return types.NewErr("invalid data, expected float, got %T", u)
	case "integer":
		switch v := u.(type) {
		case int64:
			return types.Int(v)
		case int:
			return types.Int(v)
		case int32:
			return types.Int(v)
		}
		return types.NewErr("invalid data, expected int, got %T", u)
	case "boolean":
		b, ok := u.(bool)
		if !ok {
			return types.NewErr("invalid data, expected bool, got %T", u)
		}
		return types.Bool(b)
	}
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		return &unknownPreserved{u: u}
	}
	return types.NewErr("invalid type, expected object, array, number, integer, boolean or string, or no type with x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields is true, got %s", s.Type)
}

func objectToVal(m map[string]any, s *apiextensionsv1.JSONSchemaProps) ref.Val {
	if s.XEmbeddedResource || s.Properties != nil {
		if s.XEmbeddedResource {
			s = withTypeAndObjectMeta(s)
		}
		return &unstructuredMap{value: m, schema: s, isObject: true, propSchema: func(k string) *apiextensionsv1.JSONSchemaProps {
			if p, ok := s.Properties[k]; ok {
				return &p
			}
			return nil
		}}
	}
	if add := additionalSchema(s); add != nil {
		return &unstructuredMap{value: m, schema: s, propSchema: func(string) *apiextensionsv1.JSONSchemaProps { return add }}
	}
	return &unstructuredMap{value: m, schema: s, propSchema: func(string) *apiextensionsv1.JSONSchemaProps { return nil }}
}

func arrayToVal(l []any, s *apiextensionsv1.JSONSchemaProps) ref.Val {
	items := itemsSchema(s)
	if items == nil {
		return types.NewErr("invalid array type, expected Items with a non-empty Schema")
	}
	list := unstructuredList{elements: l, itemsSchema: items}
	if s.XListType == nil {
		return &list
	}
	switch *s.XListType {
	case "map":
		return &unstructuredMapList{unstructuredList: list, keys: s.XListMapKeys}
	case "set":
		return &unstructuredSetList{unstructuredList: list}
	case "atomic":
		return &list
	}
	return types.NewErr("invalid x-kubernetes-list-type, expected 'map', 'set' or 'atomic' but got %s", *s.XListType)
}

func stringToVal(str, format string) ref.Val {
	switch format {
	case "duration":
		d, err := strfmt.ParseDuration(str)
		if err != nil {
			return types.NewErr("Invalid duration %s: %v", str, err)
		}
		return types.Duration{Duration: d}
	case "date":
		d, err := time.Parse(strfmt.RFC3339FullDate, str)
		if err != nil {
			return types.NewErr("Invalid date formatted string %s: %v", str, err)
		}
		return types.Timestamp{Time: d}
	case "date-time":
		d, err := strfmt.ParseDateTime(str)
		if err != nil {
			return types.NewErr("Invalid date-time formatted string %s: %v", str, err)
		}
		return types.Timestamp{Time: time.Time(d)}
	case "byte":
		var b strfmt.Base64
		if err := b.UnmarshalText([]byte(str)); err != nil {
			return types.NewErr("Invalid byte formatted string %s: %v", str, err)
		}
		return types.Bytes(b)
	}
	return types.String(str)
}

// unknownPreserved is a value under x-kubernetes-preserve-unknown-fields
// with no type: rules can only compare it.
type unknownPreserved struct{ u any }

func (t *unknownPreserved) ConvertToNative(refType reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion to '%s' not supported for values preserved by x-kubernetes-preserve-unknown-fields", refType)
}

func (t *unknownPreserved) ConvertToType(typeValue ref.Type) ref.Val {
	return types.NewErr("type conversion to '%s' not supported for values preserved by x-kubernetes-preserve-unknown-fields", typeValue.TypeName())
}

func (t *unknownPreserved) Equal(other ref.Val) ref.Val {
	return types.Bool(equality.Semantic.DeepEqual(t.u, other.Value()))
}

func (t *unknownPreserved) Type() ref.Type { return types.UnknownType }
func (t *unknownPreserved) Value() any     { return t.u }

// unstructuredList is a list of schema-typed elements.
type unstructuredList struct {
	elements    []any
	itemsSchema *apiextensionsv1.JSONSchemaProps
}

var _ traits.Lister = (*unstructuredList)(nil)

func (t *unstructuredList) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if typeDesc.Kind() == reflect.Slice {
		if t.itemsSchema.Type == "string" {
			result := make([]string, 0, len(t.elements))
			for _, e := range t.elements {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("expected all elements to be of type string, but got %T", e)
				}
				result = append(result, s)
			}
			return result, nil
		}
		return t.elements, nil
	}
	return nil, fmt.Errorf("type conversion error from '%s' to '%s'", t.Type(), typeDesc)
}

func (t *unstructuredList) ConvertToType(typeValue ref.Type) ref.Val {
	switch typeValue.TypeName() {
	case types.ListType.TypeName():
		return t
	case types.TypeType.TypeName():
		return types.ListType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", t.Type(), typeValue.TypeName())
}

func (t *unstructuredList) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	sz := types.Int(len(t.elements))
	if sz != o.Size() {
		return types.False
	}
	for i := types.Int(0); i < sz; i++ {
		if eq := t.Get(i).Equal(o.Get(i)); eq != types.True {
			return eq
		}
	}
	return types.True
}

func (t *unstructuredList) Type() ref.Type { return types.ListType }
func (t *unstructuredList) Value() any     { return t.elements }

func (t *unstructuredList) vals() []ref.Val {
	out := make([]ref.Val, len(t.elements))
	for i := range t.elements {
		out[i] = t.Get(types.Int(i))
	}
	return out
}

func (t *unstructuredList) Add(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	elements := t.vals()
	for it := o.Iterator(); it.HasNext() == types.True; {
		elements = append(elements, it.Next())
	}
	return types.NewRefValList(types.DefaultTypeAdapter, elements)
}

func (t *unstructuredList) Contains(val ref.Val) ref.Val {
	if types.IsUnknownOrError(val) {
		return val
	}
	var errVal ref.Val
	for i := range t.elements {
		cmp := UnstructuredToVal(t.elements[i], t.itemsSchema).Equal(val)
		b, ok := cmp.(types.Bool)
		if !ok && errVal == nil {
			errVal = types.MaybeNoSuchOverloadErr(cmp)
		}
		if b == types.True {
			return types.True
		}
	}
	if errVal != nil {
		return errVal
	}
	return types.False
}

func (t *unstructuredList) Get(idx ref.Val) ref.Val {
	iv, ok := idx.(types.Int)
	if !ok {
		return types.ValOrErr(idx, "unsupported index: %v", idx)
	}
	i := int(iv)
	if i < 0 || i >= len(t.elements) {
		return types.NewErr("index out of bounds: %v", idx)
	}
	return UnstructuredToVal(t.elements[i], t.itemsSchema)
}

func (t *unstructuredList) Iterator() traits.Iterator {
	return &sliceIterator{items: t.vals()}
}

func (t *unstructuredList) Size() ref.Val { return types.Int(len(t.elements)) }

type sliceIterator struct {
	items []ref.Val
	idx   int
}

func (it *sliceIterator) HasNext() ref.Val { return types.Bool(it.idx < len(it.items)) }

func (it *sliceIterator) Next() ref.Val {
	v := it.items[it.idx]
	it.idx++
	return v
}

func (it *sliceIterator) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion on iterators not supported")
}
func (it *sliceIterator) ConvertToType(ref.Type) ref.Val { return types.NewErr("no such overload") }
func (it *sliceIterator) Equal(ref.Val) ref.Val          { return types.NewErr("no such overload") }
func (it *sliceIterator) Type() ref.Type                 { return types.IteratorType }
func (it *sliceIterator) Value() any                     { return nil }

// unstructuredMapList is an x-kubernetes-list-type=map list: equality
// matches elements by their keys, and + merges by key.
type unstructuredMapList struct {
	unstructuredList
	keys []string

	once      sync.Once
	mapOfList map[any]any
}

func (t *unstructuredMapList) byKey() map[any]any {
	t.once.Do(func() {
		t.mapOfList = make(map[any]any, len(t.elements))
		for _, e := range t.elements {
			t.mapOfList[rawMapListKey(e, t.keys)] = e
		}
	})
	return t.mapOfList
}

// rawMapListKey is the comparable key of an unstructured element.
func rawMapListKey(element any, keys []string) any {
	obj, ok := element.(map[string]any)
	if !ok {
		return fmt.Sprintf("%#v", element)
	}
	if len(keys) == 1 {
		return comparableKey(obj[keys[0]])
	}
	parts := make([]any, len(keys))
	for i, k := range keys {
		parts[i] = obj[k]
	}
	return fmt.Sprintf("%#v", parts)
}

func comparableKey(v any) any {
	if v != nil && !reflect.TypeOf(v).Comparable() {
		return fmt.Sprintf("%#v", v)
	}
	return v
}

// refValMapListKey is the same key read from a CEL value (elements of the
// other operand of == or +).
func refValMapListKey(element ref.Val, keys []string) any {
	get := func(prop string) any {
		escaped, ok := Escape(prop)
		if !ok {
			escaped = prop
		}
		m, ok := element.(traits.Mapper)
		if !ok {
			return nil
		}
		v, found := m.Find(types.String(escaped))
		if !found || v == nil || types.IsUnknownOrError(v) {
			return nil
		}
		return v.Value()
	}
	if len(keys) == 1 {
		return comparableKey(get(keys[0]))
	}
	parts := make([]any, len(keys))
	for i, k := range keys {
		parts[i] = get(k)
	}
	return fmt.Sprintf("%#v", parts)
}

func (t *unstructuredMapList) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	if types.Int(len(t.elements)) != o.Size() {
		return types.False
	}
	mine := t.byKey()
	seen := make(map[any]struct{}, len(mine))
	for it := o.Iterator(); it.HasNext() == types.True; {
		v := it.Next()
		k := refValMapListKey(v, t.keys)
		e, ok := mine[k]
		if !ok {
			return types.False
		}
		if eq := UnstructuredToVal(e, t.itemsSchema).Equal(v); eq != types.True {
			return eq
		}
		seen[k] = struct{}{}
	}
	return types.Bool(len(seen) == len(mine))
}

func (t *unstructuredMapList) Add(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return addToMapList(t.vals(), o, t.keys)
}

// addToMapList appends other's elements, an element with an existing key
// replacing the old one in place, as server-side apply merges map lists.
func addToMapList(elements []ref.Val, other traits.Lister, keys []string) ref.Val {
	pos := make(map[any]int, len(elements))
	for i, e := range elements {
		pos[refValMapListKey(e, keys)] = i
	}
	for it := other.Iterator(); it.HasNext() == types.True; {
		v := it.Next()
		k := refValMapListKey(v, keys)
		if i, ok := pos[k]; ok {
			elements[i] = v
		} else {
			pos[k] = len(elements)
			elements = append(elements, v)
		}
	}
	return &refValMapList{Lister: types.NewRefValList(types.DefaultTypeAdapter, elements), keys: keys}
}

type refValMapList struct {
	traits.Lister
	keys []string
}

func (l *refValMapList) elements() []ref.Val {
	sz, _ := l.Size().(types.Int)
	out := make([]ref.Val, int(sz))
	for i := range out {
		out[i] = l.Get(types.Int(i))
	}
	return out
}

func (l *refValMapList) Add(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return addToMapList(l.elements(), o, l.keys)
}

func (l *refValMapList) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	mine := l.elements()
	if types.Int(len(mine)) != o.Size() {
		return types.False
	}
	byKey := make(map[any]ref.Val, len(mine))
	for _, e := range mine {
		byKey[refValMapListKey(e, l.keys)] = e
	}
	seen := make(map[any]struct{}, len(mine))
	for it := o.Iterator(); it.HasNext() == types.True; {
		v := it.Next()
		k := refValMapListKey(v, l.keys)
		e, ok := byKey[k]
		if !ok {
			return types.False
		}
		if eq := e.Equal(v); eq != types.True {
			return eq
		}
		seen[k] = struct{}{}
	}
	return types.Bool(len(seen) == len(byKey))
}
