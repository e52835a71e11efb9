package admission

import (
	"context"
	"errors"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/apiserver"
	"skiff/server/auth/rbac"
)

// RBACEscalation refuses Role and binding writes that would give the writer
// more than they hold (upstream's RBAC storage checks): a role may only
// grant rules its author has, unless they may "escalate"; a binding may
// only reference a role whose rules its author has, unless they may "bind".
type RBACEscalation struct {
	Authorizer *rbac.Authorizer
}

// Admit implements apiserver.Admitter.
func (p RBACEscalation) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if a.Op == apiserver.OpDelete || a.Object == nil {
		return nil
	}
	var err error
	switch o := a.Object.(type) {
	case *rbacv1.Role:
		err = p.Authorizer.CanWriteRole(ctx, p.Authorizer, a.User, o)
	case *rbacv1.ClusterRole:
		err = p.Authorizer.CanWriteClusterRole(ctx, p.Authorizer, a.User, o)
	case *rbacv1.RoleBinding:
		if old, ok := a.Old.(*rbacv1.RoleBinding); ok && old.RoleRef == o.RoleRef {
			return nil // only subjects changed: upstream checks the role ref
		}
		err = p.Authorizer.CanBind(ctx, p.Authorizer, a.User, o.Namespace, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		if old, ok := a.Old.(*rbacv1.ClusterRoleBinding); ok && old.RoleRef == o.RoleRef {
			return nil
		}
		err = p.Authorizer.CanBind(ctx, p.Authorizer, a.User, "", o.RoleRef)
	default:
		return nil
	}
	if err == nil {
		return nil
	}
	var esc *rbac.EscalationError
	if errors.As(err, &esc) {
		return apierrors.NewForbidden(a.Resource.GVR().GroupResource(), nameOf(a.Object), err)
	}
	return apierrors.NewInternalError(err)
}
