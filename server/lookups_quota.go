package server

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/storage"
)

// quotaAccess is ResourceQuota admission's view of the quotas: read from
// the watch cache, charged by compare-and-swap on the store, so that
// concurrent creates never overshoot a quota.
type quotaAccess struct{ l *objectLookups }

func (a quotaAccess) List(ctx context.Context, namespace string) ([]*corev1.ResourceQuota, error) {
	qs, err := list[corev1.ResourceQuota](a.l, "", "resourcequotas", namespace)
	if err != nil {
		return nil, err
	}
	// A quota whose status the controller has not yet written is not
	// enforced; the cache may simply lag behind that write (the client saw
	// the status a moment ago), so such a list is read again once the
	// cache has caught up with the store.
	for _, q := range qs {
		if len(q.Status.Hard) == 0 && len(q.Spec.Hard) > 0 {
			if err := a.l.st.Cache().WaitCurrent(ctx); err != nil {
				return nil, err
			}
			return list[corev1.ResourceQuota](a.l, "", "resourcequotas", namespace)
		}
	}
	return qs, nil
}

func (a quotaAccess) UpdateStatus(ctx context.Context, q *corev1.ResourceQuota, expectedResourceVersion string) (*corev1.ResourceQuota, error) {
	res := a.l.resource("", "resourcequotas")
	if res == nil {
		return nil, apierrors.NewServiceUnavailable("resourcequotas are not served")
	}
	rev, err := storage.ParseResourceVersion(expectedResourceVersion)
	if err != nil {
		return nil, err
	}
	cur, err := a.l.st.Get(ctx, res, q.Namespace, q.Name)
	if err != nil {
		return nil, err
	}
	if cur.Rev != rev {
		return nil, apierrors.NewConflict(res.GVR().GroupResource(), q.Name, fmt.Errorf("the quota has been modified"))
	}
	stored, ok := cur.Obj.(*corev1.ResourceQuota)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("resourcequota is %T", cur.Obj))
	}
	next := stored.DeepCopy()
	next.Status = q.Status // a status write: spec and metadata stay as stored
	e, err := a.l.st.Update(ctx, res, next, rev)
	if err != nil {
		return nil, err
	}
	out, _ := e.Obj.(*corev1.ResourceQuota)
	return out, nil
}
