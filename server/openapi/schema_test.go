package openapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func buildDocs(t *testing.T) *Documents {
	t.Helper()
	d, err := Build(builtinResources(), "Kubernetes", "v1.33.0")
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return d
}

// v2Definitions and v3Schemas decode the served JSON, so the tests see what
// clients see rather than our in-memory structs.
func v2Definitions(t *testing.T, d *Documents) spec.Definitions {
	t.Helper()
	var sw spec.Swagger
	if err := json.Unmarshal(bodyOf(t, d.v2), &sw); err != nil {
		t.Fatalf("decode v2: %v", err)
	}
	return sw.Definitions
}

func v3Doc(t *testing.T, d *Documents, gv string) *spec3.OpenAPI {
	t.Helper()
	doc, ok := d.v3[gv]
	if !ok {
		t.Fatalf("no v3 document for %s", gv)
	}
	var out spec3.OpenAPI
	if err := json.Unmarshal(bodyOf(t, doc), &out); err != nil {
		t.Fatalf("decode v3 %s: %v", gv, err)
	}
	return &out
}

func bodyOf(t *testing.T, doc *document) []byte {
	t.Helper()
	raw, err := doc.variants[mediaJSON].body.get()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// check is a named expectation returning a failure description or "".
type check struct {
	name string
	run  func(t *testing.T) string
}

func TestDefinitionsDescribeTypesAsUpstream(t *testing.T) {
	d := buildDocs(t)
	ds := defs{v2: v2Definitions(t, d), v3: v3Doc(t, d, "api/v1").Components.Schemas}
	for _, c := range append(ds.structureChecks(), ds.typeChecks()...) {
		t.Run(c.name, func(t *testing.T) {
			if msg := c.run(t); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// defs are the decoded definitions of both documents.
type defs struct {
	v2 spec.Definitions
	v3 map[string]*spec.Schema
}

// prop is a property of a v2 definition; v3Prop the same in v3.
func (ds defs) prop(t *testing.T, def, field string) spec.Schema {
	t.Helper()
	return propOf(t, ds.v2[def], def, field)
}

func (ds defs) v3Prop(t *testing.T, def, field string) spec.Schema {
	t.Helper()
	s, ok := ds.v3[def]
	if !ok {
		t.Fatalf("v3 definition %s missing", def)
	}
	return propOf(t, *s, def, field)
}

func propOf(t *testing.T, s spec.Schema, def, field string) spec.Schema {
	t.Helper()
	p, ok := s.Properties[field]
	if !ok {
		t.Fatalf("%s has no property %s", def, field)
	}
	return p
}

// structureChecks cover fields, merge semantics, required lists and kinds.
func (ds defs) structureChecks() []check {
	v2, prop := ds.v2, ds.prop
	return []check{
		{"PodSpec.containers is a map list of Container keyed by name with merge patch", func(t *testing.T) string {
			p := prop(t, "io.k8s.api.core.v1.PodSpec", "containers")
			return all(
				eq("type", p.Type, spec.StringOrArray{"array"}),
				eq("items", p.Items.Schema.Ref.String(), "#/definitions/io.k8s.api.core.v1.Container"),
				eq("patch strategy", p.Extensions[extPatchStrategy], "merge"),
				eq("merge key", p.Extensions[extPatchMergeKey], "name"),
				eq("list type", p.Extensions[extListType], "map"),
				eq("map keys", p.Extensions[extListMapKeys], []any{"name"}),
			)
		}},
		{"container ports are keyed by containerPort and protocol, protocol defaulting to TCP in v3", func(t *testing.T) string {
			p := prop(t, "io.k8s.api.core.v1.Container", "ports")
			proto := ds.v3Prop(t, "io.k8s.api.core.v1.ContainerPort", "protocol")
			return all(eq("map keys", p.Extensions[extListMapKeys], []any{"containerPort", "protocol"}),
				eq("default", proto.Default, "TCP"))
		}},
		{"required lists hold fields upstream requires and nothing optional", func(t *testing.T) string {
			return all(
				contains("Container", v2["io.k8s.api.core.v1.Container"].Required, "name"),
				contains("PodSpec", v2["io.k8s.api.core.v1.PodSpec"].Required, "containers"),
				eq("ObjectMeta", len(v2["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].Required), 0),
				lacks("Event (reportingComponent is +optional)", v2["io.k8s.api.core.v1.Event"].Required, "reportingComponent"),
			)
		}},
		{"top-level kinds carry their group-version-kind, core group empty", func(t *testing.T) string {
			return all(
				eq("Pod", v2["io.k8s.api.core.v1.Pod"].Extensions[extGVK], []any{map[string]any{"group": "", "kind": "Pod", "version": "v1"}}),
				eq("DeploymentList", v2["io.k8s.api.apps.v1.DeploymentList"].Extensions[extGVK], []any{map[string]any{"group": "apps", "kind": "DeploymentList", "version": "v1"}}),
			)
		}},
		{"descriptions come from SwaggerDoc for types and fields", func(t *testing.T) string {
			return all(
				prefix("Pod", v2["io.k8s.api.core.v1.Pod"].Description, "Pod is a collection of containers"),
				prefix("Container.image", prop(t, "io.k8s.api.core.v1.Container", "image").Description, "Container image name."),
				prefix("Pod.kind from TypeMeta", prop(t, "io.k8s.api.core.v1.Pod", "kind").Description, "Kind is a string value"),
			)
		}},
	}
}

// typeChecks cover the special types and the v2/v3 differences.
func (ds defs) typeChecks() []check {
	v2, v3, prop := ds.v2, ds.v3, ds.prop
	return []check{
		{"IntOrString is a string with format int-or-string in v2 and oneOf integer/string in v3", func(t *testing.T) string {
			const n = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
			return all(eq("v2 type", v2[n].Type, spec.StringOrArray{"string"}), eq("v2 format", v2[n].Format, "int-or-string"),
				eq("v3 oneOf", oneOfTypes(v3[n]), []string{"integer", "string"}), eq("v3 type", len(v3[n].Type), 0))
		}},
		{"Quantity is a string in v2 and oneOf string/number in v3", func(t *testing.T) string {
			const n = "io.k8s.apimachinery.pkg.api.resource.Quantity"
			return all(eq("v2 type", v2[n].Type, spec.StringOrArray{"string"}), eq("v2 format", v2[n].Format, ""),
				eq("v3 oneOf", oneOfTypes(v3[n]), []string{"string", "number"}), nonEmpty("description", v2[n].Description))
		}},
		{"Time is a date-time string and RawExtension an object keeping unknown fields", func(t *testing.T) string {
			tm, raw := v2["io.k8s.apimachinery.pkg.apis.meta.v1.Time"], v2["io.k8s.apimachinery.pkg.runtime.RawExtension"]
			return all(eq("Time", tm.Type, spec.StringOrArray{"string"}), eq("Time format", tm.Format, "date-time"),
				eq("RawExtension", raw.Type, spec.StringOrArray{"object"}), eq("preserve", raw.Extensions[extPreserveUnknown], true))
		}},
		{"maps become additionalProperties and []byte a byte-format string", func(t *testing.T) string {
			data := prop(t, "io.k8s.api.core.v1.Secret", "data")
			return all(eq("type", data.Type, spec.StringOrArray{"object"}),
				eq("value type", data.AdditionalProperties.Schema.Type, spec.StringOrArray{"string"}),
				eq("value format", data.AdditionalProperties.Schema.Format, "byte"))
		}},
		{"atomic structs and maps carry x-kubernetes-map-type", func(t *testing.T) string {
			return all(eq("LabelSelector", v2["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"].Extensions[extMapType], "atomic"),
				eq("ObjectReference", v2["io.k8s.api.core.v1.ObjectReference"].Extensions[extMapType], "atomic"),
				eq("nodeSelector", prop(t, "io.k8s.api.core.v1.PodSpec", "nodeSelector").Extensions[extMapType], "atomic"))
		}},
		{"v3 wraps a described $ref in allOf with the enforced default, v2 keeps a bare $ref", func(t *testing.T) string {
			m2, m3 := prop(t, "io.k8s.api.core.v1.Pod", "metadata"), ds.v3Prop(t, "io.k8s.api.core.v1.Pod", "metadata")
			return all(eq("v2 ref", m2.Ref.String(), "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
				eq("v2 default", m2.Default, nil), eq("v3 allOf", len(m3.AllOf), 1),
				eq("v3 ref", m3.AllOf[0].Ref.String(), "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
				eq("v3 default", m3.Default, map[string]any{}))
		}},
		{"shared meta types list every served group-version", func(t *testing.T) string {
			gvks, _ := v2["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"].Extensions[extGVK].([]any)
			return all(eq("count", len(gvks), 16), eq("first", gvks[0], map[string]any{"group": "", "kind": "DeleteOptions", "version": "v1"}))
		}},
	}
}

// recursive is a self-referencing type that must end in a $ref, not a loop.
type recursive struct {
	Name     string       `json:"name"`
	Children []*recursive `json:"children,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	Tags     []string     `json:"tags,omitempty" patchStrategy:"merge"`
	Next     *recursive   `json:"next,omitempty"`
}

func TestRecursiveTypesEndInRefsAndFallBackToPatchTags(t *testing.T) {
	g := newGenerator(dialect{refPrefix: v2RefPrefix}, nil)
	name, err := g.define(reflect.TypeFor[recursive]())
	if err != nil {
		t.Fatal(err)
	}
	s := g.defs[name]
	self := v2RefPrefix + name
	next, children := s.Properties["next"], s.Properties["children"]
	checks := all(
		eq("name", name, "skiff.server.openapi.recursive"),
		eq("next", next.Ref.String(), self),
		eq("children items", children.Items.Schema.Ref.String(), self),
		eq("children list type", s.Properties["children"].Extensions[extListType], "map"),
		eq("children keys", s.Properties["children"].Extensions[extListMapKeys], []any{"name"}),
		eq("tags list type", s.Properties["tags"].Extensions[extListType], "set"),
		eq("required", s.Required, []string{"name"}),
	)
	if checks != "" {
		t.Error(checks)
	}
}

func TestBuildRejectsIncompleteResources(t *testing.T) {
	good := builtinResources()[0]
	tests := []struct {
		name   string
		mutate func(*Resource)
		want   string
		twice  bool
	}{
		{"same resource twice", func(*Resource) {}, "given twice", true},
		{"missing plural", func(r *Resource) { r.Plural = "" }, "Plural is empty", false},
		{"missing object", func(r *Resource) { r.Object = nil }, "Object is nil", false},
		{"listable without list type", func(r *Resource) { r.List = nil }, "List is nil", false},
		{"missing kind", func(r *Resource) { r.GVK.Kind = "" }, "version and a kind", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good
			tt.mutate(&r)
			list := []Resource{r}
			if tt.twice {
				list = append(list, r)
			}
			_, err := Build(list, "t", "v")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func oneOfTypes(s *spec.Schema) []string {
	var out []string
	for _, o := range s.OneOf {
		out = append(out, o.Type...)
	}
	return out
}

func all(msgs ...string) string {
	var out []string
	for _, m := range msgs {
		if m != "" {
			out = append(out, m)
		}
	}
	return strings.Join(out, "; ")
}

func eq(what string, got, want any) string {
	if reflect.DeepEqual(got, want) {
		return ""
	}
	return what + ": got " + jsonString(got) + ", want " + jsonString(want)
}

func contains(what string, list []string, want string) string {
	for _, s := range list {
		if s == want {
			return ""
		}
	}
	return what + ": " + jsonString(list) + " lacks " + want
}

func lacks(what string, list []string, unwanted string) string {
	if contains(what, list, unwanted) == "" {
		return what + ": " + jsonString(list) + " has " + unwanted
	}
	return ""
}

func prefix(what, got, want string) string {
	if strings.HasPrefix(got, want) {
		return ""
	}
	return what + ": " + jsonString(got) + " does not start with " + jsonString(want)
}

func nonEmpty(what, got string) string {
	if got != "" {
		return ""
	}
	return what + " is empty"
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}
