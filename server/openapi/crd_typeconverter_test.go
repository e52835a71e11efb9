package openapi

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/yaml"
)

func unstructuredFrom(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func TestCRDTypeConverter_FieldSets(t *testing.T) {
	tc, err := CRDTypeConverter(decodeCRD(t, widgetCRD))
	if err != nil {
		t.Fatal(err)
	}
	gadgets, err := CRDTypeConverter(decodeCRD(t, gadgetCRD))
	if err != nil {
		t.Fatal(err)
	}
	const head = "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default, labels: {a: b}}\n"
	tests := []struct {
		name     string
		tc       managedfields.TypeConverter
		manifest string
		want     []string // paths in the field set
		wantErr  string
	}{
		{"map-list items are keyed by name", tc, head + "spec: {color: red, parts: [{name: wheel, size: 4}]}",
			[]string{`.spec.parts[name="wheel"].size`, `.metadata.labels.a`}, ""},
		{"fields kept as unknown are deduced", tc, head + "spec: {color: red, extra: {anything: {deep: 1}, known: x}}",
			[]string{`.spec.extra.anything.deep`, `.spec.extra.known`}, ""},
		{"an embedded resource keeps what it holds", tc, head + "spec: {color: red, template: {apiVersion: v1, kind: Pod, spec: {x: 1}}}",
			[]string{`.spec.template.spec.x`, `.spec.template.kind`}, ""},
		{"int-or-string takes a string", tc, head + "spec: {color: red, port: http}", []string{`.spec.port`}, ""},
		{"another version has its own schema", tc, "apiVersion: stable.example.com/v2beta1\nkind: Widget\nmetadata: {name: w}\nspec: {colour: red}",
			[]string{`.spec.colour`}, ""},
		{"an undeclared field is refused", tc, head + "spec: {color: red, bogus: 1}", nil, "bogus"},
		{"a schema keeping unknown fields at the root takes any", gadgets,
			"apiVersion: tools.example.org/v1alpha1\nkind: Gadget\nmetadata: {name: g}\na: {b: [{c: d}]}", []string{`.a.b`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tv, err := tt.tc.ObjectToTyped(unstructuredFrom(t, tt.manifest))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ObjectToTyped: %v", err)
			}
			set, err := tv.ToFieldSet()
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.want {
				if !strings.Contains(set.String(), want) {
					t.Errorf("field set lacks %s:\n%s", want, set)
				}
			}
		})
	}
}

type unstructuredNew struct{}

func (unstructuredNew) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// oneVersion converts nothing: the test serves a single version.
type oneVersion struct{}

func (oneVersion) Convert(in, out, _ any) error {
	out.(*unstructured.Unstructured).Object = runtime.DeepCopyJSON(in.(*unstructured.Unstructured).Object)
	return nil
}

func (oneVersion) ConvertToVersion(in runtime.Object, _ runtime.GroupVersioner) (runtime.Object, error) {
	return in.DeepCopyObject(), nil
}

func (oneVersion) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

func TestCRDServerSideApply_MergesPartsOfTwoManagers(t *testing.T) {
	tc, err := CRDTypeConverter(decodeCRD(t, widgetCRD))
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "Widget"}
	fm, err := managedfields.NewDefaultCRDFieldManager(tc, oneVersion{}, noDefaults{},
		unstructuredNew{}, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	part := func(name string, size int) string {
		return "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec:\n  color: red\n  parts: [{name: " +
			name + ", size: " + string(rune('0'+size)) + "}]\n"
	}
	live := runtime.Object(&unstructured.Unstructured{Object: map[string]any{}})
	live.(*unstructured.Unstructured).SetGroupVersionKind(gvk)
	steps := []struct {
		name, manager, manifest string
		wantErr                 string
		wantParts               []string
	}{
		{"alice applies the wheel", "alice", part("wheel", 4), "", []string{"wheel"}},
		{"bob applies the door and the wheel stays", "bob", part("door", 2), "", []string{"wheel", "door"}},
		{"bob resizing alice's wheel conflicts", "bob", part("wheel", 3), "conflict", nil},
	}
	for _, s := range steps {
		out, err := fm.Apply(live, unstructuredFrom(t, s.manifest), s.manager, false)
		if s.wantErr != "" {
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), s.wantErr) {
				t.Fatalf("%s: error %v, want %q", s.name, err, s.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		live = out
		parts, _, _ := unstructured.NestedSlice(out.(*unstructured.Unstructured).Object, "spec", "parts")
		var got []string
		for _, p := range parts {
			got = append(got, p.(map[string]any)["name"].(string))
		}
		if msg := eq(s.name, got, s.wantParts); msg != "" {
			t.Fatal(msg)
		}
	}
}
