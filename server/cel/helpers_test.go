package cel

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// mustSchema decodes a schema written as JSON.
func mustSchema(t *testing.T, js string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var s apiextensionsv1.JSONSchemaProps
	if err := utiljson.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("schema: %v", err)
	}
	return &s
}

// mustObject decodes an object as the API server does (ints as int64).
func mustObject(t *testing.T, js string) any {
	t.Helper()
	if js == "" {
		return nil
	}
	var o any
	if err := utiljson.Unmarshal([]byte(js), &o); err != nil {
		t.Fatalf("object: %v", err)
	}
	return o
}

func mustCompile(t *testing.T, s *apiextensionsv1.JSONSchemaProps) *Validator {
	t.Helper()
	v, errs := CompileSchema(s, field.NewPath("openAPIV3Schema"))
	if len(errs) > 0 {
		t.Fatalf("compile errors: %v", errs.ToAggregate())
	}
	return v
}

func validate(t *testing.T, schema, obj, old string) field.ErrorList {
	t.Helper()
	v := mustCompile(t, mustSchema(t, schema))
	return v.Validate(context.Background(), nil, mustObject(t, obj), mustObject(t, old))
}

// errorsContain checks that errs has exactly one error per entry of want,
// each containing its entry, in order; want empty means no errors.
func errorsContain(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors %v, want %d containing %q", len(errs), errs.ToAggregate(), len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want it to contain %q", i, errs[i].Error(), w)
		}
	}
}

// compileUnchecked compiles without the CRD's cost limits, as upstream's
// cost tests do, so that rules over the limits can be measured.
func compileUnchecked(t *testing.T, s *apiextensionsv1.JSONSchemaProps) *Validator {
	t.Helper()
	c := &compiler{}
	v := c.walk(s, s, true, SchemaDeclType(s, true), walkCtx{})
	if v == nil || v.compileErr != nil {
		t.Fatalf("compile: %v", v)
	}
	for _, cr := range v.compiled {
		if cr.err != nil {
			t.Fatalf("compile: %v", cr.err)
		}
	}
	return v
}
