// Package openapi derives the API server's OpenAPI documents from the Go
// types of the resources it serves: Swagger 2.0 at /openapi/v2 and OpenAPI
// 3.0 per group-version under /openapi/v3, in the shape kubectl explain,
// kubectl apply and server-side apply expect from a Kubernetes API server.
//
// Upstream generates these documents at build time from Go comments; we
// reflect over the k8s.io/api types at start-up instead, taking descriptions
// from their generated SwaggerDoc methods and merge semantics (list types,
// map keys, atomic structs, defaults) from the structured-merge-diff schema
// that client-go embeds.
package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Documents are the OpenAPI documents of a fixed set of resources. They are
// built once at start-up and are safe for concurrent use.
type Documents struct {
	v2     *document
	v2doc  v2Layout
	v3     map[string]*document // by group-version path, "api/v1" or "apis/apps/v1"
	index  *document
	models map[string]*spec.Schema // v3 definitions, for the type converter
	snap   *snapshot               // the documents alone, as Handler serves them

	tcOnce sync.Once
	tc     managedfields.TypeConverter
	tcErr  error
}

// metaRoots are the meta types every document carries, as upstream's do.
func metaRoots() []reflect.Type {
	return []reflect.Type{
		reflect.TypeFor[metav1.Status](),
		reflect.TypeFor[metav1.APIResourceList](),
		reflect.TypeFor[metav1.DeleteOptions](),
		reflect.TypeFor[metav1.WatchEvent](),
		reflect.TypeFor[metav1.Patch](),
	}
}

// Build derives the documents of resources. title and version fill the
// documents' info section (e.g. "Kubernetes", "v1.33.0").
func Build(resources []Resource, title, version string) (*Documents, error) {
	seen := map[string]bool{}
	for _, r := range resources {
		if err := r.validate(); err != nil {
			return nil, err
		}
		key := gvPath(r.GVK.GroupVersion()) + "/" + r.Plural
		if seen[key] {
			return nil, fmt.Errorf("resource %s is given twice", key)
		}
		seen[key] = true
	}
	sem, err := loadSemantics()
	if err != nil {
		return nil, err
	}
	v2g := newGenerator(dialect{refPrefix: v2RefPrefix}, sem)
	v3g := newGenerator(dialect{refPrefix: v3RefPrefix, v3: true}, sem)
	kinds := kindsOf(resources)
	for _, g := range []*generator{v2g, v3g} {
		for _, t := range rootTypes(resources) {
			if _, err := g.define(t); err != nil {
				return nil, fmt.Errorf("describe %v: %w", t, err)
			}
		}
		if err := kinds.apply(g); err != nil {
			return nil, err
		}
	}
	pb := pathBuilder{opts: newOptionParams(), defOf: func(o runtime.Object) string {
		return v2g.names[deref(reflect.TypeOf(o))]
	}}
	byGV := map[schema.GroupVersion][]pathItem{}
	for _, r := range resources {
		gv := r.GVK.GroupVersion()
		if _, seen := byGV[gv]; !seen {
			byGV[gv] = []pathItem{pb.discovery(gv)}
		}
		byGV[gv] = append(byGV[gv], pb.resource(r)...)
	}
	return assemble(byGV, v2g.defs, v3g.defs, &spec.Info{InfoProps: spec.InfoProps{Title: title, Version: version}})
}

func assemble(byGV map[schema.GroupVersion][]pathItem, v2defs, v3defs map[string]*spec.Schema, info *spec.Info) (*Documents, error) {
	d := &Documents{v3: map[string]*document{}, models: v3defs}
	var all []pathItem
	for gv, items := range byGV {
		all = append(all, items...)
		doc := &spec3.OpenAPI{
			Version:    "3.0.0",
			Info:       info,
			Paths:      renderV3Paths(items),
			Components: &spec3.Components{Schemas: reachable(v3defs, refsOf(items))},
		}
		raw, err := doc.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encode OpenAPI v3 document of %s: %w", gv, err)
		}
		d.v3[gvPath(gv)] = newDocument(raw, v3ProtoTypes(), v3Proto)
	}
	layout, err := encodeV2(info, renderV2Paths(all).Paths, v2defs)
	if err != nil {
		return nil, err
	}
	d.v2doc = layout
	d.v2 = newDocument(layout.raw, v2ProtoTypes(), v2Proto)
	if d.index, err = indexDocument(d.v3); err != nil {
		return nil, err
	}
	d.snap = &snapshot{v2: readyV2(d.v2), v3: d.v3, index: d.index}
	return d, nil
}

// indexDocument is the /openapi/v3 index of docs.
func indexDocument(docs map[string]*document) (*document, error) {
	index := v3Index{Paths: make(map[string]v3IndexEntry, len(docs))}
	for key, doc := range docs {
		index.Paths[key] = v3IndexEntry{ServerRelativeURL: "/openapi/v3/" + key + "?hash=" + doc.etag}
	}
	raw, err := json.Marshal(index)
	if err != nil {
		return nil, fmt.Errorf("encode OpenAPI v3 index: %w", err)
	}
	return newDocument(raw, nil, nil), nil
}

// v3Index is the discovery document at /openapi/v3; clients fetch each
// group-version from its serverRelativeURL.
type v3Index struct {
	Paths map[string]v3IndexEntry `json:"paths"`
}

type v3IndexEntry struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

// rootTypes are the Go types the documents describe, in a stable order.
func rootTypes(resources []Resource) []reflect.Type {
	var out []reflect.Type
	for _, r := range resources {
		out = append(out, deref(reflect.TypeOf(r.Object)))
		if r.List != nil {
			out = append(out, deref(reflect.TypeOf(r.List)))
		}
		for _, name := range r.Subresources {
			if sub, ok := knownSubresource(name); ok && sub.object != nil {
				out = append(out, deref(reflect.TypeOf(sub.object)))
			}
		}
	}
	return append(out, metaRoots()...)
}

// kindSet maps Go types to the kinds they are served as.
type kindSet map[reflect.Type][]schema.GroupVersionKind

func (k kindSet) add(obj any, gvk schema.GroupVersionKind) {
	t := deref(reflect.TypeOf(obj))
	for _, have := range k[t] {
		if have == gvk {
			return
		}
	}
	k[t] = append(k[t], gvk)
}

// kindsOf collects the x-kubernetes-group-version-kind of every top-level
// type. Like upstream, the option and event types shared by all groups list
// every served group-version.
func kindsOf(resources []Resource) kindSet {
	k := kindSet{}
	gvs := map[schema.GroupVersion]bool{{Version: "v1"}: true}
	for _, r := range resources {
		gv := r.GVK.GroupVersion()
		gvs[gv] = true
		k.add(r.Object, r.GVK)
		if r.List != nil {
			k.add(r.List, gv.WithKind(r.ListKind))
		}
		for _, name := range r.Subresources {
			if sub, ok := knownSubresource(name); ok && sub.object != nil {
				k.add(sub.object, sub.gvk)
			}
		}
	}
	core := schema.GroupVersion{Version: "v1"}
	k.add(&metav1.Status{}, core.WithKind("Status"))
	k.add(&metav1.APIResourceList{}, core.WithKind("APIResourceList"))
	for gv := range gvs {
		k.add(&metav1.DeleteOptions{}, gv.WithKind("DeleteOptions"))
		k.add(&metav1.WatchEvent{}, gv.WithKind("WatchEvent"))
	}
	return k
}

// apply writes the kinds into the generator's definitions. The extension
// value uses plain []any and map[string]any because the type converter
// recognises only those.
func (k kindSet) apply(g *generator) error {
	for t, gvks := range k {
		name, ok := g.names[t]
		if !ok {
			return fmt.Errorf("no definition for %v", t)
		}
		sort.Slice(gvks, func(i, j int) bool {
			a, b := gvks[i], gvks[j]
			if a.Group != b.Group {
				return a.Group < b.Group
			}
			if a.Version != b.Version {
				return a.Version < b.Version
			}
			return a.Kind < b.Kind
		})
		list := make([]any, 0, len(gvks))
		for _, gvk := range gvks {
			list = append(list, gvkObject(gvk))
		}
		setExtensions(g.defs[name], map[string]any{extGVK: list})
	}
	return nil
}

// refsOf are the definitions the operations of items name directly, plus
// the meta types every group-version document carries.
func refsOf(items []pathItem) []string {
	refs := []string{statusDef, deleteOptionsDef, patchDef, resourceListDef, "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"}
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

// reachable is the subset of defs that roots lead to through $refs.
func reachable(defs map[string]*spec.Schema, roots []string) map[string]*spec.Schema {
	return reachableIn(lookupIn(defs), roots)
}

// reachableIn is the definitions that roots lead to through $refs, found
// by lookup.
func reachableIn(lookup func(string) (*spec.Schema, bool), roots []string) map[string]*spec.Schema {
	out := map[string]*spec.Schema{}
	var visit func(name string)
	visit = func(name string) {
		s, ok := lookup(name)
		if _, done := out[name]; done || !ok {
			return
		}
		out[name] = s
		walkRefs(s, visit)
	}
	for _, r := range roots {
		visit(r)
	}
	return out
}

// walkRefs calls fn with the definition name of every $ref inside s.
func walkRefs(s *spec.Schema, fn func(name string)) {
	if s == nil {
		return
	}
	if ref := s.Ref.String(); ref != "" {
		fn(refName(ref))
	}
	for _, p := range s.Properties {
		walkRefs(&p, fn)
	}
	if s.Items != nil {
		walkRefs(s.Items.Schema, fn)
		for i := range s.Items.Schemas {
			walkRefs(&s.Items.Schemas[i], fn)
		}
	}
	if s.AdditionalProperties != nil {
		walkRefs(s.AdditionalProperties.Schema, fn)
	}
	for _, group := range [][]spec.Schema{s.AllOf, s.OneOf, s.AnyOf} {
		for i := range group {
			walkRefs(&group[i], fn)
		}
	}
	walkRefs(s.Not, fn)
}

func refName(ref string) string {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == '/' {
			return ref[i+1:]
		}
	}
	return ref
}

// TypeConverter converts objects of the described kinds to the typed values
// server-side apply merges. It is built on first use and then shared.
func (d *Documents) TypeConverter() (managedfields.TypeConverter, error) {
	d.tcOnce.Do(func() {
		d.tc, d.tcErr = managedfields.NewTypeConverter(d.models, false)
		if d.tcErr != nil {
			d.tcErr = fmt.Errorf("build type converter: %w", d.tcErr)
		}
	})
	return d.tc, d.tcErr
}
