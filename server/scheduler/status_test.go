package scheduler

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestApplyStatus(t *testing.T) {
	earlier := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	unsched := func(msg string) *v1.PodCondition {
		return &v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: msg}
	}
	node, none := "n1", ""
	tests := []struct {
		name           string
		status         v1.PodStatus
		want           statusWant
		changed        bool
		keepTransition bool
	}{
		{"a first condition is written", v1.PodStatus{}, statusWant{cond: unsched("m")}, true, false},
		{"the same condition is not rewritten",
			v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: "m", LastTransitionTime: earlier}}},
			statusWant{cond: unsched("m")}, false, true},
		{"a new message keeps the transition time",
			v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: "old", LastTransitionTime: earlier}}},
			statusWant{cond: unsched("new")}, true, true},
		{"a nomination alone is written", v1.PodStatus{}, statusWant{nominated: &node}, true, false},
		{"clearing an absent nomination is no change", v1.PodStatus{}, statusWant{nominated: &none}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := *tt.status.DeepCopy()
			if got := applyStatus(&st, tt.want); got != tt.changed {
				t.Fatalf("changed = %v, want %v", got, tt.changed)
			}
			if tt.want.nominated != nil && st.NominatedNodeName != *tt.want.nominated {
				t.Errorf("nominatedNodeName %q", st.NominatedNodeName)
			}
			if tt.want.cond == nil {
				return
			}
			c := st.Conditions[0]
			if c.Message != tt.want.cond.Message || c.Status != v1.ConditionFalse {
				t.Errorf("condition %+v", c)
			}
			if kept := c.LastTransitionTime.Equal(&earlier); kept != tt.keepTransition {
				t.Errorf("transition time %v, kept = %v, want %v", c.LastTransitionTime, kept, tt.keepTransition)
			}
		})
	}
}
