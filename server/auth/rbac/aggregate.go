package rbac

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Aggregate computes the rules target should hold under its
// aggregationRule: those of every other ClusterRole in all whose labels
// match any of its selectors, each rule once, ordered by selector, then by
// role name, then by position in the role, so repeated runs produce the same
// list and do not cause needless writes. changed reports whether that
// differs from target.Rules; the aggregation controller writes target.Rules
// only then.
//
// A target without an aggregationRule keeps its own rules. An invalid
// selector, which API validation rejects anyway, matches nothing. Roles that
// are themselves aggregated contribute the rules they currently hold, so
// nested aggregation (view into edit into admin) settles as the controller
// reacts to each update.
func Aggregate(target *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, bool) {
	if target == nil {
		return nil, false
	}
	if target.AggregationRule == nil {
		return target.Rules, false
	}
	sorted := make([]*rbacv1.ClusterRole, 0, len(all))
	for _, r := range all {
		if r != nil && r.Name != target.Name {
			sorted = append(sorted, r)
		}
	}
	slices.SortFunc(sorted, func(x, y *rbacv1.ClusterRole) int { return strings.Compare(x.Name, y.Name) })

	var rules []rbacv1.PolicyRule
	for i := range target.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&target.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			continue
		}
		for _, r := range sorted {
			if !sel.Matches(labels.Set(r.Labels)) {
				continue
			}
			for j := range r.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return rulesEqual(&have, &r.Rules[j]) }) {
					rules = append(rules, *r.Rules[j].DeepCopy())
				}
			}
		}
	}
	return rules, !ruleListsEqual(rules, target.Rules)
}

func ruleListsEqual(a, b []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(a, b, func(x, y rbacv1.PolicyRule) bool { return rulesEqual(&x, &y) })
}

// rulesEqual compares field by field in order, treating nil and empty
// lists alike since both mean "none" once stored.
func rulesEqual(a, b *rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) &&
		slices.Equal(a.APIGroups, b.APIGroups) &&
		slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}
