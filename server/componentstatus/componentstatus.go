// Package componentstatus computes the objects of the deprecated core/v1
// componentstatuses resource: whether the scheduler, the controller manager
// and the store are healthy. Upstream probes each component's healthz port;
// here they run in the server's own process behind leader election, so a
// component is healthy while some server holds its Lease and keeps renewing
// it, and the store is healthy while it answers.
package componentstatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Store is the state store as far as health goes.
type Store interface {
	CurrentRevision(ctx context.Context) (int64, error)
}

// Leases reads a Lease (nil when there is none).
type Leases interface {
	Lease(ctx context.Context, namespace, name string) *coordinationv1.Lease
}

// Config names what is checked.
type Config struct {
	Store  Store
	Leases Leases
	// SchedulerLease and ControllerManagerLease are the kube-system Leases
	// of the two components.
	SchedulerLease, ControllerManagerLease string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Statuses is registry.Resource.Compute for componentstatuses: one object
// per component, named as upstream names them.
func (c Config) Statuses(ctx context.Context) ([]runtime.Object, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	_, storeErr := c.Store.CurrentRevision(ctx)
	return []runtime.Object{
		status("scheduler", c.leaseHealth(ctx, c.SchedulerLease, now())),
		status("controller-manager", c.leaseHealth(ctx, c.ControllerManagerLease, now())),
		status("etcd-0", storeErr),
	}, nil
}

// ErrNoLeader means no server holds a component's Lease.
var ErrNoLeader = errors.New("no leader holds the lease")

func (c Config) leaseHealth(ctx context.Context, name string, now time.Time) error {
	l := c.Leases.Lease(ctx, "kube-system", name)
	if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return fmt.Errorf("lease kube-system/%s: %w", name, ErrNoLeader)
	}
	renewed := l.Spec.RenewTime
	if renewed == nil {
		renewed = l.Spec.AcquireTime
	}
	duration := 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if renewed == nil || renewed.Add(duration).Before(now) {
		return fmt.Errorf("lease kube-system/%s held by %s has not been renewed in time: %w", name, *l.Spec.HolderIdentity, ErrNoLeader)
	}
	return nil
}

func status(name string, err error) *corev1.ComponentStatus {
	cond := corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}
	if err != nil {
		cond = corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err.Error()}
	}
	return &corev1.ComponentStatus{
		TypeMeta:   metav1.TypeMeta{Kind: "ComponentStatus", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Conditions: []corev1.ComponentCondition{cond},
	}
}
