package matchcond

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/auth"
	skiffcel "skiff/server/cel"
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

// allowAlice allows alice everything and nobody else anything, and keeps
// what it was asked.
type allowAlice struct{ asked []auth.Attributes }

func (a *allowAlice) Authorize(_ context.Context, attrs auth.Attributes) (bool, string, error) {
	a.asked = append(a.asked, attrs)
	if attrs.User != nil && attrs.User.Name == "alice" {
		return true, "alice may", nil
	}
	return false, "", nil
}

func TestMatch_AuthorizerConditions_CheckTheRequester(t *testing.T) {
	pods := skiffcel.RequestResource{Resource: "pods", Namespace: "default", Name: "p"}
	cases := []struct {
		name, expr, user string
		want             bool
		wantAsked        auth.Attributes
	}{
		{"allowed user matches", "authorizer.group('').resource('pods').namespace('default').check('delete').allowed()", "alice", true,
			auth.Attributes{Verb: "delete", ResourceRequest: true, APIVersion: "*", Resource: "pods", Namespace: "default"}},
		{"denied user does not", "authorizer.group('').resource('pods').namespace('default').check('delete').allowed()", "bob", false,
			auth.Attributes{Verb: "delete", ResourceRequest: true, APIVersion: "*", Resource: "pods", Namespace: "default"}},
		{"requestResource is the request's", "authorizer.requestResource.check('update').allowed()", "alice", true,
			auth.Attributes{Verb: "update", ResourceRequest: true, APIVersion: "*", Resource: "pods", Namespace: "default", Name: "p"}},
		{"path check", "!authorizer.path('/metrics').check('get').allowed()", "bob", true, auth.Attributes{Verb: "get", Path: "/metrics"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, errs := Compile([]admissionregistrationv1.MatchCondition{{Name: "c", Expression: tc.expr}}, field.NewPath("m"))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			a := &allowAlice{}
			user := &auth.User{Name: tc.user}
			got, err := m.Match(context.Background(), Vars{Authorizer: a, User: user, Resource: pods})
			if err != nil || got != tc.want {
				t.Fatalf("Match = %v, %v; want %v", got, err, tc.want)
			}
			tc.wantAsked.User = user
			if len(a.asked) != 1 || a.asked[0] != tc.wantAsked {
				t.Errorf("asked %+v, want [%+v]", a.asked, tc.wantAsked)
			}
		})
	}
}

func TestMatch_AuthorizerUnbound_ErrorForFailurePolicy(t *testing.T) {
	m, errs := Compile([]admissionregistrationv1.MatchCondition{{Name: "a", Expression: "authorizer.requestResource.check('get').allowed()"}}, field.NewPath("m"))
	if len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	got, err := m.Match(context.Background(), Vars{})
	if !got || err == nil || !strings.Contains(err.Error(), `matchCondition "a"`) {
		t.Fatalf("Match = %v, %v; want true with the condition's error", got, err)
	}
}

func TestCompile_AuthorizerMisused_Refused(t *testing.T) {
	_, errs := Compile([]admissionregistrationv1.MatchCondition{{Name: "a", Expression: "authorizer.group('').check('get').allowed()"}}, field.NewPath("m"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "m[0].expression") || !strings.Contains(errs[0].Error(), "compilation failed") {
		t.Fatalf("errors = %v, want compilation failed at m[0].expression", errs)
	}
}
