package server

import (
	"context"
	"k8s.io/apimachinery/pkg/types"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"

	"skiff/server/apiserver"
	"skiff/server/auth/serviceaccount"
	"skiff/server/registry"
	"skiff/server/storage"
)

// objectLookups answers the authorizer's and the token validator's
// questions from the watch cache, so checking a request costs no store read.
type objectLookups struct {
	st  *storage.Storage
	reg *registry.Registry
}

// resource finds a v1 resource: every group these lookups read serves v1.
func (l *objectLookups) resource(group, name string) *registry.Resource {
	res, _ := l.reg.Lookup(group, "v1", name)
	return res
}

func list[T any](l *objectLookups, group, name, namespace string) ([]*T, error) {
	res := l.resource(group, name)
	if res == nil {
		return nil, nil
	}
	entries, _, err := l.st.Cache().List(res, storage.Predicate{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	out := make([]*T, 0, len(entries))
	for _, e := range entries {
		if t, ok := any(e.Obj).(*T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

func get[T any](l *objectLookups, group, name, namespace, objName string) *T {
	res := l.resource(group, name)
	if res == nil {
		return nil
	}
	if e := l.st.Cache().Get(res, namespace, objName); e != nil {
		t, _ := any(e.Obj).(*T)
		return t
	}
	return nil
}

const rbacGroup = "rbac.authorization.k8s.io"

// ListClusterRoleBindings implements rbac.Lister.
func (l *objectLookups) ListClusterRoleBindings(ctx context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	return list[rbacv1.ClusterRoleBinding](l, rbacGroup, "clusterrolebindings", "")
}

// ListRoleBindings implements rbac.Lister.
func (l *objectLookups) ListRoleBindings(ctx context.Context, namespace string) ([]*rbacv1.RoleBinding, error) {
	return list[rbacv1.RoleBinding](l, rbacGroup, "rolebindings", namespace)
}

// GetClusterRole implements rbac.Lister.
func (l *objectLookups) GetClusterRole(ctx context.Context, name string) (*rbacv1.ClusterRole, error) {
	return get[rbacv1.ClusterRole](l, rbacGroup, "clusterroles", "", name), nil
}

// GetRole implements rbac.Lister.
func (l *objectLookups) GetRole(ctx context.Context, namespace, name string) (*rbacv1.Role, error) {
	return get[rbacv1.Role](l, rbacGroup, "roles", namespace, name), nil
}

// ServiceAccountUID implements serviceaccount.Lookup. A miss waits for the
// watch cache to catch up once: a token issued a moment ago (TokenRequest
// reads the store) may name a service account the cache has not seen yet.
func (l *objectLookups) ServiceAccountUID(ctx context.Context, namespace, name string) (string, bool, error) {
	return liveUID[corev1.ServiceAccount](ctx, l, "serviceaccounts", namespace, name)
}

// PodUID implements serviceaccount.Lookup, with the same catch-up.
func (l *objectLookups) PodUID(ctx context.Context, namespace, name string) (string, bool, error) {
	return liveUID[corev1.Pod](ctx, l, "pods", namespace, name)
}

// liveUID is the UID of a core object from the watch cache, read again
// after the cache caught up with the store when it is not there.
func liveUID[T any, PT interface {
	*T
	GetUID() types.UID
}](ctx context.Context, l *objectLookups, resource, namespace, name string) (string, bool, error) {
	if o := get[T](l, "", resource, namespace, name); o != nil {
		return string(PT(o).GetUID()), true, nil
	}
	if err := l.st.Cache().WaitCurrent(ctx); err != nil {
		return "", false, err
	}
	if o := get[T](l, "", resource, namespace, name); o != nil {
		return string(PT(o).GetUID()), true, nil
	}
	return "", false, nil
}

// ServiceAccount implements admission.ObjectGetter. A miss waits for the
// watch cache to catch up with the store and looks again, as upstream's
// plugin falls back to a live read: a client that has just created the
// account and then its pod must not be told it does not exist.
func (l *objectLookups) ServiceAccount(ctx context.Context, namespace, name string) *corev1.ServiceAccount {
	if sa := get[corev1.ServiceAccount](l, "", "serviceaccounts", namespace, name); sa != nil {
		return sa
	}
	if err := l.st.Cache().WaitCurrent(ctx); err != nil {
		return nil
	}
	return get[corev1.ServiceAccount](l, "", "serviceaccounts", namespace, name)
}

// PriorityClass implements admission.ObjectGetter.
func (l *objectLookups) PriorityClass(ctx context.Context, name string) *schedulingv1.PriorityClass {
	return get[schedulingv1.PriorityClass](l, "scheduling.k8s.io", "priorityclasses", "", name)
}

// DefaultPriorityClass implements admission.ObjectGetter.
func (l *objectLookups) DefaultPriorityClass(ctx context.Context) *schedulingv1.PriorityClass {
	pcs, _ := list[schedulingv1.PriorityClass](l, "scheduling.k8s.io", "priorityclasses", "")
	for _, pc := range pcs {
		if pc.GlobalDefault {
			return pc
		}
	}
	return nil
}

// Services implements admission.ServiceLister.
func (l *objectLookups) Services(ctx context.Context) ([]*corev1.Service, error) {
	return list[corev1.Service](l, "", "services", "")
}

// tokenIssuer adapts the service-account token issuer to the API server.
type tokenIssuer struct{ i *serviceaccount.Issuer }

// IssueToken implements apiserver.TokenIssuer.
func (t tokenIssuer) IssueToken(r apiserver.TokenRequest) (string, time.Time, error) {
	return t.i.Issue(serviceaccount.Request{
		Namespace: r.Namespace, ServiceAccount: r.ServiceAccount, ServiceAccountUID: r.ServiceAccountUID,
		Audiences: r.Audiences, Expiration: r.Expiration, PodName: r.PodName, PodUID: r.PodUID,
		NodeName: r.NodeName, NodeUID: r.NodeUID,
	})
}
