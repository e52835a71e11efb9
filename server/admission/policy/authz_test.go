package policy

import (
	"context"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/auth/rbac"
)

// rbacObjects is an in-memory rbac.Lister.
type rbacObjects struct {
	roles    []*rbacv1.Role
	bindings []*rbacv1.RoleBinding
}

func (o *rbacObjects) ListClusterRoleBindings(context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	return []*rbacv1.ClusterRoleBinding{}, nil
}

func (o *rbacObjects) ListRoleBindings(_ context.Context, ns string) ([]*rbacv1.RoleBinding, error) {
	out := []*rbacv1.RoleBinding{}
	for _, b := range o.bindings {
		if b.Namespace == ns {
			out = append(out, b)
		}
	}
	return out, nil
}

func (o *rbacObjects) GetClusterRole(context.Context, string) (*rbacv1.ClusterRole, error) {
	return nil, nil
}

func (o *rbacObjects) GetRole(_ context.Context, ns, name string) (*rbacv1.Role, error) {
	for _, r := range o.roles {
		if r.Namespace == ns && r.Name == name {
			return r, nil
		}
	}
	return nil, nil
}

// deployerRBAC lets alice create (and "x") deployments in namespace team,
// and nobody anything else.
func deployerRBAC() *rbac.Authorizer {
	return rbac.New(&rbacObjects{
		roles: []*rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: "team"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "x"}}}}},
		bindings: []*rbacv1.RoleBinding{{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: "team"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}},
	})
}

// recordingAuthorizer allows every check and keeps what was asked.
type recordingAuthorizer struct {
	mu    sync.Mutex
	asked []auth.Attributes
}

func (r *recordingAuthorizer) Authorize(_ context.Context, a auth.Attributes) (bool, string, error) {
	r.mu.Lock()
	r.asked = append(r.asked, a)
	r.mu.Unlock()
	return true, "", nil
}

const canCreateDeployments = "authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('create').allowed()"

func TestAdmit_AuthorizerVariables_CheckTheRequestersPermissions(t *testing.T) {
	validate := func(expr string) func(*admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		return func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations = []admissionregistrationv1.Validation{{Expression: expr, Message: "not permitted"}}
		}
	}
	cases := []struct {
		name    string
		mutate  func(*admissionregistrationv1.ValidatingAdmissionPolicySpec)
		user    string
		wantErr string // "" admits
	}{
		{name: "RBAC allows: admitted", mutate: validate(canCreateDeployments), user: "alice"},
		{name: "RBAC denies: denied", mutate: validate(canCreateDeployments), user: "bob", wantErr: "denied request: not permitted"},
		{name: "requestResource allowed verb", mutate: validate("authorizer.requestResource.check('x').allowed()"), user: "alice"},
		{name: "requestResource denied verb", mutate: validate("authorizer.requestResource.check('delete').allowed()"), user: "alice", wantErr: "not permitted"},
		// messageExpression sees no authorizer upstream, but the variables
		// it reads do.
		{name: "reason of the decision", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Variables = []admissionregistrationv1.Variable{{Name: "why", Expression: "authorizer.requestResource.check('create').reason()"}}
			s.Validations = []admissionregistrationv1.Validation{{Expression: "false", MessageExpression: "variables.why"}}
		}, user: "alice", wantErr: `denied request: RBAC: allowed by RoleBinding "deployer/team" of Role "deployer" to User "alice"`},
		{name: "variable using the authorizer", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Variables = []admissionregistrationv1.Variable{{Name: "canCreate", Expression: canCreateDeployments}}
			s.Validations = []admissionregistrationv1.Validation{{Expression: "variables.canCreate", Message: "not permitted"}}
		}, user: "bob", wantErr: "not permitted"},
		{name: "match condition using the authorizer skips the permitted", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-deployer", Expression: "!" + canCreateDeployments}}
			s.Validations = []admissionregistrationv1.Validation{{Expression: "false", Message: "only deployers"}}
		}, user: "alice"},
		{name: "match condition using the authorizer checks the others", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-deployer", Expression: "!" + canCreateDeployments}}
			s.Validations = []admissionregistrationv1.Validation{{Expression: "false", Message: "only deployers"}}
		}, user: "bob", wantErr: "only deployers"},
		{name: "service account checked, not the requester", mutate: validate(
			"authorizer.serviceAccount('team', 'ci').group('apps').resource('deployments').namespace('team').check('create').allowed()"),
			user: "alice", wantErr: "not permitted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &fakeLookups{policies: []*admissionregistrationv1.ValidatingAdmissionPolicy{deploymentPolicy("p", tc.mutate)},
				bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("b", "p", deny, nil)}}
			if errs := CompileErrors(&l.policies[0].Spec, field.NewPath("spec")); len(errs) > 0 {
				t.Fatalf("refused at write: %v", errs)
			}
			p := New(l, WithAuthorizer(deployerRBAC()))
			err := p.Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpCreate,
				Resource: registryRow(t, "apps", "deployments"), Object: deployment("team", 1, nil), User: &auth.User{Name: tc.user}})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("denied: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestAdmit_RequestResource_IsTheRequestsResource(t *testing.T) {
	cases := []struct {
		name string
		a    apiserver.AdmissionAttributes
		want auth.Attributes
	}{
		{name: "create", a: apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Object: deployment("team", 1, nil)},
			want: auth.Attributes{Verb: "x", ResourceRequest: true, APIGroup: "apps", APIVersion: "*", Resource: "deployments", Namespace: "team", Name: "web"}},
		{name: "generateName create has no name", a: apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Object: func() runtime.Object {
			d := deployment("team", 1, nil)
			d.Name, d.GenerateName = "", "web-"
			return d
		}()}, want: auth.Attributes{Verb: "x", ResourceRequest: true, APIGroup: "apps", APIVersion: "*", Resource: "deployments", Namespace: "team"}},
		{name: "scale subresource update", a: apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Subresource: "scale", Object: deployment("team", 2, nil), Old: deployment("team", 1, nil)},
			want: auth.Attributes{Verb: "x", ResourceRequest: true, APIGroup: "apps", APIVersion: "*", Resource: "deployments", Subresource: "scale", Namespace: "team", Name: "web"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol := deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.MatchConstraints.ResourceRules[0].Rule.Resources = []string{"deployments", "deployments/scale"}
				s.Validations = []admissionregistrationv1.Validation{{Expression: "authorizer.requestResource.check('x').allowed()"}}
			})
			rec := &recordingAuthorizer{}
			p := New(&fakeLookups{policies: []*admissionregistrationv1.ValidatingAdmissionPolicy{pol},
				bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("b", "p", deny, nil)}}, WithAuthorizer(rec))
			user := &auth.User{Name: "alice"}
			tc.a.Resource, tc.a.User = registryRow(t, "apps", "deployments"), user
			if err := p.Admit(context.Background(), tc.a); err != nil {
				t.Fatalf("denied: %v", err)
			}
			tc.want.User = user
			if len(rec.asked) != 1 || rec.asked[0] != tc.want {
				t.Errorf("asked %+v, want [%+v]", rec.asked, tc.want)
			}
		})
	}
}

// Without an authorizer the expressions still compile (a policy written
// for a real cluster is accepted) but cannot be evaluated: the failure
// policy decides.
func TestAdmit_NoAuthorizer_FailurePolicyDecides(t *testing.T) {
	for _, fp := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
		t.Run(string(fp), func(t *testing.T) {
			pol := deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.FailurePolicy = ptr.To(fp)
				s.Validations = []admissionregistrationv1.Validation{{Expression: canCreateDeployments}}
			})
			p := New(&fakeLookups{policies: []*admissionregistrationv1.ValidatingAdmissionPolicy{pol},
				bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("b", "p", deny, nil)}})
			err := p.Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpCreate,
				Resource: registryRow(t, "apps", "deployments"), Object: deployment("team", 1, nil), User: &auth.User{Name: "alice"}})
			if fp == admissionregistrationv1.Ignore && err != nil {
				t.Fatalf("Ignore denied: %v", err)
			}
			if fp == admissionregistrationv1.Fail && (err == nil || !strings.Contains(err.Error(), "authorizer")) {
				t.Fatalf("Fail: error %v, want an evaluation error naming authorizer", err)
			}
		})
	}
}
