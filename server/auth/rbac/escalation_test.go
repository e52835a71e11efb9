package rbac

import (
	"context"
	"errors"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/auth"
)

func TestCovers(t *testing.T) {
	tests := []struct {
		name    string
		owner   []rbacv1.PolicyRule
		servant []rbacv1.PolicyRule
		covered bool
		missing []string
	}{
		{"same rights spread over several rules are covered",
			[]rbacv1.PolicyRule{rule(verbs("get"), "", "pods"), rule(verbs("list"), "", "pods", "services")},
			[]rbacv1.PolicyRule{rule(verbs("get", "list"), "", "pods")}, true, nil},
		{"a missing verb is reported alone",
			[]rbacv1.PolicyRule{rule(readVerbs(), "", "pods")},
			[]rbacv1.PolicyRule{rule(verbs("get", "delete"), "", "pods")}, false,
			[]string{`{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`}},
		{"wildcards cover everything in their position",
			[]rbacv1.PolicyRule{rule(verbs("*"), "*", "*")},
			[]rbacv1.PolicyRule{rule(verbs("escalate"), "rbac.authorization.k8s.io", "clusterroles")}, true, nil},
		{"star-slash covers that subresource of any resource",
			[]rbacv1.PolicyRule{rule(verbs("update"), "apps", "*/scale")},
			[]rbacv1.PolicyRule{rule(verbs("update"), "apps", "deployments/scale")}, true, nil},
		{"star-slash does not cover the resource itself",
			[]rbacv1.PolicyRule{rule(verbs("update"), "apps", "*/scale")},
			[]rbacv1.PolicyRule{rule(verbs("update"), "apps", "deployments")}, false,
			[]string{`{APIGroups:["apps"], Resources:["deployments"], Verbs:["update"]}`}},
		{"named rights do not cover unnamed ones",
			[]rbacv1.PolicyRule{named(rule(verbs("get"), "", "secrets"), "a")},
			[]rbacv1.PolicyRule{rule(verbs("get"), "", "secrets")}, false,
			[]string{`{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`}},
		{"unnamed rights cover named ones",
			[]rbacv1.PolicyRule{rule(verbs("get"), "", "secrets")},
			[]rbacv1.PolicyRule{named(rule(verbs("get"), "", "secrets"), "a", "b")}, true, nil},
		{"a URL prefix covers paths below it",
			[]rbacv1.PolicyRule{urlRule(verbs("get"), "/apis/*")},
			[]rbacv1.PolicyRule{urlRule(verbs("get"), "/apis/apps", "/api")}, false,
			[]string{`{NonResourceURLs:["/api"], Verbs:["get"]}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			covered, missing := Covers(tt.owner, tt.servant)
			var got []string
			for _, m := range missing {
				got = append(got, describeRule(m))
			}
			if covered != tt.covered || strings.Join(got, "\n") != strings.Join(tt.missing, "\n") {
				t.Errorf("Covers = %v, %v; want %v, %v", covered, got, tt.covered, tt.missing)
			}
		})
	}
}

func escalationPolicy() *fakeLister {
	return &fakeLister{
		clusterRoles: []*rbacv1.ClusterRole{
			newClusterRole("pod-reader", rule(readVerbs(), "", "pods")),
			newClusterRole("pod-admin", rule(readWriteVerbs(), "", "pods")),
			newClusterRole("role-escalator", rule(verbs("escalate"), rbacv1.GroupName, "roles", "clusterroles")),
			newClusterRole("binder", named(rule(verbs("bind"), rbacv1.GroupName, "clusterroles"), "pod-admin")),
			newClusterRole("cluster-admin", fullAuthority()...),
		},
		roles: []*rbacv1.Role{newRole("team", "local-pods", rule(readWriteVerbs(), "", "pods"))},
		crbs: []*rbacv1.ClusterRoleBinding{
			newCRB("readers", "pod-reader", groupSubject("readers")),
			newCRB("escalators", "role-escalator", userSubject("esc")),
			newCRB("pod-admins", "pod-admin", userSubject("padmin")),
		},
		rbs: []*rbacv1.RoleBinding{
			newRB("team", "team-pods", "Role", "local-pods", userSubject("lead")),
			newRB("team", "team-binder", "ClusterRole", "binder", userSubject("delegate")),
		},
	}
}

func TestConfirmNoEscalationListsMissingRules(t *testing.T) {
	a := New(escalationPolicy())
	reader := user("rita", "readers")
	if err := a.ConfirmNoEscalation(context.Background(), reader, "team", []rbacv1.PolicyRule{rule(verbs("get", "list"), "", "pods")}); err != nil {
		t.Fatalf("granting rules the user holds: %v", err)
	}
	err := a.ConfirmNoEscalation(context.Background(), reader, "team",
		[]rbacv1.PolicyRule{rule(verbs("get", "create", "delete"), "", "pods"), rule(verbs("get"), "", "secrets")})
	var esc *EscalationError
	if !errors.As(err, &esc) {
		t.Fatalf("ConfirmNoEscalation = %v; want *EscalationError", err)
	}
	want := `user "rita" (groups=["readers"]) is attempting to grant RBAC permissions not currently held:` +
		"\n" + `{APIGroups:[""], Resources:["pods"], Verbs:["create" "delete"]}` +
		"\n" + `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`
	if err.Error() != want {
		t.Errorf("error =\n%s\nwant\n%s", err, want)
	}
}

func TestCanWriteRole(t *testing.T) {
	podWriter := []rbacv1.PolicyRule{rule(verbs("create", "delete"), "", "pods")}
	tests := []struct {
		name    string
		user    *auth.User
		role    *rbacv1.Role
		allowed bool
	}{
		{"refused when the user lacks the rules", user("rita", "readers"), newRole("team", "r", podWriter...), false},
		{"allowed with the escalate verb", user("esc"), newRole("team", "r", podWriter...), true},
		{"allowed for masters", user("root", auth.GroupMasters), newRole("team", "r", podWriter...), true},
		{"allowed when held through a RoleBinding in the role's namespace", user("lead"), newRole("team", "r", podWriter...), true},
		{"refused when held only in another namespace", user("lead"), newRole("other", "r", podWriter...), false},
		{"allowed when held cluster-wide", user("padmin"), newRole("other", "r", podWriter...), true},
	}
	a := New(escalationPolicy())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := a.CanWriteRole(context.Background(), nil, tt.user, tt.role)
			checkEscalation(t, err, tt.allowed)
		})
	}
}

func TestCanWriteClusterRole(t *testing.T) {
	aggregated := newClusterRole("agg")
	aggregated.AggregationRule = &rbacv1.AggregationRule{}
	withSelector := newClusterRole("agg")
	withSelector.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{"team": "a"}},
	}}
	tests := []struct {
		name    string
		user    *auth.User
		role    *rbacv1.ClusterRole
		allowed bool
		reason  string
	}{
		{"refused when the user lacks the rules cluster-wide", user("lead"), newClusterRole("c", rule(verbs("get"), "", "pods")), false, "not currently held"},
		{"allowed when held cluster-wide", user("padmin"), newClusterRole("c", rule(verbs("delete"), "", "pods")), true, ""},
		{"an aggregationRule without selectors needs nothing more", user("padmin"), aggregated, true, ""},
		{"an aggregationRule with selectors needs cluster-admin", user("padmin"), withSelector, false, "must have cluster-admin privileges to use the aggregationRule"},
		{"escalate allows an aggregationRule", user("esc"), withSelector, true, ""},
	}
	a := New(escalationPolicy())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := a.CanWriteClusterRole(context.Background(), nil, tt.user, tt.role)
			checkEscalation(t, err, tt.allowed)
			if err != nil && !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not mention %q", err, tt.reason)
			}
		})
	}
}

func TestCanBind(t *testing.T) {
	podAdmin := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-admin"}
	tests := []struct {
		name      string
		user      *auth.User
		namespace string
		ref       rbacv1.RoleRef
		allowed   bool
		reason    string
	}{
		{"refused without bind and without the role's rules", user("rita", "readers"), "team", podAdmin, false, "not currently held"},
		{"allowed when holding the role's rules", user("padmin"), "", podAdmin, true, ""},
		{"allowed when holding the Role's rules in its namespace", user("lead"), "team",
			rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "local-pods"}, true, ""},
		{"bind verb in a namespace allows a RoleBinding there", user("delegate"), "team", podAdmin, true, ""},
		{"bind verb in a namespace does not allow a ClusterRoleBinding", user("delegate"), "", podAdmin, false, "not currently held"},
		{"bind verb is limited to the named role", user("delegate"), "team",
			rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}, false, "not currently held"},
		{"a missing role is refused", user("rita", "readers"), "team",
			rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ghost"}, false, `"ghost" not found`},
		{"masters may bind anything", user("root", auth.GroupMasters), "", rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}, true, ""},
	}
	a := New(escalationPolicy())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := a.CanBind(context.Background(), nil, tt.user, tt.namespace, tt.ref)
			checkEscalation(t, err, tt.allowed)
			if err != nil && !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not mention %q", err, tt.reason)
			}
		})
	}
}

// deciderFunc lets a test stand in for the API server's chained authorizer.
type deciderFunc func(auth.Attributes) (bool, error)

func (f deciderFunc) Authorize(_ context.Context, a auth.Attributes) (bool, string, error) {
	ok, err := f(a)
	return ok, "", err
}

func TestWriteChecksAskTheGivenDecider(t *testing.T) {
	var asked []string
	grantAll := deciderFunc(func(a auth.Attributes) (bool, error) {
		asked = append(asked, a.Verb+" "+a.APIGroup+"/"+a.Resource+" "+a.Namespace+"/"+a.Name)
		return true, nil
	})
	a := New(escalationPolicy())
	ctx := context.Background()
	rita := user("rita", "readers")
	if err := a.CanWriteRole(ctx, grantAll, rita, newRole("team", "r", rule(verbs("*"), "*", "*"))); err != nil {
		t.Errorf("CanWriteRole with escalate granted: %v", err)
	}
	if err := a.CanBind(ctx, grantAll, rita, "", rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}); err != nil {
		t.Errorf("CanBind with bind granted: %v", err)
	}
	want := "escalate rbac.authorization.k8s.io/roles team/r\nbind rbac.authorization.k8s.io/clusterroles /cluster-admin"
	if got := strings.Join(asked, "\n"); got != want {
		t.Errorf("decider was asked\n%s\nwant\n%s", got, want)
	}

	boom := errors.New("webhook down")
	failing := deciderFunc(func(auth.Attributes) (bool, error) { return false, boom })
	err := a.CanWriteRole(ctx, failing, rita, newRole("team", "r", rule(verbs("delete"), "", "pods")))
	if !errors.Is(err, boom) {
		t.Errorf("refusal %v does not carry the decider's error", err)
	}
}

func checkEscalation(t *testing.T, err error, allowed bool) {
	t.Helper()
	if allowed {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var esc *EscalationError
	if !errors.As(err, &esc) {
		t.Fatalf("got %v; want *EscalationError", err)
	}
}
