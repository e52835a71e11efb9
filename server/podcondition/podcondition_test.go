package podcondition

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSet_TransitionTimeMovesOnlyWithStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	target := func(status corev1.ConditionStatus, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.DisruptionTarget, Status: status, Reason: reason}
	}
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t0}
	for _, tc := range []struct {
		name        string
		have        []corev1.PodCondition
		set         corev1.PodCondition
		wantChanged bool
		wantTime    metav1.Time
		wantLen     int
	}{
		{"added with now", []corev1.PodCondition{ready}, target(corev1.ConditionTrue, "A"), true, t1, 2},
		{"same again is a no-op", []corev1.PodCondition{ready, withTime(target(corev1.ConditionTrue, "A"), t0)}, target(corev1.ConditionTrue, "A"), false, t0, 2},
		{"new reason keeps the time", []corev1.PodCondition{withTime(target(corev1.ConditionTrue, "A"), t0)}, target(corev1.ConditionTrue, "B"), true, t0, 1},
		{"new status moves the time", []corev1.PodCondition{withTime(target(corev1.ConditionFalse, "A"), t0)}, target(corev1.ConditionTrue, "A"), true, t1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := corev1.PodStatus{Conditions: append([]corev1.PodCondition(nil), tc.have...)}
			if got := Set(&st, tc.set, t1); got != tc.wantChanged {
				t.Errorf("changed = %v, want %v", got, tc.wantChanged)
			}
			if len(st.Conditions) != tc.wantLen {
				t.Fatalf("conditions %+v, want %d", st.Conditions, tc.wantLen)
			}
			for _, c := range st.Conditions {
				if c.Type == corev1.DisruptionTarget && !c.LastTransitionTime.Equal(&tc.wantTime) {
					t.Errorf("transition time %v, want %v", c.LastTransitionTime, tc.wantTime)
				}
				if c.Type == corev1.PodReady && !c.LastTransitionTime.Equal(&t0) {
					t.Errorf("other condition touched: %+v", c)
				}
			}
		})
	}
}

func withTime(c corev1.PodCondition, t metav1.Time) corev1.PodCondition {
	c.LastTransitionTime = t
	return c
}
