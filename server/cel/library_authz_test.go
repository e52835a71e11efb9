package cel

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"

	"skiff/server/auth"
)

// fakeAuthorizer records what it is asked and answers with decide (allow
// everything when nil).
type fakeAuthorizer struct {
	mu     sync.Mutex
	asked  []auth.Attributes
	ctxs   []context.Context
	decide func(auth.Attributes) (bool, string, error)
}

func (f *fakeAuthorizer) Authorize(ctx context.Context, a auth.Attributes) (bool, string, error) {
	f.mu.Lock()
	f.asked = append(f.asked, a)
	f.ctxs = append(f.ctxs, ctx)
	f.mu.Unlock()
	if f.decide == nil {
		return true, "", nil
	}
	return f.decide(a)
}

func authzEnv(t *testing.T) *cel.Env {
	t.Helper()
	env, err := NewEnv(nil, AuthorizerDeclarations()...)
	if err != nil {
		t.Fatalf("env: %v", err)
	}
	return env
}

var alice = &auth.User{Name: "alice", Groups: []string{"dev", auth.GroupAuthenticated}}

// evalAuthz evaluates expr with the authorizer variables bound to f for
// alice, requestResource being apps/deployments/scale web in ns1.
func evalAuthz(t *testing.T, ctx context.Context, f *fakeAuthorizer, expr string) (any, uint64, error) {
	t.Helper()
	env := authzEnv(t)
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compile %q: %v", expr, iss.Err())
	}
	prog, err := env.Program(ast)
	if err != nil {
		t.Fatalf("program: %v", err)
	}
	rr := RequestResource{Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: "ns1", Name: "web"}
	out, det, err := prog.ContextEval(ctx, AuthorizerBindings(ctx, f, alice, rr))
	var cost uint64
	if det != nil && det.ActualCost() != nil {
		cost = *det.ActualCost()
	}
	if err != nil {
		return nil, cost, err
	}
	return out.Value(), cost, nil
}

func TestAuthz_Expressions_TypeCheckAsUpstream(t *testing.T) {
	cases := []struct {
		expr string
		want *cel.Type // nil: must not compile
	}{
		{"authorizer.path('/healthz')", PathCheckType},
		{"authorizer.group('apps')", GroupCheckType},
		{"authorizer.serviceAccount('default', 'builder')", AuthorizerType},
		{"authorizer.group('').resource('pods').subresource('log').namespace('a').name('b')", ResourceCheckType},
		{"authorizer.group('').resource('pods').fieldSelector('spec.nodeName=n').labelSelector('app=x')", ResourceCheckType},
		{"authorizer.path('/healthz').check('get')", DecisionType},
		{"authorizer.requestResource.check('update').allowed()", cel.BoolType},
		{"authorizer.requestResource.check('update').reason()", cel.StringType},
		{"authorizer.requestResource.check('update').errored()", cel.BoolType},
		{"authorizer.requestResource.check('update').error()", cel.StringType},
		{"authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('list').allowed()", cel.BoolType},
		// Each builder is defined on its own type only.
		{"authorizer.resource('pods')", nil},
		{"authorizer.group('apps').check('get')", nil},
		{"authorizer.path('/x').namespace('a')", nil},
		{"authorizer.group('').resource('pods').check(1)", nil},
		{"authorizer.check('get').allowed()", nil},
		{"authorizer.path('/x').check('get') == true", nil},
	}
	env := authzEnv(t)
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			ast, iss := env.Compile(tc.expr)
			if tc.want == nil {
				if iss.Err() == nil {
					t.Fatalf("compiled to %v, want a compile error", ast.OutputType())
				}
				return
			}
			if iss.Err() != nil {
				t.Fatalf("compile: %v", iss.Err())
			}
			if !ast.OutputType().IsExactType(tc.want) {
				t.Errorf("type = %v, want %v", ast.OutputType(), tc.want)
			}
		})
	}
}

func TestAuthz_WithoutAuthorizerVariable_DoesNotCompile(t *testing.T) {
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, iss := env.Compile("authorizer.path('/x').check('get').allowed()"); iss.Err() == nil || !strings.Contains(iss.Err().Error(), "undeclared reference to 'authorizer'") {
		t.Errorf("err = %v, want undeclared reference", iss.Err())
	}
}

func TestAuthz_Check_AsksAuthorizerWithUpstreamAttributes(t *testing.T) {
	resource := func(group, res, sub, ns, name, verb string) auth.Attributes {
		return auth.Attributes{User: alice, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "*",
			Resource: res, Subresource: sub, Namespace: ns, Name: name}
	}
	cases := []struct {
		expr string
		want auth.Attributes
	}{
		{"authorizer.path('/healthz').check('get').allowed()", auth.Attributes{User: alice, Verb: "get", Path: "/healthz"}},
		{"authorizer.group('apps').resource('deployments').namespace('ns1').check('create').allowed()",
			resource("apps", "deployments", "", "ns1", "", "create")},
		{"authorizer.group('').resource('pods').subresource('status').namespace('a').name('p').check('patch').allowed()",
			resource("", "pods", "status", "a", "p", "patch")},
		// "" unsets: the check is for every name, the cluster scope.
		{"authorizer.group('').resource('pods').name('p').name('').namespace('').check('list').allowed()",
			resource("", "pods", "", "", "", "list")},
		{"authorizer.group('').resource('pods').fieldSelector('spec.nodeName=n1').labelSelector('a=b').check('list').allowed()",
			resource("", "pods", "", "", "", "list")},
		{"authorizer.requestResource.check('update').allowed()", resource("apps", "deployments", "scale", "ns1", "web", "update")},
		{"authorizer.requestResource.subresource('').name('other').check('get').allowed()", resource("apps", "deployments", "", "ns1", "other", "get")},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			f := &fakeAuthorizer{}
			out, _, err := evalAuthz(t, context.Background(), f, tc.expr)
			if err != nil || out != true {
				t.Fatalf("= %v, %v; want true", out, err)
			}
			if len(f.asked) != 1 || !reflect.DeepEqual(f.asked[0], tc.want) {
				t.Errorf("asked %+v, want [%+v]", f.asked, tc.want)
			}
		})
	}
}

func TestAuthz_ServiceAccount_ChecksForThatAccount(t *testing.T) {
	f := &fakeAuthorizer{}
	out, _, err := evalAuthz(t, context.Background(), f, "authorizer.serviceAccount('ci', 'builder').group('').resource('secrets').check('get').allowed()")
	if err != nil || out != true {
		t.Fatalf("= %v, %v", out, err)
	}
	want := &auth.User{Name: "system:serviceaccount:ci:builder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci"}}
	if len(f.asked) != 1 || !reflect.DeepEqual(f.asked[0].User, want) {
		t.Errorf("asked for %+v, want %+v", f.asked, want)
	}
}

func TestAuthz_Decision_ReportsAuthorizerAnswer(t *testing.T) {
	boom := errors.New("lister down")
	cases := []struct {
		name           string
		allowed        bool
		reason         string
		err            error
		expr           string
		want           any
		wantEvalErrSub string
	}{
		{"allowed", true, "RBAC: allowed by x", nil, "authorizer.path('/x').check('get').allowed()", true, ""},
		{"denied", false, "", nil, "authorizer.path('/x').check('get').allowed()", false, ""},
		{"reason", true, "RBAC: allowed by x", nil, "authorizer.path('/x').check('get').reason()", "RBAC: allowed by x", ""},
		{"not errored", false, "", nil, "authorizer.path('/x').check('get').errored()", false, ""},
		{"no error text", false, "", nil, "authorizer.path('/x').check('get').error()", "", ""},
		{"errored", false, "", boom, "authorizer.requestResource.check('get').errored()", true, ""},
		{"error text", false, "", boom, "authorizer.requestResource.check('get').error()", "lister down", ""},
		{"error denies", false, "", boom, "authorizer.requestResource.check('get').allowed()", false, ""},
		{"empty path", true, "", nil, "authorizer.path('  ').check('get').allowed()", nil, "path must not be empty"},
		{"empty resource", true, "", nil, "authorizer.group('').resource('').check('get').allowed()", nil, "resource must not be empty"},
		{"bad sa name", true, "", nil, "authorizer.serviceAccount('ns', 'Bad_Name').path('/x').check('get').allowed()", nil, "Invalid service account name"},
		{"bad sa namespace", true, "", nil, "authorizer.serviceAccount('a.b', 'sa').path('/x').check('get').allowed()", nil, "Invalid service account namespace"},
		{"no equality", true, "", nil, "authorizer.path('/x') == authorizer.path('/x')", nil, "no such overload"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAuthorizer{decide: func(auth.Attributes) (bool, string, error) { return tc.allowed, tc.reason, tc.err }}
			out, _, err := evalAuthz(t, context.Background(), f, tc.expr)
			if tc.wantEvalErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantEvalErrSub) {
					t.Fatalf("= %v, %v; want error containing %q", out, err, tc.wantEvalErrSub)
				}
				if len(f.asked) != 0 {
					t.Errorf("authorizer asked %+v after a bad argument", f.asked)
				}
				return
			}
			if err != nil || out != tc.want {
				t.Errorf("= %#v, %v; want %#v", out, err, tc.want)
			}
		})
	}
}

type ctxKey struct{}

func TestAuthz_Check_RunsUnderTheBindingsContext(t *testing.T) {
	f := &fakeAuthorizer{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "request-7")
	if _, _, err := evalAuthz(t, ctx, f, "authorizer.path('/x').check('get').allowed() && authorizer.requestResource.check('get').allowed()"); err != nil {
		t.Fatal(err)
	}
	if len(f.ctxs) != 2 {
		t.Fatalf("asked %d times, want 2", len(f.ctxs))
	}
	for i, c := range f.ctxs {
		if c.Value(ctxKey{}) != "request-7" {
			t.Errorf("check %d ran under %v, want the bindings' context", i, c)
		}
	}
}

func TestAuthz_NilAuthorizer_DecisionErrors(t *testing.T) {
	env := authzEnv(t)
	ast, iss := env.Compile("authorizer.path('/x').check('get').error()")
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prog, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prog.Eval(map[string]any{AuthorizerVariable: NewAuthorizerValue(context.Background(), nil, alice)})
	if err != nil || out != types.String(errNoAuthorizer.Error()) {
		t.Errorf("= %v, %v; want %q", out, err, errNoAuthorizer)
	}
}

// The expected costs are upstream's (k8s.io/apiserver's TestAuthzLibrary).
func TestAuthz_Cost_MatchesUpstream(t *testing.T) {
	cases := []struct {
		expr string
		cost uint64 // estimated (exact) and actual
	}{
		{"authorizer.path('/healthz')", 2},
		{"authorizer.group('apps').resource('deployments').subresource('status').namespace('test').name('backend')", 6},
		// authorizer(1) + group(1) + resource(1) + selector (10 + ceil(71*0.1)=8 + ceil(71/2)*50=1800)
		{"authorizer.group('').resource('pods').fieldSelector('spec.nodeName=example-node-name.fully.qualified.domain.name.example.com')", 1821},
		{"authorizer.group('').resource('pods').labelSelector('spec.nodeName=example-node-name.fully.qualified.domain.name.example.com')", 1821},
		{"authorizer.path('/healthz').check('get').allowed()", 350003},
		{"authorizer.group('apps').resource('deployments').subresource('status').namespace('test').name('backend').check('create').allowed()", 350007},
		{"authorizer.group('apps').resource('deployments').subresource('status').namespace('test').name('backend').check('create').reason()", 350007},
		{"authorizer.group('apps').resource('deployments').subresource('status').namespace('test').name('backend').check('create').errored()", 350007},
		{"authorizer.group('apps').resource('deployments').subresource('status').namespace('test').name('backend').check('create').error()", 350007},
		{"authorizer.serviceAccount('ns', 'sa').path('/x').check('get').allowed()", 350004},
	}
	env := authzEnv(t)
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			ast, iss := env.Compile(tc.expr)
			if iss.Err() != nil {
				t.Fatal(iss.Err())
			}
			est, err := env.EstimateCost(ast, &CostEstimator{})
			if err != nil {
				t.Fatal(err)
			}
			if est.Min != tc.cost || est.Max != tc.cost {
				t.Errorf("estimated cost = %d..%d, want %d", est.Min, est.Max, tc.cost)
			}
			_, actual, err := evalAuthz(t, context.Background(), &fakeAuthorizer{}, tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if actual != tc.cost {
				t.Errorf("actual cost = %d, want %d", actual, tc.cost)
			}
		})
	}
}

func TestAuthz_Equality_EstimatedAtUnitCost(t *testing.T) {
	env := authzEnv(t)
	ast, iss := env.Compile("authorizer.path('/a') == authorizer.path('/b')")
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	est, err := env.EstimateCost(ast, &CostEstimator{})
	if err != nil {
		t.Fatal(err)
	}
	// two paths (2 each) and the comparison (1)
	if want := (checker.CostEstimate{Min: 5, Max: 5}); est != want {
		t.Errorf("estimate = %v, want %v", est, want)
	}
}

// Checks are priced so that one expression can make two, not three, within
// the per-call limit.
func TestAuthz_ThirdCheck_ExceedsPerCallLimit(t *testing.T) {
	two := "authorizer.path('/a').check('get').allowed() || authorizer.path('/b').check('get').allowed()"
	three := two + " || authorizer.path('/c').check('get').allowed()"
	deny := &fakeAuthorizer{decide: func(auth.Attributes) (bool, string, error) { return false, "", nil }}
	if _, cost, err := evalAuthz(t, context.Background(), deny, two); err != nil {
		t.Errorf("two checks: %v (cost %d)", err, cost)
	}
	if _, _, err := evalAuthz(t, context.Background(), deny, three); err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
		t.Errorf("three checks: err = %v, want the cost limit exceeded", err)
	}
}
