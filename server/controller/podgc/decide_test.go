package podgc

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.NewTime(t0)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func age(d time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(-d)) }
}
func on(node string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
func evicted(p *corev1.Pod) { p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted" }
func terminating(p *corev1.Pod) {
	now := metav1.NewTime(t0)
	p.DeletionTimestamp = &now
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestTerminatedOverThreshold(t *testing.T) {
	pods := []*corev1.Pod{
		pod("running-old", age(5*time.Hour)),
		pod("pending-old", phase(corev1.PodPending), age(5*time.Hour)),
		pod("succeeded-2h", phase(corev1.PodSucceeded), age(2*time.Hour)),
		pod("failed-3h", phase(corev1.PodFailed), age(3*time.Hour)),
		pod("succeeded-1h", phase(corev1.PodSucceeded), age(time.Hour)),
		pod("evicted-new", evicted),
		pod("b-same-age", phase(corev1.PodSucceeded), age(4*time.Hour)),
		pod("a-same-age", phase(corev1.PodFailed), age(4*time.Hour)),
	}
	for _, tc := range []struct {
		threshold int
		want      []string
	}{
		{threshold: 6, want: nil},
		{threshold: 10, want: nil},
		{threshold: 5, want: []string{"evicted-new"}},
		{threshold: 3, want: []string{"evicted-new", "a-same-age", "b-same-age"}},
		{threshold: 0, want: []string{"evicted-new", "a-same-age", "b-same-age", "failed-3h", "succeeded-2h", "succeeded-1h"}},
	} {
		if got := names(terminatedOverThreshold(pods, tc.threshold)); !slices.Equal(got, tc.want) {
			t.Errorf("threshold %d: deleted %v, want %v", tc.threshold, got, tc.want)
		}
	}
}

func TestOrphansAndUnscheduled(t *testing.T) {
	pods := []*corev1.Pod{
		pod("on-live", on("live")),
		pod("on-gone", on("gone")),
		pod("on-gone-done", on("gone"), phase(corev1.PodSucceeded)),
		pod("on-lagging", on("lagging")),
		pod("unscheduled"),
		pod("unscheduled-terminating", terminating),
		pod("scheduled-terminating", on("live"), terminating),
	}
	missing := missingNodes(pods, sets.New("live"))
	if !missing.Equal(sets.New("gone", "lagging")) {
		t.Errorf("missing nodes %v", sets.List(missing))
	}
	if got := names(onNodes(pods, sets.New("gone"))); !slices.Equal(got, []string{"on-gone", "on-gone-done"}) {
		t.Errorf("pods on deleted nodes %v", got)
	}
	if got := names(unscheduledTerminating(pods)); !slices.Equal(got, []string{"unscheduled-terminating"}) {
		t.Errorf("unscheduled terminating %v", got)
	}
}

func TestTerminatingOutOfService(t *testing.T) {
	ready := func(s corev1.ConditionStatus) corev1.NodeStatus {
		return corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}}
	}
	taint := []corev1.Taint{{Key: outOfServiceTaint, Effect: corev1.TaintEffectNoExecute}}
	nodes := map[string]*corev1.Node{
		"down-tainted":  {Spec: corev1.NodeSpec{Taints: taint}, Status: ready(corev1.ConditionFalse)},
		"up-tainted":    {Spec: corev1.NodeSpec{Taints: taint}, Status: ready(corev1.ConditionTrue)},
		"down":          {Status: ready(corev1.ConditionUnknown)},
		"never-tainted": {Spec: corev1.NodeSpec{Taints: taint}}, // no Ready condition: not ready
	}
	pods := []*corev1.Pod{
		pod("a", on("down-tainted"), terminating),
		pod("b", on("down-tainted")),
		pod("c", on("up-tainted"), terminating),
		pod("d", on("down"), terminating),
		pod("e", on("never-tainted"), terminating),
		pod("f", on("missing"), terminating),
	}
	if got := names(terminatingOutOfService(pods, nodes)); !slices.Equal(got, []string{"a", "e"}) {
		t.Errorf("force-deleted %v, want [a e]", got)
	}
}

func TestQuarantine_NodeMustStayMissingForTheHold(t *testing.T) {
	q := newQuarantine(40 * time.Second)
	steps := []struct {
		at      time.Duration
		missing []string
		want    []string
	}{
		{0, []string{"a"}, nil},
		{20 * time.Second, []string{"a", "b"}, nil},
		{40 * time.Second, []string{"a", "b"}, []string{"a"}},
		// a came back for a moment: its clock starts again.
		{50 * time.Second, []string{"b"}, nil},
		{60 * time.Second, []string{"a", "b"}, []string{"b"}},
		{100 * time.Second, []string{"a", "b"}, []string{"a", "b"}},
	}
	for _, s := range steps {
		got := q.due(sets.New(s.missing...), t0.Add(s.at))
		if !slices.Equal(got, s.want) {
			t.Errorf("at %v: due %v, want %v", s.at, got, s.want)
		}
	}
	q.found("a")
	if got := q.due(sets.New("a"), t0.Add(110*time.Second)); len(got) != 0 {
		t.Errorf("a node found live is due again at once: %v", got)
	}
}
