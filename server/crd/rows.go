// Package crd serves CustomResourceDefinitions: each established CRD
// becomes registry rows at run time (one per served version), so custom
// objects go through the same REST engine, watch cache, admission and
// garbage collection as built-ins; and the controller that keeps a CRD's
// status (NamesAccepted, Established, Terminating) and deletes its objects
// before the CRD itself.
package crd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/cel"
	"skiff/server/crd/conversion"
	crdschema "skiff/server/crd/schema"
	"skiff/server/registry"
)

// celBudget bounds the CEL rules of one write, as upstream's per-request
// context does; the rules' own cost budget is enforced by package cel.
const celBudget = 10 * time.Second

// Deps are what the rows of a CRD need beyond the CRD itself.
type Deps struct {
	// Converter converts objects between the CRD's versions (nil when the
	// CRD has one version).
	Converter conversion.Converter
	// ApplyTypes builds the server-side apply schema of a CRD's versions
	// (nil: custom objects have no server-side apply).
	ApplyTypes func(crd *apiextensionsv1.CustomResourceDefinition, version string) (managedfields.TypeConverter, error)
}

// version is one served version of a CRD with what its rows evaluate.
type version struct {
	crd        *apiextensionsv1.CustomResourceDefinition
	v          *apiextensionsv1.CustomResourceDefinitionVersion
	schema     *apiextensionsv1.JSONSchemaProps
	rules      *cel.Validator
	namespaced bool
}

// Rows builds the registry rows of a CRD: one per served version. The
// storage version's objects are stored as they are; the other versions
// convert to and from it.
func Rows(crd *apiextensionsv1.CustomResourceDefinition, deps Deps) ([]*registry.Resource, error) {
	storage, ok := StorageVersion(crd)
	if !ok {
		return nil, fmt.Errorf("crd %s: no storage version", crd.Name)
	}
	var out []*registry.Resource
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if !v.Served {
			continue
		}
		res, err := row(crd, v, storage, deps)
		if err != nil {
			return nil, fmt.Errorf("crd %s version %s: %w", crd.Name, v.Name, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// StorageVersion is the name of the CRD's version with storage: true.
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) (string, bool) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name, true
		}
	}
	return "", false
}

func row(crd *apiextensionsv1.CustomResourceDefinition, v *apiextensionsv1.CustomResourceDefinitionVersion, storage string, deps Deps) (*registry.Resource, error) {
	names := crd.Status.AcceptedNames
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: names.Kind}
	listGVK := gvk.GroupVersion().WithKind(names.ListKind)
	ver := &version{crd: crd, v: v, namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped}
	if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
		ver.schema = v.Schema.OpenAPIV3Schema
		rules, errs := cel.CompileSchema(ver.schema, field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema"))
		if len(errs) > 0 {
			return nil, fmt.Errorf("compiling x-kubernetes-validations: %v", errs.ToAggregate())
		}
		ver.rules = rules
	}
	res := &registry.Resource{
		Group: crd.Spec.Group, Version: v.Name, Name: names.Plural, Singular: names.Singular,
		Kind: names.Kind, ListKind: names.ListKind, Namespaced: ver.namespaced,
		ShortNames: names.ShortNames, Categories: names.Categories,
		Verbs:  []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
		Custom: true,
		New: func() runtime.Object {
			u := &unstructured.Unstructured{Object: map[string]any{}}
			u.SetGroupVersionKind(gvk)
			return u
		},
		NewList: func() runtime.Object {
			l := &unstructured.UnstructuredList{Object: map[string]any{}}
			l.SetGroupVersionKind(listGVK)
			return l
		},
		// Upstream counts every change but metadata's (and status's, with
		// a status subresource) in generation.
		Generation:     true,
		Default:        ver.defaultObject,
		Validate:       ver.validate,
		ValidateUpdate: ver.validateUpdate,
		Prune:          ver.prune,
		Table:          table(v),
	}
	if sub := v.Subresources; sub != nil {
		res.Status = sub.Status != nil
		if sub.Scale != nil {
			res.Scale = true
			res.ScaleHooks = scaleHooks(sub.Scale)
		}
	}
	if len(v.SelectableFields) > 0 {
		res.Fields = selectableFields(v.SelectableFields)
	}
	if deps.ApplyTypes != nil {
		tc, err := deps.ApplyTypes(crd, v.Name)
		if err != nil {
			return nil, fmt.Errorf("server-side apply schema: %w", err)
		}
		res.ApplyTypes = tc
	}
	// Stored objects may be of any version (the storage version changes
	// over a CRD's life), and defaults apply on read too: such rows read
	// and write through a conversion. A single version without defaults
	// serves its stored bytes as they are.
	if deps.Converter != nil || hasDefaults(ver.schema) {
		res.Convert = conversionTo(deps.Converter, crd.Spec.Group, storage, v.Name, ver.defaultObject)
	}
	return res, nil
}

// hasDefaults reports whether a schema sets a default anywhere.
func hasDefaults(s *apiextensionsv1.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	if s.Default != nil {
		return true
	}
	for _, p := range s.Properties {
		if hasDefaults(&p) {
			return true
		}
	}
	if s.Items != nil && (hasDefaults(s.Items.Schema) || slices.ContainsFunc(s.Items.JSONSchemas, func(x apiextensionsv1.JSONSchemaProps) bool { return hasDefaults(&x) })) {
		return true
	}
	if s.AdditionalProperties != nil && hasDefaults(s.AdditionalProperties.Schema) {
		return true
	}
	return false
}

// conversionTo converts between a served version and the storage version.
// Reads are defaulted by the served version's schema after conversion, as
// upstream defaults on read.
func conversionTo(c conversion.Converter, group, storage, served string, def func(runtime.Object)) *registry.Conversion {
	storageAPIVersion := schema.GroupVersion{Group: group, Version: storage}.String()
	servedAPIVersion := schema.GroupVersion{Group: group, Version: served}.String()
	convert := func(obj runtime.Object, to string) (runtime.Object, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("custom object is %T, not unstructured", obj)
		}
		if c == nil || u.GetAPIVersion() == to {
			out := u.DeepCopy()
			out.SetAPIVersion(to)
			return out, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return c.Convert(ctx, u, to)
	}
	return &registry.Conversion{
		StorageVersion: storage,
		NewStored: func() runtime.Object {
			return &unstructured.Unstructured{Object: map[string]any{}}
		},
		ToStorage: func(obj runtime.Object) (runtime.Object, error) {
			return convert(obj, storageAPIVersion)
		},
		FromStorage: func(stored runtime.Object) (runtime.Object, error) {
			out, err := convert(stored, servedAPIVersion)
			if err == nil && def != nil {
				def(out)
			}
			return out, err
		},
	}
}

func content(obj runtime.Object) map[string]any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object
	}
	return nil
}

// defaultObject applies the schema's defaults.
func (v *version) defaultObject(obj runtime.Object) {
	if m := content(obj); m != nil && v.schema != nil {
		crdschema.Default(v.schema, m)
	}
}

// prune drops what the schema does not declare and says what it dropped.
func (v *version) prune(obj runtime.Object) []string {
	m := content(obj)
	if m == nil {
		return nil
	}
	// Root metadata is ObjectMeta whatever the schema says: fields it does
	// not have are dropped (and reported), as upstream's decoder does.
	unknown, _ := crdschema.UnknownObjectMetaFields(m)
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, p := range unknown {
			if name, ok := strings.CutPrefix(p, "metadata."); ok && !strings.Contains(name, ".") {
				delete(md, name)
			}
		}
	}
	if v.schema == nil {
		return unknown
	}
	return append(unknown, crdschema.Prune(v.schema, m, true)...)
}

func (v *version) validate(obj runtime.Object) field.ErrorList {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	errs := apivalidation.ValidateObjectMetaAccessor(acc, v.namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, v.validateContent(obj, nil)...)
}

func (v *version) validateUpdate(obj, old runtime.Object) field.ErrorList {
	acc, err1 := meta.Accessor(obj)
	oldAcc, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("custom object without metadata"))}
	}
	errs := apivalidation.ValidateObjectMetaAccessorUpdate(acc, oldAcc, field.NewPath("metadata"))
	return append(errs, v.validateContent(obj, old)...)
}

// validateContent checks an object (and its change from old) against the
// schema and its CEL rules.
func (v *version) validateContent(obj, old runtime.Object) field.ErrorList {
	m := content(obj)
	if m == nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("custom object is %T", obj))}
	}
	var errs field.ErrorList
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind == "" {
		errs = append(errs, field.Required(field.NewPath("kind"), ""))
	}
	if v.schema == nil {
		return errs
	}
	errs = append(errs, crdschema.Validate(v.schema, m, nil)...)
	if v.rules != nil {
		var oldContent any
		if om := content(old); om != nil {
			oldContent = om
		}
		ctx, cancel := context.WithTimeout(context.Background(), celBudget)
		defer cancel()
		errs = append(errs, v.rules.Validate(ctx, nil, m, oldContent)...)
	}
	return errs
}
