package registry

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestAPIExtensions_CRDRow_UpstreamShape(t *testing.T) {
	called := ""
	h := Hooks{
		Default:        func(runtime.Object) { called += "default," },
		Validate:       func(runtime.Object) field.ErrorList { called += "validate,"; return nil },
		ValidateUpdate: func(_, _ runtime.Object) field.ErrorList { called += "update,"; return nil },
		ValidateSubresource: func(string, runtime.Object, runtime.Object) (field.ErrorList, bool) {
			called += "subresource,"
			return nil, false
		},
	}
	rows := APIExtensions(h)
	if len(rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(rows))
	}
	r := rows[0]
	if got := r.GVR().String(); got != "apiextensions.k8s.io/v1, Resource=customresourcedefinitions" {
		t.Errorf("GVR = %s", got)
	}
	if r.Kind != "CustomResourceDefinition" || r.ListKind != "CustomResourceDefinitionList" || r.Singular != "customresourcedefinition" {
		t.Errorf("names = %s/%s/%s", r.Kind, r.ListKind, r.Singular)
	}
	if r.Namespaced || !r.Status || !r.Generation || r.Scale {
		t.Errorf("namespaced=%v status=%v generation=%v scale=%v, want cluster scope with status and generation", r.Namespaced, r.Status, r.Generation, r.Scale)
	}
	if len(r.StatusKeeps) != 0 {
		t.Errorf("StatusKeeps = %v: upstream's status strategy takes metadata from the request", r.StatusKeeps)
	}
	expectStrings(t, "short names", r.ShortNames, "crd", "crds")
	expectStrings(t, "categories", r.Categories, "api-extensions")
	if _, ok := r.New().(*apiextensionsv1.CustomResourceDefinition); !ok {
		t.Errorf("New() = %T", r.New())
	}
	if _, ok := r.NewList().(*apiextensionsv1.CustomResourceDefinitionList); !ok {
		t.Errorf("NewList() = %T", r.NewList())
	}
	r.Default(nil)
	r.Validate(nil)
	r.ValidateUpdate(nil, nil)
	r.ValidateSubresource("status", nil, nil)
	if called != "default,validate,update,subresource," {
		t.Errorf("hooks called: %q", called)
	}
}

// The API accepts CRDs only once the engine serves what they define.
func TestBuiltin_WithoutCRDs(t *testing.T) {
	for _, r := range Builtin(Hooks{}) {
		if r.Group == "apiextensions.k8s.io" {
			t.Fatalf("Builtin serves %s", r.GVR())
		}
	}
}

func expectStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s = %v, want %v", what, got, want)
			return
		}
	}
}
