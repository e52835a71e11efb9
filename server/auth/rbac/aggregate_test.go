package rbac

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func labelled(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	r := newClusterRole(name, rules...)
	r.Labels = labels
	return r
}

func aggregating(name string, rules []rbacv1.PolicyRule, selectors ...metav1.LabelSelector) *rbacv1.ClusterRole {
	r := newClusterRole(name, rules...)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: selectors}
	return r
}

func matchLabel(k, v string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

func TestAggregate(t *testing.T) {
	pods := rule(readVerbs(), "", "pods")
	secrets := rule(readVerbs(), "", "secrets")
	nodes := rule(readVerbs(), "", "nodes")
	podsNilNames := pods
	podsNilNames.ResourceNames = []string{}
	all := []*rbacv1.ClusterRole{
		labelled("z-pods-again", map[string]string{"agg": "a"}, podsNilNames, nodes),
		labelled("a-pods", map[string]string{"agg": "a"}, pods),
		labelled("m-secrets", map[string]string{"agg": "b"}, secrets),
		labelled("unlabelled", nil, rule(verbs("*"), "*", "*")),
		labelled("other-value", map[string]string{"agg": "c"}, rule(verbs("delete"), "", "pods")),
		nil,
	}
	tests := []struct {
		name    string
		target  *rbacv1.ClusterRole
		want    []rbacv1.PolicyRule
		changed bool
	}{
		{"matching roles' rules are gathered by role name and deduplicated",
			aggregating("t", nil, matchLabel("agg", "a")), []rbacv1.PolicyRule{pods, nodes}, true},
		{"selectors are applied in order",
			aggregating("t", nil, matchLabel("agg", "b"), matchLabel("agg", "a")), []rbacv1.PolicyRule{secrets, pods, nodes}, true},
		{"a role matched by two selectors counts once",
			aggregating("t", nil, matchLabel("agg", "a"), metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "agg", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}),
			[]rbacv1.PolicyRule{pods, nodes, secrets}, true},
		{"rules already in place are unchanged",
			aggregating("t", []rbacv1.PolicyRule{pods, nodes}, matchLabel("agg", "a")), []rbacv1.PolicyRule{pods, nodes}, false},
		{"stale rules are replaced",
			aggregating("t", []rbacv1.PolicyRule{secrets}, matchLabel("agg", "a")), []rbacv1.PolicyRule{pods, nodes}, true},
		{"nothing matching clears the rules",
			aggregating("t", []rbacv1.PolicyRule{secrets}, matchLabel("agg", "none")), nil, true},
		{"nothing matching and nothing held is no change",
			aggregating("t", nil, matchLabel("agg", "none")), nil, false},
		{"a role does not aggregate itself",
			labelledAggregating("z-pods-again", map[string]string{"agg": "a"}, matchLabel("agg", "a")), []rbacv1.PolicyRule{pods}, true},
		{"a role without aggregationRule keeps its rules",
			newClusterRole("plain", secrets), []rbacv1.PolicyRule{secrets}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := Aggregate(tt.target, all)
			if changed != tt.changed || !ruleListsEqual(got, tt.want) {
				t.Errorf("Aggregate = %s, %v; want %s, %v", describeRules(got), changed, describeRules(tt.want), tt.changed)
			}
		})
	}
}

func labelledAggregating(name string, labels map[string]string, selectors ...metav1.LabelSelector) *rbacv1.ClusterRole {
	r := aggregating(name, nil, selectors...)
	r.Labels = labels
	return r
}

func TestAggregateIsIndependentOfInputOrderAndCopies(t *testing.T) {
	a := labelled("a", map[string]string{"x": "1"}, rule(verbs("get"), "", "pods"))
	b := labelled("b", map[string]string{"x": "1"}, rule(verbs("get"), "", "services"))
	target := aggregating("t", nil, matchLabel("x", "1"))
	first, _ := Aggregate(target, []*rbacv1.ClusterRole{a, b})
	second, _ := Aggregate(target, []*rbacv1.ClusterRole{b, a})
	if !ruleListsEqual(first, second) {
		t.Fatalf("order depends on input: %s vs %s", describeRules(first), describeRules(second))
	}
	first[0].Verbs[0] = "mutated"
	if a.Rules[0].Verbs[0] != "get" {
		t.Errorf("aggregated rules alias the source role's")
	}
}

func describeRules(rules []rbacv1.PolicyRule) string {
	var s []string
	for _, r := range rules {
		s = append(s, describeRule(r))
	}
	return "[" + strings.Join(s, " ") + "]"
}
