package openapi

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Definitions a custom resource's schemas and operations refer to.
const (
	objectMetaDef = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	listMetaDef   = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
	scaleDef      = "io.k8s.api.autoscaling.v1.Scale"
)

// crdVersion is one version of a CustomResourceDefinition as the documents
// describe it.
type crdVersion struct {
	crd *apiextensionsv1.CustomResourceDefinition
	v   *apiextensionsv1.CustomResourceDefinitionVersion
}

func (c crdVersion) gv() schema.GroupVersion {
	return schema.GroupVersion{Group: c.crd.Spec.Group, Version: c.v.Name}
}

func (c crdVersion) gvk() schema.GroupVersionKind { return c.gv().WithKind(c.crd.Spec.Names.Kind) }

func (c crdVersion) listGVK() schema.GroupVersionKind {
	return c.gv().WithKind(c.crd.Spec.Names.ListKind)
}

// crdDefinitionName is upstream's name for a custom kind's definition: the
// group reversed, then version and kind ("com.example.stable.v1.CronTab").
func crdDefinitionName(gvk schema.GroupVersionKind) string {
	return reverseDots(gvk.Group) + "." + gvk.Version + "." + gvk.Kind
}

// crdDefinitions are the definitions of a version's kind and list kind in
// one dialect, named by crdDefinitionName.
func crdDefinitions(c crdVersion, meta *metaModels, v3 bool) (map[string]*spec.Schema, error) {
	kind, err := crdKindSchema(c, meta, v3)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.gvk(), err)
	}
	return map[string]*spec.Schema{
		crdDefinitionName(c.gvk()):     kind,
		crdDefinitionName(c.listGVK()): crdListSchema(c, meta, v3),
	}, nil
}

// crdKindSchema is the definition of the custom kind, built as upstream's
// buildKubeNative builds it: the version's schema with int-or-string
// spelled out, the TypeMeta fields, ObjectMeta for metadata and for every
// embedded resource. Without a usable schema, or in v2 when unknown fields
// are kept at the root, it is a bare object: any property listed would make
// kubectl refuse all others.
func crdKindSchema(c crdVersion, meta *metaModels, v3 bool) (*spec.Schema, error) {
	var props *apiextensionsv1.JSONSchemaProps
	if c.v.Schema != nil && !hasInvalidTypes(c.v.Schema.OpenAPIV3Schema) {
		props = c.v.Schema.OpenAPIV3Schema
	}
	preserveRoot := c.crd.Spec.PreserveUnknownFields ||
		(props != nil && props.XPreserveUnknownFields != nil && *props.XPreserveUnknownFields)
	var out *spec.Schema
	if props == nil || (!v3 && preserveRoot) {
		out = &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
	} else {
		s, err := crdSchema(props)
		if err != nil {
			return nil, err
		}
		unfold(s)
		if !v3 {
			toV2(s)
		}
		g := meta.generator(v3)
		if s.Properties == nil {
			s.Properties = map[string]spec.Schema{}
		}
		s.Properties["metadata"] = g.decorate(refSchema(g.d.refPrefix+objectMetaDef), partialMetadataDoc(), nil, nil)
		addTypeMetaProperties(s, "", "")
		addEmbeddedProperties(s, g)
		out = s
	}
	setExtensions(out, map[string]any{extGVK: []any{gvkObject(c.gvk())}})
	if f := selectableFields(c.v); f != nil {
		setExtensions(out, map[string]any{extSelectableFields: f})
	}
	return out, nil
}

// crdListSchema is the definition of the list kind.
func crdListSchema(c crdVersion, meta *metaModels, v3 bool) *spec.Schema {
	g := meta.generator(v3)
	names := c.crd.Spec.Names
	items := typed("array", "")
	items.Description = "List of " + names.Plural + ". More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
	ref := refSchema(g.d.refPrefix + crdDefinitionName(c.gvk()))
	items.Items = &spec.SchemaOrArray{Schema: &ref}
	s := typed("object", "")
	s.Description = names.ListKind + " is a list of " + names.Kind
	s.Required = []string{"items"}
	s.Properties = map[string]spec.Schema{
		"items":    items,
		"metadata": g.decorate(refSchema(g.d.refPrefix+listMetaDef), swaggerDocs(reflect.TypeFor[metav1.PartialObjectMetadataList]())["metadata"], nil, nil),
	}
	addTypeMetaProperties(&s, "", "")
	setExtensions(&s, map[string]any{extGVK: []any{gvkObject(c.listGVK())}})
	if f := selectableFields(c.v); f != nil {
		setExtensions(&s, map[string]any{extSelectableFields: f})
	}
	return &s
}

func partialMetadataDoc() string {
	return swaggerDocs(reflect.TypeFor[metav1.PartialObjectMetadata]())["metadata"]
}

// addTypeMetaProperties adds apiVersion and kind with TypeMeta's
// descriptions, or the given ones.
func addTypeMetaProperties(s *spec.Schema, apiVersionDoc, kindDoc string) {
	docs := swaggerDocs(reflect.TypeFor[metav1.TypeMeta]())
	if apiVersionDoc == "" {
		apiVersionDoc = docs["apiVersion"]
	}
	if kindDoc == "" {
		kindDoc = docs["kind"]
	}
	av, k := typed("string", ""), typed("string", "")
	av.Description, k.Description = apiVersionDoc, kindDoc
	s.Properties["apiVersion"], s.Properties["kind"] = av, k
}

// addEmbeddedProperties gives every x-kubernetes-embedded-resource object
// the TypeMeta and ObjectMeta properties, with apiVersion and kind
// required, as upstream does; not in v2 where the object keeps unknown
// fields, as kubectl would then reject those.
func addEmbeddedProperties(s *spec.Schema, g *generator) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		addEmbeddedProperties(&p, g)
		s.Properties[name] = p
	}
	if s.Items != nil {
		addEmbeddedProperties(s.Items.Schema, g)
	}
	if s.AdditionalProperties != nil {
		addEmbeddedProperties(s.AdditionalProperties.Schema, g)
	}
	if preserve, _ := s.Extensions[extPreserveUnknown].(bool); preserve && !g.d.v3 {
		return
	}
	if embedded, _ := s.Extensions[extEmbeddedResource].(bool); !embedded {
		return
	}
	if s.Properties == nil {
		s.Properties = map[string]spec.Schema{}
	}
	addTypeMetaProperties(s,
		"apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
		"kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds")
	s.Properties["metadata"] = g.decorate(refSchema(g.d.refPrefix+objectMetaDef), partialMetadataDoc(), nil, nil)
	for _, f := range []string{"kind", "apiVersion"} {
		if !slices.Contains(s.Required, f) {
			s.Required = append(s.Required, f)
		}
	}
}

// selectableFields is the x-kubernetes-selectable-fields of a version.
func selectableFields(v *apiextensionsv1.CustomResourceDefinitionVersion) []any {
	if len(v.SelectableFields) == 0 {
		return nil
	}
	out := make([]any, len(v.SelectableFields))
	for i, f := range v.SelectableFields {
		out[i] = map[string]any{"fieldPath": strings.TrimPrefix(f.JSONPath, ".")}
	}
	return out
}

// crdResource is the REST resource of one version, for the path builder.
func crdResource(c crdVersion) Resource {
	r := Resource{
		GVK: c.gvk(), ListKind: c.crd.Spec.Names.ListKind, Plural: c.crd.Spec.Names.Plural,
		Namespaced: c.crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		def:        crdDefinitionName(c.gvk()), listDef: crdDefinitionName(c.listGVK()),
	}
	if sub := c.v.Subresources; sub != nil {
		if sub.Status != nil {
			r.Subresources = append(r.Subresources, "status")
		}
		if sub.Scale != nil {
			r.Subresources = append(r.Subresources, "scale")
		}
	}
	return r
}

// crdPathBuilder lays out custom resources' paths; the only Go type their
// operations name is autoscaling/v1 Scale.
func crdPathBuilder(opts optionParams) pathBuilder {
	return pathBuilder{opts: opts, custom: true, defOf: func(o runtime.Object) string {
		return definitionName(deref(reflect.TypeOf(o)))
	}}
}

// crdMetaRoots are the Go types the documents of custom resources refer to.
func crdMetaRoots() []reflect.Type {
	return append([]reflect.Type{
		reflect.TypeFor[metav1.ObjectMeta](),
		reflect.TypeFor[metav1.ListMeta](),
		reflect.TypeFor[autoscalingv1.Scale](),
	}, metaRoots()...)
}

// servedVersions are the versions of crd that are served, in the CRD's
// order; a CRD that is not Established serves none, as upstream.
func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []crdVersion {
	if !established(crd) {
		return nil
	}
	var out []crdVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Served {
			out = append(out, crdVersion{crd: crd, v: &crd.Spec.Versions[i]})
		}
	}
	return out
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
