package schema

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
)

// Embedded resources (x-kubernetes-embedded-resource) carry TypeMeta and
// ObjectMeta the schema cannot describe; upstream's objectmeta package
// decodes their metadata into metav1.ObjectMeta (dropping what ObjectMeta
// does not know) and validates it as the API server validates a root's.

// getObjectMeta decodes obj["metadata"]. With dropMalformed, fields that do
// not decode are dropped one by one instead of failing; with parent != nil
// or track, unknown fields are reported as paths below parent.metadata.
func getObjectMeta(obj map[string]any, dropMalformed, track bool, parent *field.Path) (*metav1.ObjectMeta, bool, []string, error) {
	metadata, found := obj["metadata"]
	if !found {
		return nil, false, nil, nil
	}
	b, err := utiljson.Marshal(metadata)
	if err != nil {
		return nil, false, nil, err
	}
	prefix := parent.Child("metadata").String()
	unknownPaths := func(strictErrs []error) []string {
		var paths []string
		for _, e := range strictErrs {
			if fe, ok := e.(kjson.FieldError); ok {
				paths = append(paths, prefix+"."+fe.FieldPath())
			}
		}
		return paths
	}
	meta := &metav1.ObjectMeta{}
	var decodeErr error
	if track {
		var strictErrs []error
		if strictErrs, decodeErr = kjson.UnmarshalStrict(b, meta); decodeErr == nil {
			return meta, true, unknownPaths(strictErrs), nil
		}
	} else if decodeErr = utiljson.Unmarshal(b, meta); decodeErr == nil {
		return meta, true, nil, nil
	}
	if !dropMalformed {
		return nil, true, nil, decodeErr
	}
	m, ok := metadata.(map[string]any)
	if !ok {
		return nil, false, nil, fmt.Errorf("invalid metadata: expected object, got %T", metadata)
	}
	// Field by field: repeated unmarshalling into one struct accumulates.
	acc, probe := &metav1.ObjectMeta{}, &metav1.ObjectMeta{}
	var unknown []string
	for k, v := range m {
		one, err := utiljson.Marshal(map[string]any{k: v})
		if err != nil || utiljson.Unmarshal(one, probe) != nil {
			continue
		}
		if track {
			strictErrs, _ := kjson.UnmarshalStrict(one, acc)
			unknown = append(unknown, unknownPaths(strictErrs)...)
		} else {
			_ = utiljson.Unmarshal(one, acc)
		}
	}
	return acc, true, unknown, nil
}

func setObjectMeta(obj map[string]any, meta *metav1.ObjectMeta) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(meta)
	if err != nil {
		return err
	}
	obj["metadata"] = m
	if meta.CreationTimestamp.IsZero() {
		unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	}
	return nil
}

// coercer checks TypeMeta types of embedded resources and prunes their
// metadata to ObjectMeta (upstream's objectmeta.Coerce).
type coercer struct {
	dropInvalid bool
	track       bool
	unknown     []string
}

func coerce(pth *field.Path, obj any, s *apiextensionsv1.JSONSchemaProps, isResourceRoot, dropInvalid, track bool) (*field.Error, []string) {
	if isResourceRoot {
		s = withEmbedded(s)
	}
	c := &coercer{dropInvalid: dropInvalid, track: track}
	err := c.coerce(pth, obj, s)
	sort.Strings(c.unknown)
	return err, c.unknown
}

func (c *coercer) coerce(pth *field.Path, x any, s *apiextensionsv1.JSONSchemaProps) *field.Error {
	if s == nil {
		return nil
	}
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if s.XEmbeddedResource {
				if err := c.typeAndObjectMeta(pth, x, k, v); err != nil {
					return err
				}
			}
			if p, ok := s.Properties[k]; ok {
				if err := c.coerce(pth.Child(k), v, &p); err != nil {
					return err
				}
			} else if has, ap := additional(s); has {
				if err := c.coerce(pth.Key(k), v, ap); err != nil {
					return err
				}
			}
		}
	case []any:
		for i, v := range x {
			if err := c.coerce(pth.Index(i), v, itemsOf(s)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *coercer) typeAndObjectMeta(pth *field.Path, x map[string]any, k string, v any) *field.Error {
	switch k {
	case "apiVersion", "kind":
		if _, ok := v.(string); !ok {
			if !c.dropInvalid {
				return field.Invalid(pth.Child(k), v, "must be a string")
			}
			delete(x, k)
		}
	case "metadata":
		meta, found, unknown, err := getObjectMeta(x, c.dropInvalid, c.track, pth)
		c.unknown = append(c.unknown, unknown...)
		if err != nil {
			if !c.dropInvalid {
				return field.Invalid(pth.Child("metadata"), v, err.Error())
			}
		} else if found {
			if err := setObjectMeta(x, meta); err != nil {
				return field.Invalid(pth.Child("metadata"), v, err.Error())
			}
		}
	}
	return nil
}

// validateObjectMeta validates TypeMeta and ObjectMeta of embedded
// resources, and of obj itself when isResourceRoot (upstream's
// objectmeta.Validate).
func validateObjectMeta(pth *field.Path, obj any, s *apiextensionsv1.JSONSchemaProps, isResourceRoot bool) field.ErrorList {
	if isResourceRoot {
		s = withEmbedded(s)
	}
	return validateEmbedded(pth, obj, s)
}

func validateEmbedded(pth *field.Path, x any, s *apiextensionsv1.JSONSchemaProps) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	switch x := x.(type) {
	case map[string]any:
		if s.XEmbeddedResource {
			errs = append(errs, validateEmbeddedResource(pth, x)...)
		}
		for _, k := range sortedKeys(x) {
			if p, ok := s.Properties[k]; ok {
				errs = append(errs, validateEmbedded(pth.Child(k), x[k], &p)...)
			} else if has, ap := additional(s); has {
				errs = append(errs, validateEmbedded(pth.Key(k), x[k], ap)...)
			}
		}
	case []any:
		for i, v := range x {
			errs = append(errs, validateEmbedded(pth.Index(i), v, itemsOf(s))...)
		}
	}
	return errs
}

func validateEmbeddedResource(pth *field.Path, x map[string]any) field.ErrorList {
	var errs field.ErrorList
	// apiVersion and kind are required, metadata is not.
	if _, found := x["apiVersion"]; !found {
		errs = append(errs, field.Required(pth.Child("apiVersion"), ""))
	}
	if _, found := x["kind"]; !found {
		errs = append(errs, field.Required(pth.Child("kind"), ""))
	}
	if v, found := x["apiVersion"]; found {
		if apiVersion, ok := v.(string); !ok {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), v, "must be a string"))
		} else if apiVersion == "" {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), apiVersion, "must not be empty"))
		} else if _, err := runtimeschema.ParseGroupVersion(apiVersion); err != nil {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), apiVersion, err.Error()))
		}
	}
	if v, found := x["kind"]; found {
		if kind, ok := v.(string); !ok {
			errs = append(errs, field.Invalid(pth.Child("kind"), v, "must be a string"))
		} else if kind == "" {
			errs = append(errs, field.Invalid(pth.Child("kind"), kind, "must not be empty"))
		} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(kind)); len(msgs) > 0 {
			errs = append(errs, field.Invalid(pth.Child("kind"), kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
		}
	}
	if v, found := x["metadata"]; found {
		meta, _, _, err := getObjectMeta(x, false, false, nil)
		if err != nil {
			return append(errs, field.Invalid(pth.Child("metadata"), v, err.Error()))
		}
		if meta.Name == "" {
			meta.Name = "fakename" // a name may be generated later; ObjectMeta validation wants one
		}
		nameFn := func(name string, prefix bool) []string {
			if prefix {
				return content.IsPathSegmentPrefix(name)
			}
			return content.IsPathSegmentName(name)
		}
		// DeclarativeValidationBeta is on by default since 1.36.
		errs = append(errs, metavalidation.ValidateObjectMetaDeclaratively(context.TODO(), operation.Create, meta, nil, meta.Namespace != "", nameFn, pth.Child("metadata"), true)...)
	}
	return errs
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
