package printers

import (
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCustomResourceDefinitionPrinter_UpstreamColumnsAndCells(t *testing.T) {
	gk := schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	p, _ := For(gk)
	if got, want := header(p), "Name;Scope;Versions;Created At;*Group;*Kind;*ShortNames;*Established"; got != want {
		t.Fatalf("header = %q, want %q", got, want)
	}
	created := "2025-03-10T10:00:00Z"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: objMeta("foos.example.com", 2*time.Hour),
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Foo", ShortNames: []string{"fo", "f"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v2", Served: true}, {Name: "v1", Served: true, Storage: true}, {Name: "v0"},
			},
		},
	}
	established := crd.DeepCopy()
	established.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
		{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
		{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(established)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetKind("CustomResourceDefinition")
	tests := []struct {
		name string
		obj  runtime.Object
		want []interface{}
	}{
		// served versions only, sorted, the storage one marked
		{"not yet established", crd, []interface{}{"foos.example.com", "Namespaced", "v1(storage),v2", created, "example.com", "Foo", "fo,f", false}},
		{"established, unstructured", u, []interface{}{"foos.example.com", "Namespaced", "v1(storage),v2", created, "example.com", "Foo", "fo,f", true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertCells(t, gk, tt.obj, tt.want) })
	}
	if _, err := Rows(p, []runtime.Object{&metav1.Status{}}, testNow); err == nil {
		t.Fatalf("a Status is not a CRD and must not print as one")
	}
}
