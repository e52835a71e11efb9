package rbac

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"skiff/server/auth"
)

// bootstrapPolicy is a cluster fresh from bootstrap, with the aggregation
// controller's work done, and users granted view, edit and admin in "team".
func bootstrapPolicy(t *testing.T) *fakeLister {
	t.Helper()
	f := &fakeLister{}
	for _, r := range BootstrapClusterRoles() {
		f.clusterRoles = append(f.clusterRoles, &r)
	}
	settleAggregation(t, f.clusterRoles)
	for _, b := range BootstrapClusterRoleBindings() {
		f.crbs = append(f.crbs, &b)
	}
	for _, r := range BootstrapRoles() {
		f.roles = append(f.roles, &r)
	}
	for _, b := range BootstrapRoleBindings() {
		f.rbs = append(f.rbs, &b)
	}
	for role, name := range map[string]string{"view": "viewer", "edit": "editor", "admin": "adminer"} {
		f.rbs = append(f.rbs, newRB("team", role, "ClusterRole", role, userSubject(name)))
	}
	return f
}

// settleAggregation runs Aggregate over every role until nothing changes,
// as the controller does by reacting to its own updates.
func settleAggregation(t *testing.T, roles []*rbacv1.ClusterRole) {
	t.Helper()
	for range len(roles) + 1 {
		changed := false
		for _, r := range roles {
			if rules, c := Aggregate(r, roles); c {
				r.Rules, changed = rules, true
			}
		}
		if !changed {
			return
		}
	}
	t.Fatal("aggregation did not settle")
}

func TestBootstrapPolicyDecisions(t *testing.T) {
	authd := func(name string, groups ...string) *auth.User {
		return user(name, append(groups, auth.GroupAuthenticated)...)
	}
	viewer, editor, admin := authd("viewer"), authd("editor"), authd("adminer")
	anon := user(auth.UserAnonymous, auth.GroupUnauthenticated)
	sched, kcm := authd(UserKubeScheduler), authd(UserKubeControllerManager)
	node, proxy := authd("system:node:n1", auth.GroupNodes), authd(UserKubeProxy)
	tests := []struct {
		name    string
		attrs   auth.Attributes
		allowed bool
	}{
		{"view can get pods", res(viewer, "get", "", "pods", "team", "p"), true},
		{"view can read pod logs", res(viewer, "get", "", "pods/log", "team", "p"), true},
		{"view can list endpointslices", res(viewer, "list", "discovery.k8s.io", "endpointslices", "team", ""), true},
		{"view can get deployment status", res(viewer, "get", "apps", "deployments/status", "team", "d"), true},
		{"view cannot get secrets", res(viewer, "get", "", "secrets", "team", "s"), false},
		{"view cannot exec", res(viewer, "create", "", "pods/exec", "team", "p"), false},
		{"view cannot create pods", res(viewer, "create", "", "pods", "team", ""), false},
		{"view applies only in its namespace", res(viewer, "get", "", "pods", "other", "p"), false},
		{"edit can create deployments", res(editor, "create", "apps", "deployments", "team", ""), true},
		{"edit can read deployments through view", res(editor, "list", "apps", "deployments", "team", ""), true},
		{"edit can read secrets", res(editor, "get", "", "secrets", "team", "s"), true},
		{"edit can create service account tokens", res(editor, "create", "", "serviceaccounts/token", "team", "sa"), true},
		{"edit can scale statefulsets", res(editor, "update", "apps", "statefulsets/scale", "team", "s"), true},
		{"edit cannot write endpoints", res(editor, "create", "", "endpoints", "team", ""), false},
		{"edit cannot create rolebindings", res(editor, "create", rbacv1.GroupName, "rolebindings", "team", ""), false},
		{"admin can create rolebindings", res(admin, "create", rbacv1.GroupName, "rolebindings", "team", ""), true},
		{"admin can create localsubjectaccessreviews", res(admin, "create", "authorization.k8s.io", "localsubjectaccessreviews", "team", ""), true},
		{"admin can delete secrets through edit", res(admin, "delete", "", "secrets", "team", "s"), true},
		{"admin can watch pods through view", res(admin, "watch", "", "pods", "team", ""), true},
		{"admin cannot touch nodes", res(admin, "get", "", "nodes", "", "n1"), false},
		{"basic-user can create selfsubjectaccessreviews", res(authd("u"), "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", ""), true},
		{"basic-user can create selfsubjectrulesreviews", res(authd("u"), "create", "authorization.k8s.io", "selfsubjectrulesreviews", "", ""), true},
		{"basic-user can create selfsubjectreviews", res(authd("u"), "create", "authentication.k8s.io", "selfsubjectreviews", "", ""), true},
		{"authenticated users can discover APIs", nonRes(authd("u"), "get", "/apis/apps/v1"), true},
		{"anonymous can get /healthz", nonRes(anon, "get", "/healthz"), true},
		{"anonymous can get /version", nonRes(anon, "get", "/version"), true},
		{"anonymous cannot get /api", nonRes(anon, "get", "/api"), false},
		{"service accounts can get the issuer's OIDC discovery", nonRes(authd("system:serviceaccount:ns:sa", auth.GroupServiceAccounts), "get", "/.well-known/openid-configuration"), true},
		{"service accounts can get the issuer's keys", nonRes(authd("system:serviceaccount:ns:sa", auth.GroupServiceAccounts), "get", "/openid/v1/jwks"), true},
		{"other users cannot get the issuer's keys", nonRes(authd("u"), "get", "/openid/v1/jwks"), false},
		{"anonymous cannot list pods", res(anon, "list", "", "pods", "team", ""), false},
		{"anonymous cannot review itself", res(anon, "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", ""), false},
		{"monitoring can get /metrics", nonRes(user("prom", GroupMonitoring), "get", "/metrics"), true},
		{"others cannot get /metrics", nonRes(authd("u"), "get", "/metrics"), false},
		{"scheduler can bind pods", res(sched, "create", "", "pods/binding", "team", "p"), true},
		{"scheduler can renew its lease", res(sched, "update", "coordination.k8s.io", "leases", "kube-system", "kube-scheduler"), true},
		{"scheduler cannot renew other leases", res(sched, "update", "coordination.k8s.io", "leases", "kube-system", "kube-controller-manager"), false},
		{"scheduler cannot delete nodes", res(sched, "delete", "", "nodes", "", "n1"), false},
		{"scheduler can read the authentication configmap", res(sched, "get", "", "configmaps", "kube-system", "extension-apiserver-authentication"), true},
		{"controller manager can create replicasets", res(kcm, "create", "apps", "replicasets", "team", ""), true},
		{"controller manager can delete anything", res(kcm, "delete", "example.com", "widgets", "team", "w"), true},
		{"controller manager can escalate clusterroles", res(kcm, "escalate", rbacv1.GroupName, "clusterroles", "", "admin"), true},
		{"controller manager can sign kubelet serving certificates", res(kcm, "sign", "certificates.k8s.io", "signers", "", "kubernetes.io/kubelet-serving"), true},
		{"controller manager cannot impersonate", res(kcm, "impersonate", "", "users", "", "root"), false},
		{"controller manager cannot create clusterrolebindings", res(kcm, "create", rbacv1.GroupName, "clusterrolebindings", "", ""), false},
		{"node can update its status", res(node, "patch", "", "nodes/status", "", "n1"), true},
		{"node can evict pods", res(node, "create", "", "pods/eviction", "team", "p"), true},
		{"node can read secrets", res(node, "get", "", "secrets", "team", "s"), true},
		{"node can renew its lease", res(node, "update", "coordination.k8s.io", "leases", "kube-node-lease", "n1"), true},
		{"node can request service account tokens", res(node, "create", "", "serviceaccounts/token", "team", "sa"), true},
		{"node can create CSRs", res(node, "create", "certificates.k8s.io", "certificatesigningrequests", "", ""), true},
		{"node cannot delete nodes", res(node, "delete", "", "nodes", "", "n2"), false},
		{"node cannot create secrets", res(node, "create", "", "secrets", "team", ""), false},
		{"proxier can watch endpointslices", res(proxy, "watch", "discovery.k8s.io", "endpointslices", "", ""), true},
		{"proxier can record events", res(proxy, "create", "", "events", "default", ""), true},
		{"proxier cannot read secrets", res(proxy, "get", "", "secrets", "default", "s"), false},
	}
	a := New(bootstrapPolicy(t))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allowed, reason, err := a.Authorize(context.Background(), tt.attrs)
			if err != nil || allowed != tt.allowed {
				t.Errorf("Authorize = %v (%s), %v; want %v", allowed, reason, err, tt.allowed)
			}
		})
	}
}

func TestBootstrapAdminEscalation(t *testing.T) {
	a := New(bootstrapPolicy(t))
	ctx := context.Background()
	admin := user("adminer", auth.GroupAuthenticated)
	tests := []struct {
		name  string
		check func() error
		ok    bool
	}{
		{"admin may create a Role within its rights", func() error {
			return a.CanWriteRole(ctx, nil, admin, newRole("team", "r", rule(verbs("create", "delete"), "", "pods")))
		}, true},
		{"admin may not create a Role granting node access", func() error {
			return a.CanWriteRole(ctx, nil, admin, newRole("team", "r", rule(readVerbs(), "", "nodes")))
		}, false},
		{"admin may bind view in its namespace", func() error {
			return a.CanBind(ctx, nil, admin, "team", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"})
		}, true},
		{"admin may not bind view cluster-wide", func() error {
			return a.CanBind(ctx, nil, admin, "", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"})
		}, false},
		{"admin may not bind cluster-admin", func() error {
			return a.CanBind(ctx, nil, admin, "team", rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkEscalation(t, tt.check(), tt.ok) })
	}
}

func TestBootstrapObjectsAreMarkedAndConsistent(t *testing.T) {
	roles := map[string]bool{}
	for _, r := range BootstrapClusterRoles() {
		checkBootstrapMeta(t, "ClusterRole "+r.Name, r.Labels, r.Annotations)
		if roles[r.Name] {
			t.Errorf("ClusterRole %q listed twice", r.Name)
		}
		roles[r.Name] = true
		if len(r.Rules) == 0 && r.AggregationRule == nil {
			t.Errorf("ClusterRole %q grants nothing", r.Name)
		}
	}
	for _, b := range BootstrapClusterRoleBindings() {
		checkBootstrapMeta(t, "ClusterRoleBinding "+b.Name, b.Labels, b.Annotations)
		if b.RoleRef.Kind != "ClusterRole" || !roles[b.RoleRef.Name] || len(b.Subjects) == 0 {
			t.Errorf("ClusterRoleBinding %q: roleRef %+v, %d subjects", b.Name, b.RoleRef, len(b.Subjects))
		}
	}
	nsRoles := map[string]bool{}
	for _, r := range BootstrapRoles() {
		checkBootstrapMeta(t, "Role "+r.Name, r.Labels, r.Annotations)
		nsRoles[r.Namespace+"/"+r.Name] = true
	}
	for _, b := range BootstrapRoleBindings() {
		checkBootstrapMeta(t, "RoleBinding "+b.Name, b.Labels, b.Annotations)
		if b.RoleRef.Kind == "Role" && !nsRoles[b.Namespace+"/"+b.RoleRef.Name] {
			t.Errorf("RoleBinding %s/%s refers to missing Role %q", b.Namespace, b.Name, b.RoleRef.Name)
		}
	}
}

func checkBootstrapMeta(t *testing.T, what string, labels, annotations map[string]string) {
	t.Helper()
	if labels[BootstrapLabelKey] != BootstrapLabelValue || annotations[rbacv1.AutoUpdateAnnotationKey] != "true" {
		t.Errorf("%s: labels %v annotations %v lack the bootstrap marks", what, labels, annotations)
	}
}

func TestBootstrapReturnsFreshObjects(t *testing.T) {
	first := BootstrapClusterRoles()
	first[0].Rules[0].Verbs[0] = "mutated"
	first[0].Labels["extra"] = "x"
	second := BootstrapClusterRoles()
	if second[0].Rules[0].Verbs[0] != rbacv1.VerbAll || second[0].Labels["extra"] != "" {
		t.Errorf("a caller's edit leaked into the next call: %+v", second[0])
	}
}
