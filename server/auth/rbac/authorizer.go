// Package rbac authorizes requests with Kubernetes' RBAC model
// (rbac.authorization.k8s.io/v1): Roles and ClusterRoles hold rules,
// RoleBindings and ClusterRoleBindings grant them to users, groups and
// service accounts. It also holds the privilege-escalation checks the API
// server runs when RBAC objects are written, ClusterRole aggregation, and the
// bootstrap policy a new cluster starts with.
package rbac

import (
	"context"
	"errors"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"skiff/server/auth"
)

// Authorizer decides requests from the RBAC objects its Lister returns. It
// holds no state of its own, so policy changes apply on the next request.
type Authorizer struct {
	lister Lister
}

// New returns an Authorizer reading policy from l.
func New(l Lister) *Authorizer {
	return &Authorizer{lister: l}
}

// Authorize reports whether the request is allowed. The reason names the
// binding, role and subject that allowed it, in upstream's words, so audit
// logs read the same as on a Kubernetes cluster.
//
// A denial is the normal outcome when nothing grants the request and comes
// with a nil error. Bindings whose role does not exist are skipped and named
// in the reason, as upstream does. err is non-nil only when the Lister failed
// and no rule that could be read allowed the request: rules are purely
// additive, so an allow found despite a failure is still sound, but a denial
// might be wrong and the caller should answer with a server error.
func (a *Authorizer) Authorize(ctx context.Context, attrs auth.Attributes) (bool, string, error) {
	u := attrs.User
	if u == nil {
		return false, "RBAC: request has no user", nil
	}
	if u.InGroup(auth.GroupMasters) {
		// system:masters is the break-glass group: it must work even when the
		// RBAC objects are missing or broken, so it is decided before them.
		return true, fmt.Sprintf("RBAC: allowed because user %q is in group %q", u.Name, auth.GroupMasters), nil
	}
	var reason string
	allowed := false
	res := a.visitRules(ctx, u, attrs.Namespace, func(src *ruleSource, rule *rbacv1.PolicyRule) bool {
		if RuleAllows(attrs, rule) {
			allowed = true
			reason = "RBAC: allowed by " + src.String()
			return false
		}
		return true
	})
	if allowed {
		return true, reason, nil
	}
	if len(res.failed) > 0 {
		return false, "", fmt.Errorf("rbac: resolving rules for user %q: %w", u.Name, errors.Join(res.failed...))
	}
	if len(res.unresolved) > 0 {
		return false, "RBAC: " + joinErrors(res.unresolved), nil
	}
	return false, "", nil
}

// RulesFor returns the rules that apply to user in namespace: those of the
// ClusterRoleBindings, and for a non-empty namespace those of the
// RoleBindings there. It serves SelfSubjectRulesReview (kubectl auth can-i
// --list). Members of system:masters get rules granting everything, matching
// what Authorize does for them.
//
// On error the returned rules are still valid but may be incomplete (a role
// that does not exist, or a Lister failure); SelfSubjectRulesReview reports
// that as incomplete with the error as its evaluation error.
func (a *Authorizer) RulesFor(ctx context.Context, user *auth.User, namespace string) ([]rbacv1.PolicyRule, error) {
	if user == nil {
		return nil, nil
	}
	if user.InGroup(auth.GroupMasters) {
		return fullAuthority(), nil
	}
	var rules []rbacv1.PolicyRule
	res := a.visitRules(ctx, user, namespace, func(_ *ruleSource, rule *rbacv1.PolicyRule) bool {
		rules = append(rules, *rule.DeepCopy())
		return true
	})
	if err := res.err(); err != nil {
		return rules, fmt.Errorf("rbac: rules for user %q are incomplete: %w", user.Name, err)
	}
	return rules, nil
}

// fullAuthority is what cluster-admin holds: everything.
func fullAuthority() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{Verbs: []string{rbacv1.VerbAll}, APIGroups: []string{rbacv1.APIGroupAll}, Resources: []string{rbacv1.ResourceAll}},
		{Verbs: []string{rbacv1.VerbAll}, NonResourceURLs: []string{rbacv1.NonResourceAll}},
	}
}

func joinErrors(errs []error) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, ", ")
}
