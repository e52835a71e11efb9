package audit

import (
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
)

func user(name string, groups ...string) *authenticationv1.UserInfo {
	return &authenticationv1.UserInfo{Username: name, Groups: groups}
}

func resourceReq(verb, group, resource, sub, ns, name string) Attributes {
	return Attributes{User: user("alice", "devs", "system:authenticated"), Verb: verb, ResourceRequest: true,
		APIGroup: group, APIVersion: "v1", Resource: resource, Subresource: sub, Namespace: ns, Name: name,
		Path: "/api/v1/" + resource}
}

func nonResourceReq(path string) Attributes {
	return Attributes{User: user("alice", "devs"), Verb: "get", Path: path}
}

func TestEvaluate_Rules_MatchAsUpstream(t *testing.T) {
	tests := []struct {
		name string
		rule PolicyRule
		req  Attributes
		want bool
	}{
		{"empty rule matches everything", PolicyRule{}, resourceReq("get", "", "pods", "", "ns", "p"), true},
		{"empty rule matches non-resource", PolicyRule{}, nonResourceReq("/healthz"), true},
		{"user listed", PolicyRule{Users: []string{"bob", "alice"}}, resourceReq("get", "", "pods", "", "ns", "p"), true},
		{"user not listed", PolicyRule{Users: []string{"bob"}}, resourceReq("get", "", "pods", "", "ns", "p"), false},
		{"users need a user", PolicyRule{Users: []string{"alice"}}, Attributes{Verb: "get", Path: "/api"}, false},
		{"group listed", PolicyRule{UserGroups: []string{"devs"}}, resourceReq("get", "", "pods", "", "ns", "p"), true},
		{"group not listed", PolicyRule{UserGroups: []string{"ops"}}, resourceReq("get", "", "pods", "", "ns", "p"), false},
		{"verb listed", PolicyRule{Verbs: []string{"create", "get"}}, resourceReq("get", "", "pods", "", "ns", "p"), true},
		{"verb not listed", PolicyRule{Verbs: []string{"create"}}, resourceReq("get", "", "pods", "", "ns", "p"), false},
		{"namespace listed", PolicyRule{Namespaces: []string{"ns"}}, resourceReq("get", "", "pods", "", "ns", "p"), true},
		{"namespace not listed", PolicyRule{Namespaces: []string{"other"}}, resourceReq("get", "", "pods", "", "ns", "p"), false},
		{"cluster scope is the empty namespace", PolicyRule{Namespaces: []string{""}}, resourceReq("get", "", "nodes", "", "", "n"), true},
		{"namespaces never match non-resource", PolicyRule{Namespaces: []string{""}}, nonResourceReq("/api"), false},
		{"core group resource", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods"}}}}, resourceReq("get", "", "pods", "", "ns", "p"), true},
		{"other group", PolicyRule{Resources: []GroupResources{{Group: "apps", Resources: []string{"pods"}}}}, resourceReq("get", "", "pods", "", "ns", "p"), false},
		{"group wildcard", PolicyRule{Resources: []GroupResources{{Group: "*", Resources: []string{"deployments"}}}}, resourceReq("get", "apps", "deployments", "", "ns", "d"), true},
		{"group without resources: all of it", PolicyRule{Resources: []GroupResources{{Group: "apps"}}}, resourceReq("get", "apps", "deployments", "scale", "ns", "d"), true},
		{"resource does not match its subresource", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods"}}}}, resourceReq("get", "", "pods", "log", "ns", "p"), false},
		{"resource/subresource", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods/log"}}}}, resourceReq("get", "", "pods", "log", "ns", "p"), true},
		{"*/subresource", PolicyRule{Resources: []GroupResources{{Resources: []string{"*/status"}}}}, resourceReq("update", "", "pods", "status", "ns", "p"), true},
		{"*/subresource not the resource", PolicyRule{Resources: []GroupResources{{Resources: []string{"*/status"}}}}, resourceReq("update", "", "pods", "", "ns", "p"), false},
		{"resource/* with subresource", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods/*"}}}}, resourceReq("get", "", "pods", "exec", "ns", "p"), true},
		{"resource/* with the resource", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods/*"}}}}, resourceReq("get", "", "pods", "", "ns", "p"), true},
		{"* with subresource", PolicyRule{Resources: []GroupResources{{Resources: []string{"*"}}}}, resourceReq("get", "", "pods", "log", "ns", "p"), true},
		{"resourceNames listed", PolicyRule{Resources: []GroupResources{{Resources: []string{"configmaps"}, ResourceNames: []string{"p"}}}}, resourceReq("get", "", "configmaps", "", "ns", "p"), true},
		{"resourceNames not listed", PolicyRule{Resources: []GroupResources{{Resources: []string{"configmaps"}, ResourceNames: []string{"q"}}}}, resourceReq("get", "", "configmaps", "", "ns", "p"), false},
		{"resources never match non-resource", PolicyRule{Resources: []GroupResources{{Group: "*"}}}, nonResourceReq("/api"), false},
		{"url exact", PolicyRule{NonResourceURLs: []string{"/healthz"}}, nonResourceReq("/healthz"), true},
		{"url exact, not a prefix", PolicyRule{NonResourceURLs: []string{"/healthz"}}, nonResourceReq("/healthz/etcd"), false},
		{"url trailing *", PolicyRule{NonResourceURLs: []string{"/healthz*"}}, nonResourceReq("/healthz/etcd"), true},
		{"url *", PolicyRule{NonResourceURLs: []string{"*"}}, nonResourceReq("/metrics"), true},
		{"urls never match resources", PolicyRule{NonResourceURLs: []string{"*"}}, resourceReq("get", "", "pods", "", "ns", "p"), false},
		{"all conditions must hold", PolicyRule{Users: []string{"alice"}, Verbs: []string{"delete"}}, resourceReq("get", "", "pods", "", "ns", "p"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rule.Level = LevelMetadata
			p := &Policy{Rules: []PolicyRule{tt.rule}}
			got := p.Evaluate(tt.req).Level == LevelMetadata
			if got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEvaluate_FirstMatchingRuleDecides_StagesAndManagedFieldsMerged(t *testing.T) {
	p := &Policy{
		OmitStages:        []Stage{StageRequestReceived},
		OmitManagedFields: true,
		Rules: []PolicyRule{
			{Level: LevelNone, Users: []string{"system:kube-proxy"}},
			{Level: LevelRequestResponse, Resources: []GroupResources{{Resources: []string{"secrets"}}}, OmitStages: []Stage{StageResponseStarted}, OmitManagedFields: new(false)},
			{Level: LevelMetadata},
		},
	}
	secrets := p.Evaluate(resourceReq("get", "", "secrets", "", "ns", "s"))
	if secrets.Level != LevelRequestResponse || secrets.OmitManagedFields {
		t.Errorf("secrets: %+v, want RequestResponse keeping managed fields", secrets)
	}
	if !slices.Contains(secrets.OmitStages, StageRequestReceived) || !slices.Contains(secrets.OmitStages, StageResponseStarted) {
		t.Errorf("secrets omit %v, want both the policy's and the rule's stages", secrets.OmitStages)
	}
	pods := p.Evaluate(resourceReq("get", "", "pods", "", "ns", "p"))
	if pods.Level != LevelMetadata || !pods.OmitManagedFields || !slices.Equal(pods.OmitStages, []Stage{StageRequestReceived}) {
		t.Errorf("pods: %+v", pods)
	}
	proxy := Attributes{User: user("system:kube-proxy"), Verb: "get", ResourceRequest: true, Resource: "secrets"}
	if got := p.Evaluate(proxy).Level; got != LevelNone {
		t.Errorf("kube-proxy: %s, want None (first rule)", got)
	}
	if got := (&Policy{Rules: []PolicyRule{{Level: LevelMetadata, Verbs: []string{"create"}}}}).Evaluate(proxy).Level; got != LevelNone {
		t.Errorf("no rule matched: %s, want None", got)
	}
}

func TestParsePolicy_ValidFile_Decodes(t *testing.T) {
	p, warnings, err := ParsePolicy([]byte(`
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["configmaps", "pods/log"]
    resourceNames: ["a"]
  namespaces: ["default"]
  omitManagedFields: true
- level: Metadata
`))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("ParsePolicy: %v (warnings %v)", err, warnings)
	}
	if len(p.Rules) != 3 || p.Rules[1].Resources[0].ResourceNames[0] != "a" || !*p.Rules[1].OmitManagedFields || p.OmitStages[0] != StageRequestReceived {
		t.Errorf("decoded %+v", p)
	}
}

func TestParsePolicy_UnknownField_WarnsAndLoads(t *testing.T) {
	p, warnings, err := ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  levle: None\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "levle") || len(p.Rules) != 1 {
		t.Errorf("warnings %v, rules %v: want one warning naming the field", warnings, p.Rules)
	}
}

func TestParsePolicy_BadPolicy_ErrorNamesTheField(t *testing.T) {
	head := "apiVersion: audit.k8s.io/v1\nkind: Policy\n"
	tests := []struct {
		name, doc, want string
	}{
		{"unknown level", head + "rules:\n- level: Everything\n", "rules[0].level: Unsupported value: \"Everything\""},
		{"missing level", head + "rules:\n- verbs: [get]\n", "rules[0].level: Required value"},
		{"bad rule stage", head + "rules:\n- level: None\n- level: Metadata\n  omitStages: [Sometimes]\n", "rules[1].omitStages[0]: Invalid value: \"Sometimes\""},
		{"bad policy stage", head + "omitStages: [Later]\nrules:\n- level: None\n", "omitStages[0]: Invalid value: \"Later\""},
		{"url without slash", head + "rules:\n- level: None\n  nonResourceURLs: [healthz]\n", "rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character"},
		{"url inner wildcard", head + "rules:\n- level: None\n  nonResourceURLs: [\"/a*/b\"]\n", "wildcards '*' must be the final character"},
		{"urls and resources", head + "rules:\n- level: None\n  nonResourceURLs: [\"/a\"]\n  namespaces: [x]\n", "rules[0].nonResourceURLs: Invalid value"},
		{"bad group", head + "rules:\n- level: None\n  resources: [{group: \"apps/v1\"}]\n", "rules[0].resources.group: Invalid value: \"apps/v1\""},
		{"names without resources", head + "rules:\n- level: None\n  resources: [{resourceNames: [a]}]\n", "rules[0].resources.resourceNames: Invalid value"},
		{"no rules", head + "rules: []\n", "0 rules"},
		{"wrong version", "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules:\n- level: None\n", "unknown group version"},
		{"wrong kind", "apiVersion: audit.k8s.io/v1\nkind: Event\nrules:\n- level: None\n", "kind \"Event\" is not Policy"},
		{"no kind", "rules:\n- level: None\n", "apiVersion and kind are required"},
		{"wrong type", head + "rules:\n- level: 3\n", "level"},
		{"not yaml", "rules: [\n", "failed decoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParsePolicy([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
