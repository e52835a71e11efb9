package schema

import (
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// mustSchema parses a schema written in YAML, as CRD authors write them.
func mustSchema(t *testing.T, y string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	s := &apiextensionsv1.JSONSchemaProps{}
	if err := yaml.UnmarshalStrict([]byte(y), s); err != nil {
		t.Fatalf("bad schema: %v\n%s", err, y)
	}
	return s
}

// mustObj decodes JSON with int64 preservation, as the API server does.
func mustObj(t *testing.T, j string) any {
	t.Helper()
	var v any
	if err := utiljson.Unmarshal([]byte(j), &v); err != nil {
		t.Fatalf("bad object: %v\n%s", err, j)
	}
	return v
}

func mustMap(t *testing.T, j string) map[string]any {
	t.Helper()
	m, ok := mustObj(t, j).(map[string]any)
	if !ok {
		t.Fatalf("not an object: %s", j)
	}
	return m
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// expectErrors asserts that errs are exactly want (each want entry must be
// contained in its error, in order).
func expectErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := errStrings(errs)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n got: %s\nwant: %s", len(got), len(want), strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("error %d:\n got: %s\nwant: %s", i, got[i], want[i])
		}
	}
}

// expectContains asserts that every want appears in one of errs, and that
// errs is not empty.
func expectContains(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	got := errStrings(errs)
	if len(got) == 0 {
		t.Fatalf("no errors, want %q", want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if strings.Contains(g, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

func expectJSON(t *testing.T, got any, want string) {
	t.Helper()
	w := mustObj(t, want)
	if !reflect.DeepEqual(got, w) {
		b, _ := utiljson.Marshal(got)
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
