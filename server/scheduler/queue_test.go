package scheduler

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"skiff/server/scheduler/algorithm"
)

func pendingPod(name string, prio int32) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}, Spec: v1.PodSpec{Priority: &prio}}
}

// fakeClock advances a little on every reading, so FIFO order is strict.
func fakeClock(q *queue) *time.Time {
	now := time.Unix(1000, 0)
	q.now = func() time.Time { now = now.Add(time.Millisecond); return now }
	return &now
}

func TestQueue_PopsHigherPriorityFirstThenFIFO(t *testing.T) {
	q := newQueue(time.Second, 10*time.Second)
	fakeClock(q)
	for _, p := range []*v1.Pod{pendingPod("low-1", 0), pendingPod("high", 10), pendingPod("low-2", 0), pendingPod("mid", 5)} {
		q.add(p)
	}
	var got []string
	for range 4 {
		_, p, _ := q.pop()
		got = append(got, p.Name)
	}
	want := []string{"high", "mid", "low-1", "low-2"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

func TestQueue_UnschedulablePodWaitsForARelevantEvent(t *testing.T) {
	q := newQueue(time.Second, 10*time.Second)
	now := fakeClock(q)
	q.add(pendingPod("p", 0))
	qp, _, _ := q.pop()
	q.unschedulable(qp, sets.New(algorithm.NodeResourcesFit), nil)
	if _, _, u := q.counts(); u != 1 {
		t.Fatalf("want the pod unschedulable")
	}
	q.event(evPodAssigned) // another pod bound: no help for a pod short of cpu
	if _, _, u := q.counts(); u != 1 {
		t.Fatalf("an irrelevant event moved the pod")
	}
	*now = now.Add(2 * time.Second) // back-off (1 s) over
	q.event(evPodGone)
	if a, _, _ := q.counts(); a != 1 {
		t.Fatalf("a deleted pod should make the pod active again")
	}
}

func TestQueue_EventDuringTheAttemptSendsThePodToBackoff(t *testing.T) {
	q := newQueue(time.Hour, time.Hour)
	fakeClock(q)
	q.add(pendingPod("p", 0))
	qp, _, _ := q.pop()
	q.event(evNodeAdd) // while the pod was being scheduled
	q.unschedulable(qp, sets.New(algorithm.TaintToleration), nil)
	if _, b, u := q.counts(); b != 1 || u != 0 {
		t.Fatalf("backoff %d unschedulable %d; want the pod backing off, not waiting for an event it missed", b, u)
	}
}

func TestQueue_BackoffDoublesUpToTheMaximum(t *testing.T) {
	q := newQueue(time.Second, 10*time.Second)
	now := fakeClock(q)
	q.add(pendingPod("p", 0))
	var got []time.Duration
	for range 6 {
		qp, _, _ := q.pop()
		q.unschedulable(qp, sets.New(algorithm.NodeResourcesFit), nil)
		got = append(got, qp.backoffUntil.Sub(*now).Round(time.Second))
		*now = qp.backoffUntil.Add(time.Millisecond)
		q.event(evNodeAdd)
	}
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("back-offs %v, want %v seconds", got, want)
		}
	}
}

func TestQueue_BackedOffPodBecomesActiveWhenItsBackoffEnds(t *testing.T) {
	q := newQueue(20*time.Millisecond, 20*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.run(ctx)
	q.add(pendingPod("p", 0))
	qp, _, _ := q.pop()
	q.failed(qp.pod.UID, nil)
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		a, _, _ := q.counts()
		return a == 1, nil
	})
	if err != nil {
		t.Fatal("pod never left back-off")
	}
}

func TestQueue_UserChangeRequeuesButStatusWritesDoNot(t *testing.T) {
	q := newQueue(time.Nanosecond, time.Nanosecond)
	fakeClock(q)
	p := pendingPod("p", 0)
	q.add(p)
	qp, _, _ := q.pop()
	q.unschedulable(qp, sets.New(algorithm.NodeAffinity), nil)
	withStatus := p.DeepCopy()
	withStatus.ResourceVersion = "2"
	withStatus.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse}}
	q.update(p, withStatus)
	if _, _, u := q.counts(); u != 1 {
		t.Fatal("the scheduler's own status write requeued the pod")
	}
	fixed := withStatus.DeepCopy()
	fixed.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	q.update(withStatus, fixed)
	if a, _, _ := q.counts(); a != 1 {
		t.Fatal("a changed spec did not requeue the pod")
	}
}

func TestQueue_NominationsFollowThePod(t *testing.T) {
	q := newQueue(time.Second, time.Second)
	p := pendingPod("p", 10)
	p.Status.NominatedNodeName = "n1"
	q.add(p)
	if got := q.nominations()["n1"]; len(got) != 1 || got[0].Pod.UID != "p" {
		t.Fatalf("nominations %v", q.nominations())
	}
	if low := q.lowerNominated("n1", 20); len(low) != 1 {
		t.Errorf("lowerNominated(20) = %v, want p", low)
	}
	if low := q.lowerNominated("n1", 10); len(low) != 0 {
		t.Errorf("lowerNominated(10) = %v, want none", low)
	}
	q.remove(p.UID)
	if n := q.nominations(); len(n) != 0 {
		t.Errorf("nominations after removal %v", n)
	}
}
