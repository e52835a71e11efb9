package replicaset

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func unassigned(p *corev1.Pod)        { p.Spec.NodeName = "" }
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func onNode(n string) podOpt          { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func created(ago time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-ago)) }
}
func restarts(n int32) podOpt {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: n}} }
}
func cost(v string) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{deletionCostAnnotation: v} }
}
func readySince(ago time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
	}
}

func TestPodsToDelete_Ranking(t *testing.T) {
	cases := []struct {
		name       string
		candidates []*corev1.Pod
		related    []*corev1.Pod // the candidates when nil
		want       string        // the pod deleted first
	}{
		{"unassigned before assigned", []*corev1.Pod{mkPod("a", readySince(time.Hour)), mkPod("b", unassigned, phase(corev1.PodPending))}, nil, "b"},
		{"pending before unknown", []*corev1.Pod{mkPod("a", phase(corev1.PodUnknown)), mkPod("b", phase(corev1.PodPending))}, nil, "b"},
		{"unknown before running", []*corev1.Pod{mkPod("a"), mkPod("b", phase(corev1.PodUnknown))}, nil, "b"},
		{"not ready before ready", []*corev1.Pod{mkPod("a", readySince(time.Minute)), mkPod("b")}, nil, "b"},
		{"lower deletion cost first", []*corev1.Pod{mkPod("a", readySince(time.Minute), cost("10")), mkPod("b", readySince(time.Hour), cost("-5"))}, nil, "b"},
		{"malformed deletion cost is zero", []*corev1.Pod{mkPod("a", readySince(time.Minute), cost("x")), mkPod("b", readySince(time.Hour), cost("-1"))}, nil, "b"},
		{"crowded node first", []*corev1.Pod{mkPod("a", readySince(time.Minute)), mkPod("b", readySince(time.Hour), onNode("n2"))},
			[]*corev1.Pod{mkPod("a"), mkPod("b", onNode("n2")), mkPod("c", onNode("n2"))}, "b"},
		{"ready for a shorter time first", []*corev1.Pod{mkPod("a", readySince(time.Hour)), mkPod("b", readySince(time.Minute))}, nil, "b"},
		{"ready times in the same log2 bucket tie, broken by UID", []*corev1.Pod{mkPod("b", readySince(60*time.Second), restarts(9)), mkPod("a", readySince(40*time.Second))}, nil, "a"},
		{"more restarts first", []*corev1.Pod{mkPod("a", readySince(time.Minute)), mkPod("b", readySince(time.Minute), restarts(3))}, nil, "b"},
		{"newer first", []*corev1.Pod{mkPod("a", created(time.Hour)), mkPod("b", created(time.Minute))}, nil, "b"},
		{"unknown creation time first", []*corev1.Pod{mkPod("a", created(time.Minute)), mkPod("b", func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{} })}, nil, "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			related := tc.related
			if related == nil {
				related = tc.candidates
			}
			got := podsToDelete(tc.candidates, related, 1, now)
			if len(got) != 1 || got[0].Name != tc.want {
				t.Errorf("deleted %s, want %s", got[0].Name, tc.want)
			}
		})
	}
}

func TestPodsToDelete_AllWhenAskedForAll(t *testing.T) {
	pods := []*corev1.Pod{mkPod("a"), mkPod("b")}
	if got := podsToDelete(pods, pods, 5, now); len(got) != 2 {
		t.Errorf("got %d pods, want both", len(got))
	}
}

func TestSlowStartBatch(t *testing.T) {
	cases := []struct {
		name          string
		count, failAt int // failAt: the call number that starts failing (0: none)
		wantCalls     int
		wantSuccesses int
	}{
		{"all succeed in batches 1,2,4,3", 10, 0, 10, 10},
		{"first call fails: nothing more tried", 10, 1, 1, 0},
		{"failure in the second batch stops before the third", 10, 3, 3, 2},
		{"nothing to do", 0, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			got, err := slowStartBatch(tc.count, 1, func() error {
				if n := calls.Add(1); tc.failAt > 0 && int(n) >= tc.failAt {
					return errors.New("quota")
				}
				return nil
			})
			if int(calls.Load()) != tc.wantCalls || got != tc.wantSuccesses || (err != nil) != (tc.failAt > 0) {
				t.Errorf("calls %d successes %d err %v; want %d calls, %d successes", calls.Load(), got, err, tc.wantCalls, tc.wantSuccesses)
			}
		})
	}
}

func TestExpectations(t *testing.T) {
	e := newExpectations()
	clock := now
	e.now = func() time.Time { return clock }
	if !e.satisfied("ns/rs") {
		t.Fatal("nothing expected yet, but not satisfied")
	}
	e.expectCreations("ns/rs", 2)
	e.creationObserved("ns/rs")
	if e.satisfied("ns/rs") {
		t.Fatal("satisfied with one creation outstanding")
	}
	e.creationObserved("ns/rs")
	if !e.satisfied("ns/rs") {
		t.Fatal("not satisfied after both creations were seen")
	}

	e.expectDeletions("ns/rs", []string{"ns/a", "ns/b"})
	e.deletionObserved("ns/rs", "ns/a")
	e.deletionObserved("ns/rs", "ns/a") // terminating, then gone: once
	if e.satisfied("ns/rs") {
		t.Fatal("satisfied with ns/b still to go")
	}
	clock = clock.Add(expectationsTTL + time.Second)
	if !e.satisfied("ns/rs") {
		t.Fatal("an expectation outlived its TTL")
	}
	e.forget("ns/rs")
	if !e.satisfied("ns/rs") {
		t.Fatal("not satisfied after forget")
	}
}

func TestCalculateStatus(t *testing.T) {
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(4)), MinReadySeconds: 10,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "fe"}}}}}
	full := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web", "tier": "fe"} }
	pods := []*corev1.Pod{
		mkPod("a", full, readySince(time.Minute)),
		mkPod("b", full, readySince(5*time.Second)),
		mkPod("c", full),
		mkPod("d", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }),
	}
	st := calculateStatus(rs, pods, 1, nil, now)
	if st.Replicas != 4 || st.FullyLabeledReplicas != 3 || st.ReadyReplicas != 2 || st.AvailableReplicas != 1 || *st.TerminatingReplicas != 1 {
		t.Errorf("status = %+v", st)
	}
	if c := condition(st.Conditions, appsv1.ReplicaSetReplicaFailure); c != nil {
		t.Errorf("ReplicaFailure without an error: %+v", c)
	}

	st = calculateStatus(rs, pods[:2], 0, errors.New("forbidden"), now)
	c := condition(st.Conditions, appsv1.ReplicaSetReplicaFailure)
	if c == nil || c.Reason != "FailedCreate" || c.Message != "forbidden" || c.Status != corev1.ConditionTrue {
		t.Fatalf("ReplicaFailure = %+v, want FailedCreate", c)
	}
	rs.Status = st
	if st = calculateStatus(rs, pods, 0, nil, now); condition(st.Conditions, appsv1.ReplicaSetReplicaFailure) != nil {
		t.Error("ReplicaFailure kept after a successful sync")
	}
}
