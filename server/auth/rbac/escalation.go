package rbac

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"skiff/server/auth"
)

// Decider is the API server's complete authorizer (RBAC plus whatever else
// it chains). The write checks ask it for the escalate and bind verbs, so
// those can be granted by any authorizer, as upstream allows.
type Decider interface {
	Authorize(ctx context.Context, attrs auth.Attributes) (allowed bool, reason string, err error)
}

// EscalationError refuses an RBAC write that would hand out rights its
// author does not have. The API server answers it with 403 Forbidden; any
// other error from the checks below means they could not be evaluated.
type EscalationError struct {
	User   string
	Groups []string
	// Missing are the rights the write would grant that the user lacks,
	// merged per resource. Empty when Reason explains the refusal instead.
	Missing []rbacv1.PolicyRule
	// Reason is set when the refusal is not about particular rules, such as
	// a binding to a role that does not exist.
	Reason string
	// Incomplete holds errors met while resolving the user's own rights;
	// they may be why some rights look missing.
	Incomplete error
}

func (e *EscalationError) Error() string {
	var b strings.Builder
	if e.Reason != "" {
		b.WriteString(e.Reason)
	} else {
		fmt.Fprintf(&b, "user %q (groups=%q) is attempting to grant RBAC permissions not currently held:", e.User, e.Groups)
		descs := make([]string, 0, len(e.Missing))
		for _, r := range e.Missing {
			descs = append(descs, describeRule(r))
		}
		slices.Sort(descs)
		for _, d := range slices.Compact(descs) {
			b.WriteString("\n" + d)
		}
	}
	if e.Incomplete != nil {
		fmt.Fprintf(&b, "; resolution errors: %v", e.Incomplete)
	}
	return b.String()
}

func (e *EscalationError) Unwrap() error { return e.Incomplete }

// ConfirmNoEscalation returns an *EscalationError unless user already holds
// every one of rules in namespace (cluster-wide rights only, for an empty
// namespace). Failures to read the user's own rights do not fail the check
// by themselves: rights are additive, so if what could be read covers the
// rules the write is safe.
func (a *Authorizer) ConfirmNoEscalation(ctx context.Context, user *auth.User, namespace string, rules []rbacv1.PolicyRule) error {
	if user == nil {
		return &EscalationError{Reason: "no user on the request"}
	}
	owned, resolveErr := a.RulesFor(ctx, user, namespace)
	if ok, missing := Covers(owned, rules); !ok {
		return &EscalationError{
			User:       user.Name,
			Groups:     slices.Clone(user.Groups),
			Missing:    compactRules(missing),
			Incomplete: resolveErr,
		}
	}
	return nil
}

// CanWriteRole decides whether user may create or update role: yes for
// system:masters, for holders of the escalate verb on it (asked of authz, or
// of a itself when authz is nil), and for users who already hold all of its
// rules in its namespace. The API server calls it after ordinary
// authorization of the create or update.
func (a *Authorizer) CanWriteRole(ctx context.Context, authz Decider, user *auth.User, role *rbacv1.Role) error {
	ok, authzErr := a.mayEscalate(ctx, authz, user, "roles", role.Namespace, role.Name)
	if ok {
		return nil
	}
	return withAuthzErr(a.ConfirmNoEscalation(ctx, user, role.Namespace, role.Rules), authzErr)
}

// CanWriteClusterRole is CanWriteRole for a ClusterRole, checked against
// cluster-wide rights. Setting an aggregationRule additionally needs full
// cluster-admin rights, because it can gather any rule in the cluster.
func (a *Authorizer) CanWriteClusterRole(ctx context.Context, authz Decider, user *auth.User, role *rbacv1.ClusterRole) error {
	ok, authzErr := a.mayEscalate(ctx, authz, user, "clusterroles", "", role.Name)
	if ok {
		return nil
	}
	if err := a.ConfirmNoEscalation(ctx, user, "", role.Rules); err != nil {
		return withAuthzErr(err, authzErr)
	}
	if role.AggregationRule == nil || len(role.AggregationRule.ClusterRoleSelectors) == 0 {
		return nil
	}
	if err := a.ConfirmNoEscalation(ctx, user, "", fullAuthority()); err != nil {
		var esc *EscalationError
		if errors.As(err, &esc) {
			esc.Missing = nil
			esc.Reason = "must have cluster-admin privileges to use the aggregationRule"
		}
		return withAuthzErr(err, authzErr)
	}
	return nil
}

// CanBind decides whether user may create or update a binding in namespace
// (empty for a ClusterRoleBinding) that refers to ref: yes for
// system:masters, for holders of the bind verb on the referenced role in
// that namespace (asked of authz, or of a when authz is nil), and for users
// who already hold all of the role's rules there. A reference to a role that
// does not exist is refused unless the bind verb allows it.
func (a *Authorizer) CanBind(ctx context.Context, authz Decider, user *auth.User, namespace string, ref rbacv1.RoleRef) error {
	if user == nil {
		return &EscalationError{Reason: "no user on the request"}
	}
	if user.InGroup(auth.GroupMasters) {
		return nil
	}
	var resource string
	switch ref.Kind {
	case "ClusterRole":
		resource = "clusterroles"
	case "Role":
		resource = "roles"
	default:
		return &EscalationError{User: user.Name, Groups: slices.Clone(user.Groups),
			Reason: fmt.Sprintf("unsupported role reference kind %q", ref.Kind)}
	}
	ok, authzErr := ask(ctx, a.decider(authz), user, "bind", resource, namespace, ref.Name)
	if ok {
		return nil
	}
	rules, err := a.roleRefRules(ctx, ref, namespace)
	var unresolved *unresolvedRoleError
	if errors.As(err, &unresolved) {
		return &EscalationError{User: user.Name, Groups: slices.Clone(user.Groups), Reason: unresolved.Error()}
	}
	if err != nil {
		return fmt.Errorf("rbac: checking bind of %s %q: %w", ref.Kind, ref.Name, err)
	}
	return withAuthzErr(a.ConfirmNoEscalation(ctx, user, namespace, rules), authzErr)
}

// mayEscalate reports whether user may write roles it does not hold.
func (a *Authorizer) mayEscalate(ctx context.Context, authz Decider, user *auth.User, resource, namespace, name string) (bool, error) {
	if user == nil {
		return false, nil
	}
	if user.InGroup(auth.GroupMasters) {
		return true, nil
	}
	return ask(ctx, a.decider(authz), user, "escalate", resource, namespace, name)
}

func (a *Authorizer) decider(authz Decider) Decider {
	if authz == nil {
		return a
	}
	return authz
}

// ask authorizes a special verb on an RBAC resource. An authorizer error
// counts as "no" so that the rule comparison still gets its chance; the
// error is returned for the refusal message.
func ask(ctx context.Context, authz Decider, user *auth.User, verb, resource, namespace, name string) (bool, error) {
	allowed, _, err := authz.Authorize(ctx, auth.Attributes{
		User:            user,
		Verb:            verb,
		ResourceRequest: true,
		APIGroup:        rbacv1.GroupName,
		APIVersion:      "*",
		Resource:        resource,
		Namespace:       namespace,
		Name:            name,
	})
	if err != nil {
		return false, fmt.Errorf("authorizing %s on %s: %w", verb, resource, err)
	}
	return allowed, nil
}

// withAuthzErr adds an authorizer failure to a refusal, since it may be
// why the special verb was not granted.
func withAuthzErr(err, authzErr error) error {
	var esc *EscalationError
	if authzErr == nil || !errors.As(err, &esc) {
		return err
	}
	esc.Incomplete = errors.Join(esc.Incomplete, authzErr)
	return err
}
