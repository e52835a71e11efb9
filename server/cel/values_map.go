package cel

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// unstructuredSetList is an x-kubernetes-list-type=set list: equality
// ignores order, and + appends only new elements.
type unstructuredSetList struct {
	unstructuredList

	once   sync.Once
	set    map[any]struct{}
	setErr ref.Val
}

func (t *unstructuredSetList) getSet() (map[any]struct{}, ref.Val) {
	t.once.Do(func() {
		t.set = make(map[any]struct{}, len(t.elements))
		for i := range t.elements {
			k, err := setElementKey(t.Get(types.Int(i)))
			if err != nil {
				t.set, t.setErr = nil, err
				return
			}
			t.set[k] = struct{}{}
		}
	})
	return t.set, t.setErr
}

func (t *unstructuredSetList) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	if types.Int(len(t.elements)) != o.Size() {
		return types.False
	}
	mine, err := t.getSet()
	if err != nil {
		return err
	}
	return setEqual(mine, o)
}

func setEqual(mine map[any]struct{}, o traits.Lister) ref.Val {
	seen := make(map[any]struct{}, len(mine))
	for it := o.Iterator(); it.HasNext() == types.True; {
		k, err := setElementKey(it.Next())
		if err != nil {
			return err
		}
		if _, ok := mine[k]; !ok {
			return types.False
		}
		seen[k] = struct{}{}
	}
	return types.Bool(len(seen) == len(mine))
}

func (t *unstructuredSetList) Add(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return addToSetList(t.vals(), o)
}

func addToSetList(elements []ref.Val, other traits.Lister) ref.Val {
	set := make(map[any]struct{}, len(elements))
	for _, e := range elements {
		k, err := setElementKey(e)
		if err != nil {
			return err
		}
		set[k] = struct{}{}
	}
	for it := other.Iterator(); it.HasNext() == types.True; {
		v := it.Next()
		k, err := setElementKey(v)
		if err != nil {
			return err
		}
		if _, exists := set[k]; !exists {
			set[k] = struct{}{}
			elements = append(elements, v)
		}
	}
	return &refValSetList{Lister: types.NewRefValList(types.DefaultTypeAdapter, elements)}
}

func setElementKey(element ref.Val) (any, ref.Val) {
	switch element.(type) {
	case traits.Lister, traits.Mapper:
		return nil, types.NewErr("listSet operations are only supported on lists of scalar values")
	}
	return comparableKey(element.Value()), nil
}

type refValSetList struct{ traits.Lister }

func (l *refValSetList) elements() []ref.Val {
	sz, _ := l.Size().(types.Int)
	out := make([]ref.Val, int(sz))
	for i := range out {
		out[i] = l.Get(types.Int(i))
	}
	return out
}

func (l *refValSetList) Add(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return addToSetList(l.elements(), o)
}

func (l *refValSetList) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	mine := l.elements()
	if types.Int(len(mine)) != o.Size() {
		return types.False
	}
	set := make(map[any]struct{}, len(mine))
	for _, e := range mine {
		k, err := setElementKey(e)
		if err != nil {
			return err
		}
		set[k] = struct{}{}
	}
	return setEqual(set, o)
}

// unstructuredMap is an object (fields by escaped name, only those the
// schema declares) or a map (additionalProperties).
type unstructuredMap struct {
	value      map[string]any
	schema     *apiextensionsv1.JSONSchemaProps
	isObject   bool
	propSchema func(key string) *apiextensionsv1.JSONSchemaProps
}

var _ traits.Mapper = (*unstructuredMap)(nil)

func (t *unstructuredMap) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if typeDesc.Kind() == reflect.Map {
		return t.value, nil
	}
	return nil, fmt.Errorf("type conversion error from '%s' to '%s'", t.Type(), typeDesc)
}

func (t *unstructuredMap) ConvertToType(typeValue ref.Type) ref.Val {
	switch typeValue.TypeName() {
	case types.MapType.TypeName():
		return t
	case types.TypeType.TypeName():
		return types.MapType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", t.Type(), typeValue.TypeName())
}

func (t *unstructuredMap) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Mapper)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	if t.Size() != o.Size() {
		return types.False
	}
	for key, value := range t.value {
		if t.propSchema(key) != nil {
			lookup := types.String(key)
			if t.isObject {
				if escaped, ok := Escape(key); ok {
					lookup = types.String(escaped)
				}
			}
			v, found := t.Find(lookup)
			ov, oFound := o.Find(lookup)
			if found != oFound {
				return types.False
			}
			if !found {
				continue
			}
			if eq := v.Equal(ov); eq != types.True {
				return eq
			}
			continue
		}
		// Fields the schema does not declare are compared as data.
		ou, ok := other.(*unstructuredMap)
		if !ok {
			return types.MaybeNoSuchOverloadErr(other)
		}
		if ov, ok := ou.value[key]; ok && !equality.Semantic.DeepEqual(value, ov) {
			return types.False
		}
	}
	return types.True
}

func (t *unstructuredMap) Type() ref.Type { return types.MapType }
func (t *unstructuredMap) Value() any     { return t.value }

func (t *unstructuredMap) Contains(key ref.Val) ref.Val {
	v, found := t.Find(key)
	if v != nil && types.IsUnknownOrError(v) {
		return v
	}
	return types.Bool(found)
}

func (t *unstructuredMap) Get(key ref.Val) ref.Val {
	if v, found := t.Find(key); found {
		return v
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

func (t *unstructuredMap) Iterator() traits.Iterator {
	keys := make([]ref.Val, 0, len(t.value))
	for k := range t.value {
		if t.propSchema(k) == nil {
			continue
		}
		mk := k
		if t.isObject {
			if escaped, ok := Escape(k); ok {
				mk = escaped
			}
		}
		keys = append(keys, types.String(mk))
	}
	return &sliceIterator{items: keys}
}

func (t *unstructuredMap) Size() ref.Val { return types.Int(len(t.value)) }

// Find looks a key up; an object's keys are escaped field names, and an
// object field set to null counts as absent.
func (t *unstructuredMap) Find(key ref.Val) (ref.Val, bool) {
	ks, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key), true
	}
	k := string(ks)
	if t.isObject {
		if k, ok = Unescape(k); !ok {
			return nil, false
		}
	}
	v, ok := t.value[k]
	if !ok {
		return nil, false
	}
	if t.isObject && v == nil {
		return nil, false
	}
	if ps := t.propSchema(k); ps != nil {
		return UnstructuredToVal(v, ps), true
	}
	return nil, false
}
