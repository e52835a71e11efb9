package rbac

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Lister is what the authorizer reads policy from. The API server backs it
// with its watch cache, so every call is expected to be cheap and to reflect
// the latest committed state. Implementations must not mutate the returned
// objects afterwards and callers here never mutate them.
type Lister interface {
	// ListClusterRoleBindings returns every ClusterRoleBinding. It returns
	// an empty slice, not an error, when there are none.
	ListClusterRoleBindings(ctx context.Context) ([]*rbacv1.ClusterRoleBinding, error)
	// ListRoleBindings returns the RoleBindings in namespace. It returns an
	// empty slice, not an error, when there are none.
	ListRoleBindings(ctx context.Context, namespace string) ([]*rbacv1.RoleBinding, error)
	// GetClusterRole returns the named ClusterRole, or nil and no error
	// when it does not exist.
	GetClusterRole(ctx context.Context, name string) (*rbacv1.ClusterRole, error)
	// GetRole returns the named Role in namespace, or nil and no error when
	// it does not exist.
	GetRole(ctx context.Context, namespace, name string) (*rbacv1.Role, error)
}
