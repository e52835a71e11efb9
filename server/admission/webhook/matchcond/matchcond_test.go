package matchcond

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestMatch_Conditions(t *testing.T) {
	obj := map[string]any{"metadata": map[string]any{"name": "skip-me", "namespace": "production"}, "spec": map[string]any{"replicas": int64(2)}}
	cases := []struct {
		name    string
		exprs   []string
		want    bool
		wantErr string
	}{
		{"all true", []string{"object.metadata.namespace == 'production'", "object.spec.replicas > 1", "oldObject == null"}, true, ""},
		{"one false wins over errors", []string{"object.missing.field == 1", "object.metadata.name != 'skip-me'"}, false, ""},
		{"true and error reports the error", []string{"true", "object.missing.field == 1"}, true, `matchCondition "c1"`},
		{"request fields", []string{"request.operation == 'CREATE'"}, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var conds []admissionregistrationv1.MatchCondition
			for i, e := range tc.exprs {
				conds = append(conds, admissionregistrationv1.MatchCondition{Name: "c" + string(rune('0'+i)), Expression: e})
			}
			m, errs := Compile(conds, field.NewPath("matchConditions"))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got, err := m.Match(context.Background(), Vars{Object: obj, Request: map[string]any{"operation": "CREATE"}})
			if got != tc.want || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Match = %v, %v; want %v, error %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestCompile_AuthorizerNotDeclared_Refused(t *testing.T) {
	_, errs := Compile([]admissionregistrationv1.MatchCondition{{Name: "a", Expression: "authorizer.group('').resource('pods').check('get').allowed()"}}, field.NewPath("m"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "m[0].expression") || !strings.Contains(errs[0].Error(), "compilation failed") {
		t.Fatalf("errors = %v, want compilation failed at m[0].expression", errs)
	}
}
