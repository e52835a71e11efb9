package disruption

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// pod is a pod of controller owner (none when empty), ready or not.
func pod(name, owner string, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner, UID: types.UID(owner), Controller: new(true)}}
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

func pods(n, ready int, owner string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("%s-%d", owner, i), owner, i < ready)
	}
	return out
}

// scales answers for the owners named in it.
func scales(m map[string]int32) scaleFinder {
	return func(ref *metav1.OwnerReference, _ string) (scale, bool) {
		n, ok := m[ref.Name]
		return scale{uid: ref.UID, replicas: n}, ok
	}
}

func budget(minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb", Namespace: "default", Generation: 3},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: minAvailable, MaxUnavailable: maxUnavailable},
	}
}

func intOrStr(v string) *intstr.IntOrString {
	x := intstr.Parse(v)
	return &x
}

func TestBudgetStatus(t *testing.T) {
	tests := []struct {
		name                                string
		pdb                                 *policyv1.PodDisruptionBudget
		pods                                []*corev1.Pod
		scales                              map[string]int32
		expected, desired, healthy, allowed int32
		wantUnmanaged                       int
		wantErr                             bool
	}{
		{name: "minAvailable integer counts the pods", pdb: budget(intOrStr("2"), nil), pods: pods(3, 3, "rs"),
			expected: 3, desired: 2, healthy: 3, allowed: 1},
		{name: "minAvailable integer with a pod not ready", pdb: budget(intOrStr("2"), nil), pods: pods(3, 2, "rs"),
			expected: 3, desired: 2, healthy: 2, allowed: 0},
		{name: "minAvailable integer needs no controller", pdb: budget(intOrStr("1"), nil), pods: pods(2, 2, ""),
			expected: 2, desired: 1, healthy: 2, allowed: 1},
		{name: "minAvailable percentage of the controller's scale, rounded up", pdb: budget(intOrStr("50%"), nil), pods: pods(3, 3, "rs"), scales: map[string]int32{"rs": 5},
			expected: 5, desired: 3, healthy: 3, allowed: 0},
		{name: "maxUnavailable percentage rounds the unavailable up", pdb: budget(nil, intOrStr("25%")), pods: pods(4, 4, "rs"), scales: map[string]int32{"rs": 4},
			expected: 4, desired: 3, healthy: 4, allowed: 1},
		{name: "maxUnavailable integer", pdb: budget(nil, intOrStr("1")), pods: pods(3, 2, "rs"), scales: map[string]int32{"rs": 3},
			expected: 3, desired: 2, healthy: 2, allowed: 0},
		{name: "maxUnavailable larger than the scale desires none", pdb: budget(nil, intOrStr("5")), pods: pods(2, 1, "rs"), scales: map[string]int32{"rs": 2},
			expected: 2, desired: 0, healthy: 1, allowed: 1},
		{name: "several controllers add up", pdb: budget(nil, intOrStr("1")), pods: append(pods(2, 2, "a"), pods(3, 3, "b")...), scales: map[string]int32{"a": 2, "b": 3},
			expected: 5, desired: 4, healthy: 5, allowed: 1},
		{name: "unmanaged pods are reported, not counted", pdb: budget(intOrStr("50%"), nil), pods: append(pods(2, 2, "rs"), pod("lone", "", true)), scales: map[string]int32{"rs": 2},
			expected: 2, desired: 1, healthy: 3, allowed: 2, wantUnmanaged: 1},
		{name: "a pod whose controller is unknown is an error", pdb: budget(nil, intOrStr("1")), pods: pods(2, 2, "gone"), wantErr: true},
		{name: "no pods allows nothing", pdb: budget(nil, intOrStr("1")), pods: nil,
			expected: 0, desired: 0, healthy: 0, allowed: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expected, desired, unmanaged, err := expectedAndDesired(tt.pdb, tt.pods, scales(tt.scales))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			st := newStatus(tt.pdb, countHealthy(tt.pods, nil), desired, expected, nil)
			if st.ExpectedPods != tt.expected || st.DesiredHealthy != tt.desired || st.CurrentHealthy != tt.healthy || st.DisruptionsAllowed != tt.allowed {
				t.Errorf("expected/desired/healthy/allowed = %d/%d/%d/%d, want %d/%d/%d/%d",
					st.ExpectedPods, st.DesiredHealthy, st.CurrentHealthy, st.DisruptionsAllowed, tt.expected, tt.desired, tt.healthy, tt.allowed)
			}
			if len(unmanaged) != tt.wantUnmanaged {
				t.Errorf("unmanaged = %v, want %d", unmanaged, tt.wantUnmanaged)
			}
			cond := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
			wantStatus, wantReason := metav1.ConditionFalse, policyv1.InsufficientPodsReason
			if tt.allowed > 0 {
				wantStatus, wantReason = metav1.ConditionTrue, policyv1.SufficientPodsReason
			}
			if cond == nil || cond.Status != wantStatus || cond.Reason != wantReason || cond.ObservedGeneration != 3 || st.ObservedGeneration != 3 {
				t.Errorf("condition = %+v, observedGeneration %d; want %s/%s at generation 3", cond, st.ObservedGeneration, wantStatus, wantReason)
			}
		})
	}
}

func TestLiveDisruptions(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	pdb := budget(intOrStr("1"), nil)
	pdb.Status.DisruptedPods = map[string]metav1.Time{
		"recent":  ago(30 * time.Second),
		"older":   ago(90 * time.Second),
		"stale":   ago(3 * time.Minute),
		"going":   ago(10 * time.Second),
		"deleted": ago(10 * time.Second),
	}
	going := pod("going", "rs", true)
	going.DeletionTimestamp = &metav1.Time{Time: now}
	ps := []*corev1.Pod{pod("recent", "rs", true), pod("older", "rs", true), pod("stale", "rs", true), going, pod("other", "rs", true)}

	live, expired, recheck := liveDisruptions(pdb, ps, now)
	_, recent := live["recent"]
	_, older := live["older"]
	if len(live) != 2 || !recent || !older {
		t.Errorf("live = %v, want recent and older", live)
	}
	if len(expired) != 1 || expired[0].Name != "stale" {
		t.Errorf("expired = %v, want stale", expired)
	}
	if want := now.Add(30 * time.Second); recheck == nil || !recheck.Equal(want) {
		t.Errorf("recheck = %v, want %v (when older expires)", recheck, want)
	}
	// Just-evicted pods do not count as healthy; the stale one counts again.
	if got := countHealthy(ps, live); got != 2 {
		t.Errorf("healthy = %d, want 2 (stale and other)", got)
	}
}

func TestFailedStatus_AllowsNothing(t *testing.T) {
	pdb := budget(intOrStr("1"), nil)
	pdb.Status.DisruptionsAllowed = 4
	st := failedStatus(pdb, errors.New("found no controllers for pod \"x\""))
	cond := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
	if st.DisruptionsAllowed != 0 || cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != policyv1.SyncFailedReason || cond.Message == "" {
		t.Errorf("status = %+v", st)
	}
}

func TestStatusEqual_IgnoresConditionTimestamps(t *testing.T) {
	pdb := budget(intOrStr("1"), nil)
	a := newStatus(pdb, 2, 1, 2, nil)
	b := *a.DeepCopy()
	b.Conditions[0].LastTransitionTime = metav1.NewTime(time.Unix(0, 0))
	if !statusEqual(&a, &b) {
		t.Error("statuses differing only in transition time compare unequal")
	}
	b.CurrentHealthy = 1
	if statusEqual(&a, &b) {
		t.Error("statuses differing in currentHealthy compare equal")
	}
}
