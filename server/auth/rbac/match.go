package rbac

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"skiff/server/auth"
)

// RulesAllow reports whether any of rules grants the request described by
// attrs. It ignores who the user is: callers have already chosen the rules
// that apply to them.
func RulesAllow(attrs auth.Attributes, rules ...rbacv1.PolicyRule) bool {
	for i := range rules {
		if RuleAllows(attrs, &rules[i]) {
			return true
		}
	}
	return false
}

// RuleAllows reports whether rule grants the request described by attrs,
// with upstream's matching: "*" wildcards for verbs, groups and resources,
// "*/sub" for one subresource of every resource, resourceNames restricting
// the rule to requests that name one of them, and nonResourceURLs matched
// exactly or by a prefix ending in "*".
func RuleAllows(attrs auth.Attributes, rule *rbacv1.PolicyRule) bool {
	if !verbMatches(rule, attrs.Verb) {
		return false
	}
	if !attrs.ResourceRequest {
		return nonResourceURLMatches(rule, attrs.Path)
	}
	combined := attrs.Resource
	if attrs.Subresource != "" {
		combined = attrs.Resource + "/" + attrs.Subresource
	}
	return apiGroupMatches(rule, attrs.APIGroup) &&
		resourceMatches(rule, combined, attrs.Subresource) &&
		resourceNameMatches(rule, attrs.Name)
}

func verbMatches(rule *rbacv1.PolicyRule, verb string) bool {
	for _, v := range rule.Verbs {
		if v == rbacv1.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func apiGroupMatches(rule *rbacv1.PolicyRule, group string) bool {
	for _, g := range rule.APIGroups {
		if g == rbacv1.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

// resourceMatches takes the combined "resource/subresource" form because
// rules name subresources that way; subresource alone is needed for the
// "*/subresource" form.
func resourceMatches(rule *rbacv1.PolicyRule, combined, subresource string) bool {
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll || r == combined {
			return true
		}
		if subresource != "" && r == "*/"+subresource {
			return true
		}
	}
	return false
}

// resourceNameMatches lets a rule without resourceNames match everything,
// and a rule with them match only requests naming one; list, watch and
// create carry no name and so never match such a rule.
func resourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	if len(rule.ResourceNames) == 0 {
		return true
	}
	for _, n := range rule.ResourceNames {
		if n == name {
			return true
		}
	}
	return false
}

func nonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		if urlCovers(u, path) {
			return true
		}
	}
	return false
}

// urlCovers reports whether the rule URL pattern owner covers path: exact,
// or owner ends in "*" and path starts with what precedes it. A bare "*"
// therefore covers every path.
func urlCovers(owner, path string) bool {
	if owner == path {
		return true
	}
	return strings.HasSuffix(owner, "*") && strings.HasPrefix(path, strings.TrimRight(owner, "*"))
}
