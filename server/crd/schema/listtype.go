package schema

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Lists with x-kubernetes-list-type set or map must not repeat an element
// or a key (upstream's listtype package); the error names the later of two
// equal elements, once per distinct value.

func validateListSetsAndMaps(fld *field.Path, s *apiextensionsv1.JSONSchemaProps, obj any) field.ErrorList {
	if s == nil {
		return nil
	}
	switch obj := obj.(type) {
	case []any:
		return listSetsAndMapsArray(fld, s, obj)
	case map[string]any:
		var errs field.ErrorList
		if _, ap := additional(s); ap != nil {
			for _, k := range sortedKeys(obj) {
				errs = append(errs, validateListSetsAndMaps(fld.Key(k), ap, obj[k])...)
			}
		}
		for _, k := range sortedKeys(obj) {
			if p, ok := s.Properties[k]; ok {
				errs = append(errs, validateListSetsAndMaps(fld.Child(k), &p, obj[k])...)
			}
		}
		return errs
	}
	return nil
}

func listSetsAndMapsArray(fld *field.Path, s *apiextensionsv1.JSONSchemaProps, obj []any) field.ErrorList {
	var errs field.ErrorList
	if s.XListType != nil {
		switch *s.XListType {
		case "set":
			nonUnique, err := nonUniqueIndices(fld, obj)
			if err != nil {
				errs = append(errs, err)
			}
			for _, i := range nonUnique {
				errs = append(errs, field.Duplicate(fld.Index(i), obj[i]))
			}
		case "map":
			errs = append(errs, validateListMap(fld, s, obj)...)
		}
	}
	if items := itemsOf(s); items != nil {
		for i := range obj {
			errs = append(errs, validateListSetsAndMaps(fld.Index(i), items, obj[i])...)
		}
	}
	return errs
}

// nonUniqueIndices returns the index of the second appearance of every value
// that appears more than once. Compound values compare by their JSON.
func nonUniqueIndices(fld *field.Path, obj []any) ([]int, *field.Error) {
	if len(obj) <= 1 {
		return nil, nil
	}
	seenScalars := make(map[any]int, len(obj))
	seenCompounds := make(map[string]int, len(obj))
	var nonUnique []int
	for i, x := range obj {
		switch x.(type) {
		case map[string]any, []any:
			b, err := utiljson.Marshal(x)
			if err != nil {
				return nil, field.Invalid(fld.Index(i), x, "internal error")
			}
			seenCompounds[string(b)]++
			if seenCompounds[string(b)] == 2 {
				nonUnique = append(nonUnique, i)
			}
		default:
			seenScalars[x]++
			if seenScalars[x] == 2 {
				nonUnique = append(nonUnique, i)
			}
		}
	}
	return nonUnique, nil
}

// unspecifiedKey stands for an absent key (or a null element), which is
// distinct from an explicit null key value.
type unspecifiedKey struct{}

func validateListMap(fld *field.Path, s *apiextensionsv1.JSONSchemaProps, obj []any) field.ErrorList {
	for i, x := range obj {
		if _, ok := x.(map[string]any); x != nil && !ok {
			return field.ErrorList{field.Invalid(fld.Index(i), x, "must be an object for an array of list-type map")}
		}
	}
	if len(obj) <= 1 {
		return nil
	}
	if len(s.XListMapKeys) == 1 {
		keyField := s.XListMapKeys[0]
		keys := make([]any, 0, len(obj))
		for _, x := range obj {
			var key any = unspecifiedKey{}
			if m, isMap := x.(map[string]any); isMap {
				if v, ok := m[keyField]; ok {
					key = v
				}
			}
			keys = append(keys, key)
		}
		nonUnique, err := nonUniqueIndices(fld, keys)
		if err != nil {
			return field.ErrorList{err}
		}
		var errs field.ErrorList
		for _, i := range nonUnique {
			if keys[i] == (unspecifiedKey{}) {
				errs = append(errs, field.Duplicate(fld.Index(i), map[string]any{}))
			} else {
				errs = append(errs, field.Duplicate(fld.Index(i), map[string]any{keyField: keys[i]}))
			}
		}
		return errs
	}
	keys := make([]any, 0, len(obj))
	for _, x := range obj {
		key := map[string]any{}
		if m, ok := x.(map[string]any); ok {
			for _, k := range s.XListMapKeys {
				if v, ok := m[k]; ok {
					key[k] = v
				}
			}
		}
		keys = append(keys, key)
	}
	nonUnique, err := nonUniqueIndices(fld, keys)
	if err != nil {
		return field.ErrorList{err}
	}
	var errs field.ErrorList
	for _, i := range nonUnique {
		errs = append(errs, field.Duplicate(fld.Index(i), keys[i]))
	}
	return errs
}
