package componentstatus

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeStore struct{ err error }

func (f fakeStore) CurrentRevision(context.Context) (int64, error) { return 1, f.err }

type fakeLeases map[string]*coordinationv1.Lease

func (f fakeLeases) Lease(_ context.Context, _, name string) *coordinationv1.Lease { return f[name] }

func lease(holder string, renewed time.Time) *coordinationv1.Lease {
	d := int32(15)
	return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &metav1.MicroTime{Time: renewed}}}
}

func TestStatuses_HealthFromLeasesAndStore(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		leases fakeLeases
		store  error
		want   map[string]corev1.ConditionStatus
	}{
		{"all fresh", fakeLeases{"s": lease("a", now.Add(-time.Second)), "cm": lease("a", now)}, nil,
			map[string]corev1.ConditionStatus{"scheduler": "True", "controller-manager": "True", "etcd-0": "True"}},
		{"scheduler lease expired, no controller lease, store down", fakeLeases{"s": lease("a", now.Add(-time.Minute))}, errors.New("closed"),
			map[string]corev1.ConditionStatus{"scheduler": "False", "controller-manager": "False", "etcd-0": "False"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Store: fakeStore{tc.store}, Leases: tc.leases, SchedulerLease: "s", ControllerManagerLease: "cm", Now: func() time.Time { return now }}
			objs, err := c.Statuses(context.Background())
			if err != nil || len(objs) != 3 {
				t.Fatalf("Statuses = %d objects, %v", len(objs), err)
			}
			for _, o := range objs {
				cs := o.(*corev1.ComponentStatus)
				cond := cs.Conditions[0]
				if cond.Type != corev1.ComponentHealthy || cond.Status != tc.want[cs.Name] {
					t.Errorf("%s: %+v, want Healthy %s", cs.Name, cond, tc.want[cs.Name])
				}
				if (cond.Status == corev1.ConditionFalse) != (cond.Error != "") {
					t.Errorf("%s: an unhealthy component says why in error, a healthy one does not: %+v", cs.Name, cond)
				}
			}
		})
	}
}
