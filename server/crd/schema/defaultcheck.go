package schema

import (
	"fmt"
	"reflect"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A default must itself be a valid value of its schema, contain nothing
// pruning would drop, and, inside an embedded resource's metadata, result in
// valid ObjectMeta (upstream's defaulting.ValidateDefaults).

// surrounding builds the object a default would sit in, so that defaults
// inside metadata can be checked as whole ObjectMeta: root()(x) == x,
// root().child("a")(x) == {"a": x}, root().index()(x) == [x].
type surrounding func(focus any) (map[string]any, error)

func rootObject() surrounding {
	return func(x any) (map[string]any, error) {
		obj, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("object root default value must be of object type")
		}
		return obj, nil
	}
}

// withTypeMeta fills in apiVersion and kind unless present, so that the
// surrounding object passes TypeMeta validation.
func (f surrounding) withTypeMeta() surrounding {
	return func(x any) (map[string]any, error) {
		obj, err := f(x)
		if err != nil {
			return nil, err
		}
		if obj == nil {
			obj = map[string]any{}
		}
		if _, found := obj["kind"]; !found {
			obj["kind"] = "Validation"
		}
		if _, found := obj["apiVersion"]; !found {
			obj["apiVersion"] = "validation/v1"
		}
		return obj, nil
	}
}

func (f surrounding) child(k string) surrounding {
	return func(x any) (map[string]any, error) { return f(map[string]any{k: x}) }
}

func (f surrounding) index() surrounding {
	return func(x any) (map[string]any, error) { return f([]any{x}) }
}

type defaultsChecker struct{ requirePruned bool }

func validateDefaults(pth *field.Path, s *apiextensionsv1.JSONSchemaProps, isResourceRoot, requirePruned bool) (field.ErrorList, error) {
	if isResourceRoot {
		s = withEmbedded(s)
	}
	c := defaultsChecker{requirePruned: requirePruned}
	return c.check(pth, s, s, rootObject().withTypeMeta(), false)
}

func (c defaultsChecker) check(pth *field.Path, s, root *apiextensionsv1.JSONSchemaProps, f surrounding, insideMeta bool) (field.ErrorList, error) {
	if s == nil {
		return nil, nil
	}
	if s.XEmbeddedResource {
		insideMeta = false
		f = rootObject().withTypeMeta()
		root = s
	}
	var errs field.ErrorList
	if orig, ok := defaultOf(s); ok {
		var err error
		var derrs field.ErrorList
		if insideMeta {
			derrs, err = c.metaDefault(pth, s, root, f, orig)
		} else {
			derrs = c.plainDefault(pth, s, orig)
		}
		if err != nil {
			return nil, err
		}
		errs = append(errs, derrs...)
	}
	if items := itemsOf(s); items != nil {
		ierrs, err := c.check(pth.Child("items"), items, root, f.index(), insideMeta)
		if err != nil {
			return nil, err
		}
		errs = append(errs, ierrs...)
	}
	for _, k := range propertyNames(s.Properties) {
		subInsideMeta := insideMeta || (s.XEmbeddedResource && implicitMetaFields[k])
		p := s.Properties[k]
		perrs, err := c.check(pth.Child("properties").Key(k), &p, root, f.child(k), subInsideMeta)
		if err != nil {
			return nil, err
		}
		errs = append(errs, perrs...)
	}
	// As upstream, defaults below additionalProperties are not checked here.
	return errs, nil
}

// metaDefault checks a default inside an embedded resource's TypeMeta or
// ObjectMeta in its surrounding resource.
func (c defaultsChecker) metaDefault(pth *field.Path, s, root *apiextensionsv1.JSONSchemaProps, f surrounding, orig any) (field.ErrorList, error) {
	d, _ := defaultOf(s)
	obj, err := f(d)
	if err != nil {
		return nil, fmt.Errorf("failed to validate default value inside metadata: %v", err)
	}
	if ferr, _ := coerce(nil, obj, root, true, false, false); ferr != nil {
		return field.ErrorList{field.Invalid(pth.Child("default"), orig, fmt.Sprintf("must result in valid metadata: %v", ferr))}, nil
	}
	if merrs := validateObjectMeta(nil, obj, root, true); len(merrs) > 0 {
		return field.ErrorList{field.Invalid(pth.Child("default"), orig, fmt.Sprintf("must result in valid metadata: %v", merrs.ToAggregate()))}, nil
	}
	v, _ := defaultOf(s)
	return openapiValidate(s, v, pth.Child("default")), nil
}

func (c defaultsChecker) plainDefault(pth *field.Path, s *apiextensionsv1.JSONSchemaProps, orig any) field.ErrorList {
	var errs field.ErrorList
	if c.requirePruned {
		pruned, _ := defaultOf(s)
		pruneOnly(pruned, s, s.XEmbeddedResource)
		if !reflect.DeepEqual(pruned, orig) {
			errs = append(errs, field.Invalid(pth.Child("default"), orig, "must not have unknown fields"))
		}
	}
	// As upstream, the later checks see the default with coerced metadata.
	v, _ := defaultOf(s)
	if ferr, _ := coerce(pth.Child("default"), v, s, s.XEmbeddedResource, false, false); ferr != nil {
		return append(errs, ferr)
	}
	if merrs := validateObjectMeta(pth.Child("default"), v, s, s.XEmbeddedResource); len(merrs) > 0 {
		return append(errs, merrs...)
	}
	return append(errs, openapiValidate(s, v, pth.Child("default"))...)
}
