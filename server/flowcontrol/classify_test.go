package flowcontrol

import (
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"skiff/server/auth"
	"skiff/server/flowcontrol/bootstrap"
)

func bootstrapSnapshot(t *testing.T) *snapshot {
	t.Helper()
	c := New(Config{})
	c.rebuild(append(bootstrap.MandatoryFlowSchemas(), bootstrap.SuggestedFlowSchemas()...),
		append(bootstrap.MandatoryPriorityLevelConfigurations(), bootstrap.SuggestedPriorityLevelConfigurations()...))
	return c.snap.Load()
}

func user(name string, groups ...string) *auth.User {
	return &auth.User{Name: name, Groups: append(groups, auth.GroupAuthenticated)}
}

func resourceReq(u *auth.User, verb, group, resource, sub, namespace string) auth.Attributes {
	return auth.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "v1",
		Resource: resource, Subresource: sub, Namespace: namespace}
}

func TestClassify_BootstrapConfiguration_UpstreamSchemas(t *testing.T) {
	snap := bootstrapSnapshot(t)
	node := user("system:node:n1", auth.GroupNodes)
	tests := []struct {
		name       string
		a          auth.Attributes
		wantSchema string
		wantLevel  string
	}{
		{"masters are exempt", resourceReq(user("admin", auth.GroupMasters), "delete", "", "pods", "", "default"), "exempt", "exempt"},
		{"anonymous health probe is exempt", auth.Attributes{User: &auth.User{Name: auth.UserAnonymous, Groups: []string{auth.GroupUnauthenticated}}, Verb: "get", Path: "/readyz"}, "probes", "exempt"},
		{"a probe must be a get", auth.Attributes{User: user("x"), Verb: "post", Path: "/healthz"}, "global-default", "global-default"},
		{"node status goes to node-high", resourceReq(node, "patch", "", "nodes", "status", ""), "system-node-high", "node-high"},
		{"node lease goes to node-high", resourceReq(node, "update", "coordination.k8s.io", "leases", "", "kube-node-lease"), "system-node-high", "node-high"},
		{"node reading pods goes to system", resourceReq(node, "list", "", "pods", "", ""), "system-nodes", "system"},
		{"controller-manager lease is leader election", resourceReq(user("system:kube-controller-manager"), "update", "coordination.k8s.io", "leases", "", "kube-system"), "system-leader-election", "leader-election"},
		{"controller-manager lease watch is not leader election", resourceReq(user("system:kube-controller-manager"), "watch", "coordination.k8s.io", "leases", "", "kube-system"), "kube-controller-manager", "workload-high"},
		{"controller-manager other work", resourceReq(user("system:kube-controller-manager"), "list", "apps", "deployments", "", ""), "kube-controller-manager", "workload-high"},
		{"scheduler", resourceReq(user("system:kube-scheduler"), "create", "", "pods", "binding", "default"), "kube-scheduler", "workload-high"},
		{"kube-system service account", resourceReq(user("system:serviceaccount:kube-system:coredns", auth.GroupServiceAccounts), "list", "", "endpoints", "", ""), "kube-system-service-accounts", "workload-high"},
		{"other service account", resourceReq(user("system:serviceaccount:default:app", auth.GroupServiceAccounts), "get", "", "configmaps", "", "default"), "service-accounts", "workload-low"},
		{"a name that only looks like kube-system's", resourceReq(user("system:serviceaccount:kube-systemx:a", auth.GroupServiceAccounts), "get", "", "configmaps", "", "default"), "service-accounts", "workload-low"},
		{"anyone else", resourceReq(user("alice"), "get", "", "pods", "", "default"), "global-default", "global-default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, lvl := snap.classify(&tt.a)
			if fs.Name != tt.wantSchema || lvl.name != tt.wantLevel {
				t.Errorf("classified to %s/%s, want %s/%s", fs.Name, lvl.name, tt.wantSchema, tt.wantLevel)
			}
		})
	}
}

func TestMatchesFlowSchema_Rules_AsUpstream(t *testing.T) {
	rule := func(subjects []flowcontrolv1.Subject, rr []flowcontrolv1.ResourcePolicyRule, nr []flowcontrolv1.NonResourcePolicyRule) *flowcontrolv1.FlowSchema {
		return &flowcontrolv1.FlowSchema{Spec: flowcontrolv1.FlowSchemaSpec{Rules: []flowcontrolv1.PolicyRulesWithSubjects{{Subjects: subjects, ResourceRules: rr, NonResourceRules: nr}}}}
	}
	userSubject := func(n string) []flowcontrolv1.Subject {
		return []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: n}}}
	}
	saSubject := func(ns, n string) []flowcontrolv1.Subject {
		return []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: ns, Name: n}}}
	}
	podsIn := func(ns ...string) []flowcontrolv1.ResourcePolicyRule {
		return []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, Namespaces: ns}}
	}
	alice := user("alice")
	tests := []struct {
		name string
		fs   *flowcontrolv1.FlowSchema
		a    auth.Attributes
		want bool
	}{
		{"user and resource match", rule(userSubject("alice"), podsIn("default"), nil), resourceReq(alice, "get", "", "pods", "", "default"), true},
		{"other user", rule(userSubject("bob"), podsIn("default"), nil), resourceReq(alice, "get", "", "pods", "", "default"), false},
		{"user wildcard", rule(userSubject("*"), podsIn("default"), nil), resourceReq(alice, "get", "", "pods", "", "default"), true},
		{"other verb", rule(userSubject("alice"), podsIn("default"), nil), resourceReq(alice, "list", "", "pods", "", "default"), false},
		{"other namespace", rule(userSubject("alice"), podsIn("default"), nil), resourceReq(alice, "get", "", "pods", "", "other"), false},
		{"every namespace", rule(userSubject("alice"), podsIn("*"), nil), resourceReq(alice, "get", "", "pods", "", "other"), true},
		{"cluster scope needs clusterScope", rule(userSubject("alice"), podsIn("*"), nil), resourceReq(alice, "get", "", "pods", "", ""), false},
		{"subresource must be named", rule(userSubject("alice"), podsIn("*"), nil), resourceReq(alice, "get", "", "pods", "log", "default"), false},
		{"other group", rule(userSubject("alice"), podsIn("*"), nil), resourceReq(alice, "get", "apps", "pods", "", "default"), false},
		{"resource request ignores non-resource rules", rule(userSubject("alice"), nil, []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}), resourceReq(alice, "get", "", "pods", "", "default"), false},
		{"non-resource prefix", rule(userSubject("alice"), nil, []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}}), auth.Attributes{User: alice, Verb: "get", Path: "/apis/apps"}, true},
		{"non-resource exact only", rule(userSubject("alice"), nil, []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/version"}}}), auth.Attributes{User: alice, Verb: "get", Path: "/versions"}, false},
		{"service account by name", rule(saSubject("ns1", "sa1"), podsIn("*"), nil), resourceReq(user("system:serviceaccount:ns1:sa1"), "get", "", "pods", "", "x"), true},
		{"service account other name", rule(saSubject("ns1", "sa1"), podsIn("*"), nil), resourceReq(user("system:serviceaccount:ns1:sa2"), "get", "", "pods", "", "x"), false},
		{"service account wildcard in namespace", rule(saSubject("ns1", "*"), podsIn("*"), nil), resourceReq(user("system:serviceaccount:ns1:any"), "get", "", "pods", "", "x"), true},
		{"service account wildcard other namespace", rule(saSubject("ns1", "*"), podsIn("*"), nil), resourceReq(user("system:serviceaccount:ns2:any"), "get", "", "pods", "", "x"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matchesFlowSchema(&tt.a, tt.fs); got != tt.want {
				t.Errorf("matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRebuild_SchemaWithMissingLevel_IsDanglingAndSkipped(t *testing.T) {
	c := New(Config{})
	fs := &flowcontrolv1.FlowSchema{}
	fs.Name = "mine"
	fs.Spec = flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 100, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "nowhere"},
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "*"}}},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}}}}
	found := c.rebuild([]*flowcontrolv1.FlowSchema{fs}, nil)
	if found["mine"] {
		t.Fatalf("found = %v, want mine missing its level", found)
	}
	got, lvl := c.snap.Load().classify(&auth.Attributes{User: user("alice"), Verb: "get", Path: "/version"})
	if got.Name != "catch-all" || lvl.name != "catch-all" {
		t.Errorf("classified to %s/%s, want the imagined catch-all", got.Name, lvl.name)
	}
	if cond := danglingCondition(fs, !found["mine"], time.Now()); cond == nil || cond.Status != flowcontrolv1.ConditionTrue || cond.Reason != "NotFound" {
		t.Errorf("dangling condition = %+v, want True/NotFound", cond)
	}
}
