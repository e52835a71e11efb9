package nodestatus

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// RenewLease creates or renews kube-node-lease/<node>: holder the node,
// leaseDurationSeconds LeaseDuration, renewTime now, owned by the Node once
// its UID is known (so the Lease goes when the Node is deleted). It updates
// the Lease it last wrote and reads it again only when that fails (a
// conflict, or the Lease was deleted), as the kubelet's lease controller.
func (r *Reporter) RenewLease(ctx context.Context) error {
	leases := r.cfg.Client.CoordinationV1().Leases(LeaseNamespace)
	r.mu.Lock()
	cached := r.lease
	r.mu.Unlock()
	if cached != nil {
		got, err := leases.Update(ctx, r.renewed(cached.DeepCopy()), metav1.UpdateOptions{})
		if err == nil {
			r.cacheLease(got)
			return nil
		}
		r.cacheLease(nil)
	}
	lease, err := leases.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease, err = leases.Create(ctx, r.renewed(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: r.cfg.NodeName, Namespace: LeaseNamespace},
		}), metav1.CreateOptions{})
		if err == nil {
			r.cacheLease(lease)
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return wrapLease(r.cfg.NodeName, err)
		}
		lease, err = leases.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	}
	if err != nil {
		return wrapLease(r.cfg.NodeName, err)
	}
	got, err := leases.Update(ctx, r.renewed(lease.DeepCopy()), metav1.UpdateOptions{})
	if err != nil {
		return wrapLease(r.cfg.NodeName, err)
	}
	r.cacheLease(got)
	return nil
}

func (r *Reporter) cacheLease(l *coordinationv1.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lease = l
}

func wrapLease(node string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("node lease %s/%s: %w", LeaseNamespace, node, err)
}

// renewed sets the holder, duration, renew time and owner on lease.
func (r *Reporter) renewed(lease *coordinationv1.Lease) *coordinationv1.Lease {
	lease.Spec.HolderIdentity = ptr.To(r.cfg.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(r.cfg.LeaseDuration.Seconds()))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: r.cfg.now()}
	r.mu.Lock()
	uid := r.nodeUID
	r.mu.Unlock()
	if uid == "" {
		return lease
	}
	for _, o := range lease.OwnerReferences {
		if o.UID == uid {
			return lease
		}
	}
	lease.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       r.cfg.NodeName,
		UID:        uid,
	}}
	return lease
}
