package rbac

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Covers reports whether owner grants at least everything servant grants,
// and if not, which of servant's rights are missing. Each servant rule is
// split into single-verb, single-group, single-resource, single-name (or
// single-URL, single-verb) pieces; a piece is covered when one owner rule
// covers it whole. This is upstream's comparison, so a user who holds the
// same rights spread over different rules is still recognised.
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var missing []rbacv1.PolicyRule
	for _, s := range servant {
		for _, piece := range breakdown(s) {
			if !anyRuleCovers(owner, &piece) {
				missing = append(missing, piece)
			}
		}
	}
	return len(missing) == 0, missing
}

// breakdown splits a rule into pieces of one verb each, paired with one
// group, resource and (if any) resource name, or with one non-resource URL.
func breakdown(r rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var pieces []rbacv1.PolicyRule
	names := r.ResourceNames
	if len(names) == 0 {
		names = []string{""}
	}
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				for _, n := range names {
					p := rbacv1.PolicyRule{Verbs: []string{v}, APIGroups: []string{g}, Resources: []string{res}}
					if n != "" {
						p.ResourceNames = []string{n}
					}
					pieces = append(pieces, p)
				}
			}
		}
	}
	for _, u := range r.NonResourceURLs {
		for _, v := range r.Verbs {
			pieces = append(pieces, rbacv1.PolicyRule{Verbs: []string{v}, NonResourceURLs: []string{u}})
		}
	}
	return pieces
}

func anyRuleCovers(owner []rbacv1.PolicyRule, piece *rbacv1.PolicyRule) bool {
	for i := range owner {
		if ruleCovers(&owner[i], piece) {
			return true
		}
	}
	return false
}

// ruleCovers reports whether owner covers piece, a rule from breakdown.
func ruleCovers(owner, piece *rbacv1.PolicyRule) bool {
	verbs := slices.Contains(owner.Verbs, rbacv1.VerbAll) || containsAll(owner.Verbs, piece.Verbs)
	groups := slices.Contains(owner.APIGroups, rbacv1.APIGroupAll) || containsAll(owner.APIGroups, piece.APIGroups)
	return verbs && groups &&
		resourcesCover(owner.Resources, piece.Resources) &&
		urlsCover(owner.NonResourceURLs, piece.NonResourceURLs) &&
		namesCover(owner.ResourceNames, piece.ResourceNames)
}

// namesCover: an owner without names covers any name; an owner with names
// covers only pieces naming one of them, never the unnamed piece (which
// stands for every object).
func namesCover(owner, piece []string) bool {
	if len(owner) == 0 {
		return true
	}
	return len(piece) > 0 && containsAll(owner, piece)
}

// resourcesCover also accepts "*/sub" in owner for any "res/sub" in piece.
func resourcesCover(owner, piece []string) bool {
	if slices.Contains(owner, rbacv1.ResourceAll) {
		return true
	}
	for _, p := range piece {
		if slices.Contains(owner, p) {
			continue
		}
		_, sub, ok := strings.Cut(p, "/")
		if !ok || !slices.Contains(owner, "*/"+sub) {
			return false
		}
	}
	return true
}

func urlsCover(owner, piece []string) bool {
	for _, p := range piece {
		if !slices.ContainsFunc(owner, func(o string) bool { return urlCovers(o, p) }) {
			return false
		}
	}
	return true
}

func containsAll(set, want []string) bool {
	for _, w := range want {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

// compactRules merges pieces from breakdown that differ only in their verb,
// so an error lists "pods: create, delete" once rather than once per verb.
func compactRules(pieces []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name, url string }
	index := map[key]int{}
	var out []rbacv1.PolicyRule
	for _, p := range pieces {
		k := key{first(p.APIGroups), first(p.Resources), first(p.ResourceNames), first(p.NonResourceURLs)}
		if i, ok := index[k]; ok {
			for _, v := range p.Verbs {
				if !slices.Contains(out[i].Verbs, v) {
					out[i].Verbs = append(out[i].Verbs, v)
				}
			}
			continue
		}
		index[k] = len(out)
		out = append(out, *p.DeepCopy())
	}
	for i := range out {
		slices.Sort(out[i].Verbs)
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// describeRule renders a rule compactly, omitting empty fields, in the form
// upstream's escalation errors use.
func describeRule(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
