package openapi

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

// generic is a schema as a client decodes it from the served JSON.
func generic(t *testing.T, s *spec.Schema) map[string]any {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// at walks dotted keys through decoded JSON; "" for a missing one.
func at(v any, path string) any {
	if path == "" {
		return v
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func fromJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expectation %s: %v", s, err)
	}
	return v
}

func widgetDefinitions(t *testing.T, v3 bool) map[string]any {
	t.Helper()
	crd := decodeCRD(t, widgetCRD)
	defs, err := crdDefinitions(crdVersion{crd: crd, v: &crd.Spec.Versions[0]}, metaFor(t), v3)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for name, s := range defs {
		out[name] = generic(t, s)
	}
	return out
}

const (
	widgetDef     = "com.example.stable.v1.Widget"
	widgetListDef = "com.example.stable.v1.WidgetList"
)

type jsonCase struct {
	name, def, path string
	want            string // JSON; "null" for absent
}

func runJSONCases(t *testing.T, defs map[string]any, cases []jsonCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got := at(defs[tt.def], tt.path)
			if want := fromJSON(t, tt.want); !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("%s %s:\n got %s\nwant %s", tt.def, tt.path, g, tt.want)
			}
		})
	}
}

func TestCRDDefinitions_V3_KeepSchemaAndAddKubeNativeFields(t *testing.T) {
	defs := widgetDefinitions(t, true)
	runJSONCases(t, defs, []jsonCase{
		{"the kind carries its group-version-kind", widgetDef, "x-kubernetes-group-version-kind",
			`[{"group":"stable.example.com","kind":"Widget","version":"v1"}]`},
		{"the description is the schema's", widgetDef, "description", `"Widget is a thing for testing."`},
		{"metadata is ObjectMeta in allOf with the standard description", widgetDef, "properties.metadata",
			`{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
			  "description":"Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}`},
		{"apiVersion is TypeMeta's", widgetDef, "properties.apiVersion.type", `"string"`},
		{"int-or-string is unfolded to anyOf", widgetDef, "properties.spec.properties.port",
			`{"description":"Port by number or name.","x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]}`},
		{"nullable is kept", widgetDef, "properties.spec.properties.note.nullable", `true`},
		{"defaults are kept", widgetDef, "properties.spec.properties.replicas",
			`{"description":"How many widgets.","type":"integer","format":"int32","minimum":0,"default":1}`},
		{"enum and required are kept", widgetDef, "properties.spec.required", `["color"]`},
		{"enum values are kept", widgetDef, "properties.spec.properties.color.enum", `["red","green"]`},
		{"list-map keys are plain JSON", widgetDef, "properties.spec.properties.parts.x-kubernetes-list-map-keys", `["name"]`},
		{"unknown fields kept with the declared properties", widgetDef, "properties.spec.properties.extra",
			`{"description":"Anything at all.","type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"known":{"type":"string"}}}`},
		{"embedded resource gets TypeMeta and ObjectMeta, kind and apiVersion required", widgetDef, "properties.spec.properties.template.required",
			`["kind","apiVersion"]`},
		{"embedded resource metadata is ObjectMeta", widgetDef, "properties.spec.properties.template.properties.metadata.allOf",
			`[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]`},
		{"additionalProperties are kept", widgetDef, "properties.spec.properties.labels.additionalProperties", `{"type":"string"}`},
		{"selectable fields are published", widgetDef, "x-kubernetes-selectable-fields", `[{"fieldPath":"spec.color"}]`},
		{"the list kind lists the kind", widgetListDef, "properties.items.items", `{"$ref":"#/components/schemas/com.example.stable.v1.Widget"}`},
		{"the list metadata is ListMeta", widgetListDef, "properties.metadata.allOf",
			`[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}]`},
		{"the list requires items", widgetListDef, "required", `["items"]`},
		{"the list kind carries its own kind", widgetListDef, "x-kubernetes-group-version-kind",
			`[{"group":"stable.example.com","kind":"WidgetList","version":"v1"}]`},
	})
}

func TestCRDDefinitions_V2_DropWhatSwagger2CannotExpress(t *testing.T) {
	defs := widgetDefinitions(t, false)
	runJSONCases(t, defs, []jsonCase{
		{"metadata is a plain $ref with its description", widgetDef, "properties.metadata",
			`{"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
			  "description":"Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}`},
		{"int-or-string has no type and no anyOf", widgetDef, "properties.spec.properties.port",
			`{"description":"Port by number or name.","x-kubernetes-int-or-string":true}`},
		{"nullable becomes untyped", widgetDef, "properties.spec.properties.note", `{"description":"An optional note."}`},
		{"defaults are pruned", widgetDef, "properties.spec.properties.replicas",
			`{"description":"How many widgets.","type":"integer","format":"int32","minimum":0}`},
		{"unknown fields make the object untyped and without properties", widgetDef, "properties.spec.properties.extra",
			`{"description":"Anything at all.","x-kubernetes-preserve-unknown-fields":true}`},
		{"an embedded resource keeping unknown fields gets no TypeMeta", widgetDef, "properties.spec.properties.template",
			`{"description":"An embedded object.","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true}`},
		{"list-map keys are kept", widgetDef, "properties.spec.properties.parts.x-kubernetes-list-type", `"map"`},
		{"the list refers to the kind in definitions", widgetListDef, "properties.items.items", `{"$ref":"#/definitions/com.example.stable.v1.Widget"}`},
	})
}

func TestCRDDefinitions_V2_PreserveUnknownAtRoot_BareObject(t *testing.T) {
	crd := decodeCRD(t, gadgetCRD)
	meta := metaFor(t)
	c := crdVersion{crd: crd, v: &crd.Spec.Versions[0]}
	for _, tt := range []struct {
		name string
		v3   bool
		want string
	}{
		{"v2 is a bare object so kubectl accepts any field", false,
			`{"type":"object","x-kubernetes-group-version-kind":[{"group":"tools.example.org","kind":"Gadget","version":"v1alpha1"}]}`},
		{"v3 keeps the schema with the kube-native fields", true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defs, err := crdDefinitions(c, meta, tt.v3)
			if err != nil {
				t.Fatal(err)
			}
			got := generic(t, defs["org.example.tools.v1alpha1.Gadget"])
			if tt.want != "" {
				if !reflect.DeepEqual(got, fromJSON(t, tt.want)) {
					t.Errorf("got %v, want %s", got, tt.want)
				}
				return
			}
			msg := all(
				eq("description", got["description"], "Gadget keeps whatever it is given."),
				eq("preserve", got[extPreserveUnknown], true),
				eq("has metadata", at(got, "properties.metadata") != nil, true),
			)
			if msg != "" {
				t.Error(msg)
			}
		})
	}
}

// TestCRDDefinitions_V2_MatchUpstreamConformanceSchema does what the
// CustomResourcePublishOpenAPI conformance tests do: the published v2
// definition, without the fields the server adds, equals the CRD's schema.
func TestCRDDefinitions_V2_MatchUpstreamConformanceSchema(t *testing.T) {
	const schemaFoo = `description: Foo CRD for Testing
type: object
properties:
  spec:
    type: object
    description: Specification of Foo
    properties:
      bars:
        description: List of Bars and their specs.
        type: array
        items:
          type: object
          required: [name]
          properties:
            name: {description: Name of Bar., type: string}
            age: {description: Age of Bar., type: string}
            feeling: {description: Whether Bar is feeling great., type: string, enum: [Great, Down]}
            bazs: {description: List of Bazs., items: {type: string}, type: array}
  status:
    description: Status of Foo
    type: object
    properties:
      bars:
        description: List of Bars and their statuses.
        type: array
        items:
          type: object
          properties:
            name: {description: Name of Bar., type: string}
            available: {description: Whether the Bar is installed., type: boolean}
            quxType: {description: Indicates to external qux type., pattern: in-tree|out-of-tree, type: string}`
	props := &apiextensionsv1.JSONSchemaProps{}
	if err := yaml.Unmarshal([]byte(schemaFoo), props); err != nil {
		t.Fatal(err)
	}
	crd := decodeCRD(t, gadgetCRD)
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema = props
	defs, err := crdDefinitions(crdVersion{crd: crd, v: &crd.Spec.Versions[0]}, metaFor(t), false)
	if err != nil {
		t.Fatal(err)
	}
	got := generic(t, defs["org.example.tools.v1alpha1.Gadget"])
	props2 := got["properties"].(map[string]any)
	for _, added := range []string{"metadata", "apiVersion", "kind"} {
		delete(props2, added)
	}
	delete(got, extGVK)
	wantJSON, err := yaml.YAMLToJSON([]byte(schemaFoo))
	if err != nil {
		t.Fatal(err)
	}
	if want := fromJSON(t, string(wantJSON)); !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		t.Errorf("published definition differs from the schema:\n got %s\nwant %s", g, wantJSON)
	}
}

func TestCRDPaths_EveryVerbAndSubresource_NameTheCustomKind(t *testing.T) {
	crd := decodeCRD(t, widgetCRD)
	items := crdPathBuilder(newOptionParams()).resource(crdResource(crdVersion{crd: crd, v: &crd.Spec.Versions[0]}))
	byPath := map[string]pathItem{}
	for _, it := range items {
		byPath[it.path] = it
	}
	base := "/apis/stable.example.com/v1/namespaces/{namespace}/widgets"
	tests := []struct {
		path    string
		methods []string
	}{
		{base, []string{"get", "post", "delete"}},
		{base + "/{name}", []string{"get", "put", "patch", "delete"}},
		{base + "/{name}/status", []string{"get", "put", "patch"}},
		{base + "/{name}/scale", []string{"get", "put", "patch"}},
		{"/apis/stable.example.com/v1/widgets", []string{"get"}},
	}
	if len(byPath) != len(tests) {
		t.Errorf("got %d paths, want %d: %v", len(byPath), len(tests), keysOfItems(byPath))
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			it, ok := byPath[tt.path]
			if !ok {
				t.Fatalf("no path %s", tt.path)
			}
			var methods []string
			for _, op := range it.ops {
				methods = append(methods, op.method)
				if op.gvk == nil || op.gvk.Kind != "Widget" || op.gvk.Group != "stable.example.com" {
					t.Errorf("%s %s names %v, want the custom kind", op.method, tt.path, op.gvk)
				}
				if op.patch && !reflect.DeepEqual(op.patchTypes, customPatchTypes()) {
					t.Errorf("patch of %s accepts %v", tt.path, op.patchTypes)
				}
				if op.method == "patch" && !hasParam(op.params, "fieldValidation") {
					t.Errorf("patch of %s lacks fieldValidation, which kubectl looks for", tt.path)
				}
			}
			sort.Strings(methods)
			want := append([]string(nil), tt.methods...)
			sort.Strings(want)
			if !reflect.DeepEqual(methods, want) {
				t.Errorf("methods %v, want %v", methods, want)
			}
		})
	}
	if got := byPath[base+"/{name}/scale"].ops[0].responses[0].body; got != scaleDef {
		t.Errorf("scale returns %s, want %s", got, scaleDef)
	}
	if got := byPath[base].ops[0].id; got != "listStableExampleComV1NamespacedWidget" {
		t.Errorf("list operation id %s", got)
	}
}

func hasParam(ps []param, name string) bool {
	for _, p := range ps {
		if p.name == name {
			return true
		}
	}
	return false
}

func keysOfItems(m map[string]pathItem) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestServedVersions_UnservedAndUnestablished_AreLeftOut(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*apiextensionsv1.CustomResourceDefinition)
		want   []string
	}{
		{"served versions in order", func(*apiextensionsv1.CustomResourceDefinition) {}, []string{"v1", "v2beta1"}},
		{"a version no longer served", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[1].Served = false }, []string{"v1"}},
		{"not established", func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Status.Conditions[0].Status = apiextensionsv1.ConditionFalse
		}, nil},
		{"no conditions yet", func(c *apiextensionsv1.CustomResourceDefinition) { c.Status.Conditions = nil }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := decodeCRD(t, widgetCRD)
			tt.mutate(crd)
			var got []string
			for _, v := range servedVersions(crd) {
				got = append(got, v.v.Name)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("served %v, want %v", got, tt.want)
			}
		})
	}
}
