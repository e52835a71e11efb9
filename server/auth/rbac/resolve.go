package rbac

import (
	"context"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"

	"skiff/server/auth"
)

// serviceAccountPrefix starts the user name a service account token
// authenticates as: system:serviceaccount:<namespace>:<name>.
const serviceAccountPrefix = "system:serviceaccount:"

// ruleSource says where a rule came from, for allow reasons. It is only
// formatted when a rule actually allows, which keeps the hot path free of
// string building.
type ruleSource struct {
	bindingKind string
	bindingName string
	// bindingNamespace is empty for ClusterRoleBindings.
	bindingNamespace string
	roleRef          rbacv1.RoleRef
	subject          *rbacv1.Subject
}

func (s *ruleSource) String() string {
	name := s.bindingName
	if s.bindingNamespace != "" {
		name += "/" + s.bindingNamespace
	}
	return fmt.Sprintf("%s %q of %s %q to %s", s.bindingKind, name, s.roleRef.Kind, s.roleRef.Name,
		describeSubject(s.subject, s.bindingNamespace))
}

func describeSubject(s *rbacv1.Subject, bindingNamespace string) string {
	if s.Kind != rbacv1.ServiceAccountKind {
		return fmt.Sprintf("%s %q", s.Kind, s.Name)
	}
	ns := s.Namespace
	if ns == "" {
		ns = bindingNamespace
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
}

// resolution collects what went wrong while finding a user's rules.
// Unresolved references are a normal state of a cluster (a binding created
// before its role, or left after it); failures mean the Lister could not
// answer, so a denial may be wrong.
type resolution struct {
	unresolved []error
	failed     []error
}

func (r *resolution) add(err error) {
	var missing *unresolvedRoleError
	if errors.As(err, &missing) {
		r.unresolved = append(r.unresolved, err)
		return
	}
	r.failed = append(r.failed, err)
}

func (r *resolution) err() error {
	return errors.Join(append(append([]error{}, r.unresolved...), r.failed...)...)
}

// unresolvedRoleError is a binding whose roleRef names no existing role, or
// names a kind that cannot be referenced there.
type unresolvedRoleError struct {
	msg string
}

func (e *unresolvedRoleError) Error() string { return e.msg }

// visitFunc receives each rule that applies; returning false stops the walk.
type visitFunc func(src *ruleSource, rule *rbacv1.PolicyRule) bool

// visitRules walks, in upstream's order, the rules of every
// ClusterRoleBinding and then of every RoleBinding in namespace that applies
// to u.
func (a *Authorizer) visitRules(ctx context.Context, u *auth.User, namespace string, visit visitFunc) resolution {
	var res resolution
	crbs, err := a.lister.ListClusterRoleBindings(ctx)
	if err != nil {
		res.add(fmt.Errorf("listing clusterrolebindings: %w", err))
	}
	for _, b := range crbs {
		if b == nil {
			continue
		}
		src := ruleSource{bindingKind: "ClusterRoleBinding", bindingName: b.Name, roleRef: b.RoleRef}
		if !a.visitBinding(ctx, u, &src, b.Subjects, "", visit, &res) {
			return res
		}
	}
	if namespace == "" {
		return res
	}
	rbs, err := a.lister.ListRoleBindings(ctx, namespace)
	if err != nil {
		res.add(fmt.Errorf("listing rolebindings in namespace %q: %w", namespace, err))
	}
	for _, b := range rbs {
		if b == nil {
			continue
		}
		src := ruleSource{bindingKind: "RoleBinding", bindingName: b.Name, bindingNamespace: namespace, roleRef: b.RoleRef}
		if !a.visitBinding(ctx, u, &src, b.Subjects, namespace, visit, &res) {
			return res
		}
	}
	return res
}

// visitBinding hands visit the rules of one binding if it applies to u, and
// reports whether the walk should go on.
func (a *Authorizer) visitBinding(ctx context.Context, u *auth.User, src *ruleSource, subjects []rbacv1.Subject,
	namespace string, visit visitFunc, res *resolution) bool {
	i, ok := appliesTo(u, subjects, namespace)
	if !ok {
		return true
	}
	rules, err := a.roleRefRules(ctx, src.roleRef, namespace)
	if err != nil {
		res.add(err)
		return true
	}
	src.subject = &subjects[i]
	for j := range rules {
		if !visit(src, &rules[j]) {
			return false
		}
	}
	return true
}

// roleRefRules returns the rules a binding in namespace (empty for a
// ClusterRoleBinding) refers to. A RoleBinding may name a Role in its own
// namespace or a ClusterRole, whose rules then count only in that namespace
// because the caller only asks for namespace's RoleBindings.
func (a *Authorizer) roleRefRules(ctx context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch {
	case ref.Kind == "ClusterRole":
		role, err := a.lister.GetClusterRole(ctx, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("getting clusterrole %q: %w", ref.Name, err)
		}
		if role == nil {
			return nil, &unresolvedRoleError{fmt.Sprintf("clusterrole.rbac.authorization.k8s.io %q not found", ref.Name)}
		}
		return role.Rules, nil
	case ref.Kind == "Role" && namespace != "":
		role, err := a.lister.GetRole(ctx, namespace, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("getting role %q in namespace %q: %w", ref.Name, namespace, err)
		}
		if role == nil {
			return nil, &unresolvedRoleError{fmt.Sprintf("role.rbac.authorization.k8s.io %q not found", ref.Name)}
		}
		return role.Rules, nil
	default:
		return nil, &unresolvedRoleError{fmt.Sprintf("unsupported role reference kind %q", ref.Kind)}
	}
}

// appliesTo returns the index of the first subject that is u.
func appliesTo(u *auth.User, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i := range subjects {
		if subjectIsUser(u, &subjects[i], namespace) {
			return i, true
		}
	}
	return 0, false
}

func subjectIsUser(u *auth.User, s *rbacv1.Subject, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.Name == s.Name
	case rbacv1.GroupKind:
		return u.InGroup(s.Name)
	case rbacv1.ServiceAccountKind:
		// A RoleBinding may leave the service account's namespace out to
		// mean its own; a ClusterRoleBinding has none to lend.
		ns := s.Namespace
		if ns == "" {
			ns = namespace
		}
		if ns == "" {
			return false
		}
		return u.Name == serviceAccountPrefix+ns+":"+s.Name
	default:
		return false
	}
}
