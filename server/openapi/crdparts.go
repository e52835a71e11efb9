package openapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// metaModels are the definitions of the apimachinery types that custom
// resources' documents refer to (ObjectMeta, ListMeta, Status, Scale, ...)
// in both dialects, derived from the Go types as the built-ins' are.
type metaModels struct {
	v2, v3 *generator
	opts   optionParams
}

func newMetaModels() (*metaModels, error) {
	sem, err := loadSemantics()
	if err != nil {
		return nil, err
	}
	m := &metaModels{
		v2:   newGenerator(dialect{refPrefix: v2RefPrefix}, sem),
		v3:   newGenerator(dialect{refPrefix: v3RefPrefix, v3: true}, sem),
		opts: newOptionParams(),
	}
	kinds := kindSet{}
	kinds.add(&autoscalingv1.Scale{}, autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
	kinds.add(&metav1.Status{}, schema.GroupVersion{Version: "v1"}.WithKind("Status"))
	for _, g := range []*generator{m.v2, m.v3} {
		for _, t := range crdMetaRoots() {
			if _, err := g.define(t); err != nil {
				return nil, fmt.Errorf("describe %v: %w", t, err)
			}
		}
		if err := kinds.apply(g); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metaModels) generator(v3 bool) *generator {
	if v3 {
		return m.v3
	}
	return m.v2
}

// crdParts are what a set of CRDs adds to the built-in documents: Swagger
// 2.0 paths and definitions, each encoded on its own so that merging them
// into the built-in document is a copy, and whole OpenAPI 3.0 documents of
// their group-versions.
type crdParts struct {
	v2Paths map[string]json.RawMessage
	v2Defs  map[string]json.RawMessage // the custom kinds, then the meta types they use
	v3      map[string]*document       // by group-version path, "apis/example.com/v1"
}

// crdDocInfo is the info of custom group-versions' documents, as upstream.
func crdDocInfo() *spec.Info {
	return &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes CRD Swagger", Version: "v0.1.0"}}
}

// crdGroupVersion collects what the CRDs serving one group-version add.
type crdGroupVersion struct {
	items  []pathItem
	v3defs map[string]*spec.Schema
}

// buildCRDParts describes the served versions of the Established CRDs. A
// CRD that cannot be described, or whose names another CRD already took,
// is left out and reported; the others are still described.
func buildCRDParts(meta *metaModels, crds []*apiextensionsv1.CustomResourceDefinition) (*crdParts, error) {
	sorted := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(crds))
	for _, c := range crds {
		if c != nil {
			sorted = append(sorted, c)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	parts := &crdParts{v2Paths: map[string]json.RawMessage{}, v2Defs: map[string]json.RawMessage{}, v3: map[string]*document{}}
	v2defs := map[string]*spec.Schema{}
	var v2items []pathItem
	byGV := map[schema.GroupVersion]*crdGroupVersion{}
	pb := crdPathBuilder(meta.opts)
	var errs []error
	for _, crd := range sorted {
		c, err := describeCRD(meta, pb, crd)
		if err == nil {
			err = c.conflict(v2defs, v2items)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("CustomResourceDefinition %s: %w", crd.Name, err))
			continue
		}
		maps.Copy(v2defs, c.v2defs)
		for gv, part := range c.byGV {
			have := byGV[gv]
			if have == nil {
				have = &crdGroupVersion{v3defs: map[string]*spec.Schema{}}
				byGV[gv] = have
			}
			have.items = append(have.items, part.items...)
			maps.Copy(have.v3defs, part.v3defs)
			v2items = append(v2items, part.items...)
		}
	}
	if err := parts.encodeV2(meta, v2items, v2defs); err != nil {
		return nil, err
	}
	for gv, part := range byGV {
		doc, err := crdV3Document(meta, part)
		if err != nil {
			return nil, fmt.Errorf("encode OpenAPI v3 document of %s: %w", gv, err)
		}
		parts.v3[gvPath(gv)] = doc
	}
	return parts, errors.Join(errs...)
}

// describedCRD is one CRD's served versions, described.
type describedCRD struct {
	v2defs map[string]*spec.Schema
	byGV   map[schema.GroupVersion]*crdGroupVersion
}

func describeCRD(meta *metaModels, pb pathBuilder, crd *apiextensionsv1.CustomResourceDefinition) (*describedCRD, error) {
	d := &describedCRD{v2defs: map[string]*spec.Schema{}, byGV: map[schema.GroupVersion]*crdGroupVersion{}}
	for _, c := range servedVersions(crd) {
		v2, err := crdDefinitions(c, meta, false)
		if err != nil {
			return nil, err
		}
		v3, err := crdDefinitions(c, meta, true)
		if err != nil {
			return nil, err
		}
		maps.Copy(d.v2defs, v2)
		d.byGV[c.gv()] = &crdGroupVersion{items: pb.resource(crdResource(c)), v3defs: v3}
	}
	return d, nil
}

// conflict reports a definition or path of c that an earlier CRD has.
func (c *describedCRD) conflict(defs map[string]*spec.Schema, items []pathItem) error {
	for name := range c.v2defs {
		if _, taken := defs[name]; taken {
			return fmt.Errorf("definition %s is already published by another CustomResourceDefinition", name)
		}
	}
	paths := map[string]bool{}
	for _, it := range items {
		paths[it.path] = true
	}
	for _, part := range c.byGV {
		for _, it := range part.items {
			if paths[it.path] {
				return fmt.Errorf("path %s is already published by another CustomResourceDefinition", it.path)
			}
		}
	}
	return nil
}

// encodeV2 encodes each path and definition; the meta definitions the
// custom ones lead to come along, for a built-in document that lacks them.
func (p *crdParts) encodeV2(meta *metaModels, items []pathItem, defs map[string]*spec.Schema) error {
	for path, item := range renderV2Paths(items).Paths {
		raw, err := json.Marshal(item)
		if err != nil {
			return fmt.Errorf("encode path %s: %w", path, err)
		}
		p.v2Paths[path] = raw
	}
	all := reachableIn(lookupIn(defs, meta.v2.defs), append(refsOfOps(items), keysOf(defs)...))
	for name, s := range all {
		raw, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("encode definition %s: %w", name, err)
		}
		p.v2Defs[name] = raw
	}
	return nil
}

// crdV3Document is the document of one custom group-version: its paths,
// its kinds and the meta types they lead to.
func crdV3Document(meta *metaModels, part *crdGroupVersion) (*document, error) {
	doc := &spec3.OpenAPI{
		Version: "3.0.0",
		Info:    crdDocInfo(),
		Paths:   renderV3Paths(part.items),
		Components: &spec3.Components{Schemas: reachableIn(lookupIn(part.v3defs, meta.v3.defs),
			append(refsOfOps(part.items), keysOf(part.v3defs)...))},
	}
	raw, err := doc.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return newDocument(raw, v3ProtoTypes(), v3Proto), nil
}

// refsOfOps are the definitions the operations of items name directly.
func refsOfOps(items []pathItem) []string {
	var refs []string
	for _, it := range items {
		for _, op := range it.ops {
			if op.body != "" {
				refs = append(refs, op.body)
			}
			for _, r := range op.responses {
				if r.body != "" {
					refs = append(refs, r.body)
				}
			}
		}
	}
	return refs
}

// lookupIn finds a definition in the first of maps that has it.
func lookupIn(defs ...map[string]*spec.Schema) func(string) (*spec.Schema, bool) {
	return func(name string) (*spec.Schema, bool) {
		for _, m := range defs {
			if s, ok := m[name]; ok {
				return s, true
			}
		}
		return nil, false
	}
}

func keysOf(m map[string]*spec.Schema) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CRDTypeConverter is the type converter server-side apply merges objects
// of crd's kind by, in every version it defines: as upstream, the models
// are the v3 definitions of each version (served or not) over the meta
// types, unknown fields are kept wherever the schema says
// x-kubernetes-preserve-unknown-fields (they are merged as deduced values),
// and everywhere when spec.preserveUnknownFields is set.
func CRDTypeConverter(crd *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	meta, err := newMetaModels()
	if err != nil {
		return nil, err
	}
	return crdTypeConverter(meta, crd)
}

func crdTypeConverter(meta *metaModels, crd *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	models := maps.Clone(meta.v3.defs)
	for i := range crd.Spec.Versions {
		defs, err := crdDefinitions(crdVersion{crd: crd, v: &crd.Spec.Versions[i]}, meta, true)
		if err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition %s: %w", crd.Name, err)
		}
		maps.Copy(models, defs)
	}
	tc, err := managedfields.NewTypeConverter(models, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("type converter of CustomResourceDefinition %s: %w", crd.Name, err)
	}
	return tc, nil
}
