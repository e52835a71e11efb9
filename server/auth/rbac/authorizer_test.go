package rbac

import (
	"context"
	"errors"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"skiff/server/auth"
)

func decisionPolicy() *fakeLister {
	return &fakeLister{
		clusterRoles: []*rbacv1.ClusterRole{
			newClusterRole("pod-reader", rule(readVerbs(), "", "pods")),
			newClusterRole("node-reader", rule(readVerbs(), "", "nodes")),
			newClusterRole("secret-editor", rule(readWriteVerbs(), "", "secrets")),
			newClusterRole("one-configmap", named(rule(verbs("get", "update"), "", "configmaps"), "settings")),
			newClusterRole("pod-logs", rule(verbs("get"), "", "pods/log")),
			newClusterRole("any-scale", rule(verbs("get", "update"), "*", "*/scale")),
			newClusterRole("batch-all", rule(verbs("*"), "batch", "*")),
			newClusterRole("api-docs", urlRule(verbs("get"), "/apis/*", "/version")),
		},
		roles: []*rbacv1.Role{newRole("team", "cm-writer", rule(writeVerbs(), "", "configmaps"))},
		crbs: []*rbacv1.ClusterRoleBinding{
			newCRB("read-pods", "pod-reader", groupSubject("system:serviceaccounts:other"), userSubject("alice")),
			newCRB("readers", "node-reader", groupSubject("readers")),
			newCRB("robot", "pod-logs", saSubject("ci", "robot")),
			newCRB("nameless-sa", "node-reader", saSubject("", "robot")),
			newCRB("settings", "one-configmap", userSubject("carol")),
			newCRB("scalers", "any-scale", userSubject("dave")),
			newCRB("batch", "batch-all", userSubject("dave")),
			newCRB("docs", "api-docs", groupSubject("system:authenticated")),
			newCRB("dangling", "no-such-role", userSubject("erin")),
		},
		rbs: []*rbacv1.RoleBinding{
			newRB("team", "secrets", "ClusterRole", "secret-editor", userSubject("bob")),
			newRB("team", "cms", "Role", "cm-writer", saSubject("", "deployer")),
		},
	}
}

func TestAuthorizeDecisions(t *testing.T) {
	alice, bob, carol, dave := user("alice"), user("bob"), user("carol"), user("dave")
	robot := user("system:serviceaccount:ci:robot")
	deployer := user("system:serviceaccount:team:deployer")
	tests := []struct {
		name    string
		attrs   auth.Attributes
		allowed bool
		reason  string
	}{
		{"masters may do anything", res(user("root", auth.GroupMasters), "delete", "", "nodes", "", "n1"), true,
			`RBAC: allowed because user "root" is in group "system:masters"`},
		{"user bound by ClusterRoleBinding reads pods in any namespace", res(alice, "list", "", "pods", "x", ""), true,
			`RBAC: allowed by ClusterRoleBinding "read-pods" of ClusterRole "pod-reader" to User "alice"`},
		{"ClusterRoleBinding grants nothing beyond its rules", res(alice, "delete", "", "pods", "x", "p"), false, ""},
		{"group subject matches a member", res(user("zed", "readers"), "get", "", "nodes", "", "n1"), true,
			`RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "node-reader" to Group "readers"`},
		{"service account subject matches its user name", res(robot, "get", "", "pods/log", "ci", "p"), true,
			`RBAC: allowed by ClusterRoleBinding "robot" of ClusterRole "pod-logs" to ServiceAccount "robot/ci"`},
		{"service account of another namespace does not match", res(user("system:serviceaccount:cd:robot"), "get", "", "pods/log", "ci", "p"), false, ""},
		{"ClusterRoleBinding service account without namespace matches nobody", res(robot, "get", "", "nodes", "", "n1"), false, ""},
		{"RoleBinding to ClusterRole applies in its namespace", res(bob, "create", "", "secrets", "team", ""), true,
			`RBAC: allowed by RoleBinding "secrets/team" of ClusterRole "secret-editor" to User "bob"`},
		{"RoleBinding to ClusterRole does not apply in other namespaces", res(bob, "get", "", "secrets", "other", "s"), false, ""},
		{"RoleBinding to ClusterRole does not apply cluster-wide", res(bob, "list", "", "secrets", "", ""), false, ""},
		{"RoleBinding to Role with defaulted service account namespace", res(deployer, "update", "", "configmaps", "team", "c"), true,
			`RBAC: allowed by RoleBinding "cms/team" of Role "cm-writer" to ServiceAccount "deployer/team"`},
		{"resourceNames allow the named object", res(carol, "update", "", "configmaps", "a", "settings"), true,
			`RBAC: allowed by ClusterRoleBinding "settings" of ClusterRole "one-configmap" to User "carol"`},
		{"resourceNames refuse other objects", res(carol, "get", "", "configmaps", "a", "other"), false, ""},
		{"resourceNames refuse requests naming nothing", res(carol, "get", "", "configmaps", "a", ""), false, ""},
		{"subresource rule allows the subresource", res(robot, "get", "", "pods/log", "x", "p"), true,
			`RBAC: allowed by ClusterRoleBinding "robot" of ClusterRole "pod-logs" to ServiceAccount "robot/ci"`},
		{"subresource rule does not allow the resource", res(robot, "get", "", "pods", "x", "p"), false, ""},
		{"resource rule does not allow its subresources", res(alice, "get", "", "pods/log", "x", "p"), false, ""},
		{"star-slash rule allows that subresource of any resource", res(dave, "update", "apps", "deployments/scale", "x", "d"), true,
			`RBAC: allowed by ClusterRoleBinding "scalers" of ClusterRole "any-scale" to User "dave"`},
		{"star-slash rule does not allow the resource itself", res(dave, "update", "apps", "deployments", "x", "d"), false, ""},
		{"wildcard verb and resource cover a whole group", res(dave, "deletecollection", "batch", "cronjobs", "x", ""), true,
			`RBAC: allowed by ClusterRoleBinding "batch" of ClusterRole "batch-all" to User "dave"`},
		{"wildcard resource stays within its group", res(dave, "get", "apps", "deployments", "x", "d"), false, ""},
		{"nonResourceURL prefix matches below it", nonRes(user("u", "system:authenticated"), "get", "/apis/apps/v1"), true,
			`RBAC: allowed by ClusterRoleBinding "docs" of ClusterRole "api-docs" to Group "system:authenticated"`},
		{"nonResourceURL exact match", nonRes(user("u", "system:authenticated"), "get", "/version"), true,
			`RBAC: allowed by ClusterRoleBinding "docs" of ClusterRole "api-docs" to Group "system:authenticated"`},
		{"nonResourceURL does not match a sibling path", nonRes(user("u", "system:authenticated"), "get", "/api"), false, ""},
		{"nonResourceURL verb must match", nonRes(user("u", "system:authenticated"), "post", "/version"), false, ""},
		{"resource rules never allow non-resource paths", nonRes(alice, "get", "/pods"), false, ""},
		{"nobody bound is denied without a reason", res(user("nobody"), "get", "", "pods", "x", "p"), false, ""},
		{"dangling binding is named in the denial", res(user("erin"), "get", "", "pods", "x", "p"), false,
			`RBAC: clusterrole.rbac.authorization.k8s.io "no-such-role" not found`},
		{"request without user is denied", auth.Attributes{Verb: "get", ResourceRequest: true, Resource: "pods"}, false,
			"RBAC: request has no user"},
	}
	a := New(decisionPolicy())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allowed, reason, err := a.Authorize(context.Background(), tt.attrs)
			if err != nil {
				t.Fatalf("Authorize: %v", err)
			}
			if allowed != tt.allowed || reason != tt.reason {
				t.Errorf("Authorize = %v, %q; want %v, %q", allowed, reason, tt.allowed, tt.reason)
			}
		})
	}
}

func TestAuthorizeWithEmptyPolicyDeniesEveryone(t *testing.T) {
	a := New(&fakeLister{})
	for _, attrs := range []auth.Attributes{
		res(user("alice", auth.GroupAuthenticated), "get", "", "pods", "default", "p"),
		nonRes(user("anon", auth.GroupUnauthenticated), "get", "/healthz"),
	} {
		allowed, _, err := a.Authorize(context.Background(), attrs)
		if allowed || err != nil {
			t.Errorf("Authorize(%+v) = %v, %v; want denied without error", attrs, allowed, err)
		}
	}
}

func TestAuthorizeListerFailures(t *testing.T) {
	boom := errors.New("cache not synced")
	tests := []struct {
		name    string
		mutate  func(*fakeLister)
		attrs   auth.Attributes
		allowed bool
		wantErr bool
	}{
		{"a rule that could be read still allows", func(f *fakeLister) { f.rbErr = boom },
			res(user("alice"), "get", "", "pods", "team", "p"), true, false},
		{"a denial after a failed list is an error", func(f *fakeLister) { f.rbErr = boom },
			res(user("bob"), "get", "", "secrets", "team", "s"), false, true},
		{"a failed role lookup is an error, not a dangling binding", func(f *fakeLister) { f.getErr = boom },
			res(user("alice"), "get", "", "pods", "team", "p"), false, true},
		{"masters do not depend on the lister", func(f *fakeLister) { f.crbErr = boom },
			res(user("root", auth.GroupMasters), "get", "", "pods", "team", "p"), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := decisionPolicy()
			tt.mutate(f)
			allowed, _, err := New(f).Authorize(context.Background(), tt.attrs)
			if allowed != tt.allowed || (err != nil) != tt.wantErr {
				t.Fatalf("Authorize = %v, %v; want allowed=%v err=%v", allowed, err, tt.allowed, tt.wantErr)
			}
			if err != nil && !errors.Is(err, boom) {
				t.Errorf("error %v does not wrap the lister's", err)
			}
		})
	}
}

func TestRulesFor(t *testing.T) {
	tests := []struct {
		name       string
		user       *auth.User
		namespace  string
		want       []string // describeRule of each rule, in order
		incomplete bool
	}{
		{"cluster bindings only at cluster scope", user("bob"), "", nil, false},
		{"role bindings add their namespace's rules", user("bob"), "team",
			[]string{describeRule(rule(readWriteVerbs(), "", "secrets"))}, false},
		{"cluster rules come before namespace rules", user("system:serviceaccount:team:deployer", "system:authenticated"), "team",
			[]string{describeRule(urlRule(verbs("get"), "/apis/*", "/version")), describeRule(rule(writeVerbs(), "", "configmaps"))}, false},
		{"masters hold everything", user("root", auth.GroupMasters), "team",
			[]string{describeRule(fullAuthority()[0]), describeRule(fullAuthority()[1])}, false},
		{"dangling binding makes the answer incomplete", user("erin"), "", nil, true},
		{"no user has no rules", nil, "team", nil, false},
	}
	a := New(decisionPolicy())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := a.RulesFor(context.Background(), tt.user, tt.namespace)
			if (err != nil) != tt.incomplete {
				t.Fatalf("RulesFor error = %v; want incomplete=%v", err, tt.incomplete)
			}
			var got []string
			for _, r := range rules {
				got = append(got, describeRule(r))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("RulesFor =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestRulesForReturnsCopies(t *testing.T) {
	f := decisionPolicy()
	rules, err := New(f).RulesFor(context.Background(), user("bob"), "team")
	if err != nil || len(rules) == 0 {
		t.Fatalf("RulesFor = %v, %v", rules, err)
	}
	rules[0].Verbs[0] = "mutated"
	if got := f.clusterRoles[2].Rules[0].Verbs[0]; got != "get" {
		t.Errorf("caller's edit reached the cached role: verb is %q", got)
	}
}
