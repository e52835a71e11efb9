package algorithm

import (
	"errors"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// problem2 is the seed's Problem 2 on the 0–100 scale: a 1 cpu / 2 GiB
// pod; Node1 8/16 with 4/8 already requested (5/10 with the pod) and the
// image; Node2 4/8 with 1/2 (2/4); Node3 16/32 with 3/6 (4/8).
func problem2(imageSize int64) ([]*v1.Node, []*v1.Pod, *v1.Pod) {
	nodes := []*v1.Node{
		mkNode("node1", "8", "16Gi", images(imageSize, "registry.example/app:v1")),
		mkNode("node2", "4", "8Gi"),
		mkNode("node3", "16", "32Gi"),
	}
	placed := []*v1.Pod{
		mkPod("e1", on("node1"), req("4", "8Gi")),
		mkPod("e2", on("node2"), req("1", "2Gi")),
		mkPod("e3", on("node3"), req("3", "6Gi")),
	}
	pod := mkPod("new", req("1", "2Gi"))
	pod.Spec.Containers[0].Image = "registry.example/app:v1"
	return nodes, placed, pod
}

func problem2Profile(presence bool) Profile {
	p := DefaultProfile()
	p.Scores = []Plugin{{NodeResourcesFit, 1}, {ImageLocality, 2}}
	p.ImageLocalityPresence = presence
	return p
}

func TestSchedule_Problem2_ImagePresenceOutweighsFreeRoom(t *testing.T) {
	nodes, placed, pod := problem2(500 * 1024 * 1024)
	a := algorithmFor(t, problem2Profile(true))
	// LeastAllocated: node1 (8−5)/8 = 37.5 → 37 (integer arithmetic, as
	// upstream), node2 50, node3 75. ImageLocality in presence mode:
	// 100, 0, 0, weight 2 → totals 237, 50, 75.
	if got := scoreAll(t, problem2Profile(true), NodeResourcesFit, pod, nodes, placed...); !equalMaps(got, map[string]int64{"node1": 37, "node2": 50, "node3": 75}) {
		t.Errorf("NodeResourcesFit = %v, want node1 37, node2 50, node3 75", got)
	}
	if got := scoreAll(t, problem2Profile(true), ImageLocality, pod, nodes, placed...); !equalMaps(got, map[string]int64{"node1": 100, "node2": 0, "node3": 0}) {
		t.Errorf("ImageLocality = %v, want node1 100, others 0", got)
	}
	r, err := a.Schedule(pod, NewSnapshot(nodes, placed))
	if err != nil {
		t.Fatal(err)
	}
	if r.Node != "node1" || r.Best.Total != 237 || r.RunnerUp.Node != "node3" || r.RunnerUp.Total != 75 {
		t.Errorf("got %s %d, runner-up %s %d; want node1 237, node3 75", r.Node, r.Best.Total, r.RunnerUp.Node, r.RunnerUp.Total)
	}
	want := "(score 237: NodeResourcesFit 37, ImageLocality 200; runner-up node3 75: NodeResourcesFit 75, ImageLocality 0)"
	if got := r.Explain(); got != want {
		t.Errorf("Explain() = %q, want %q", got, want)
	}
}

func TestSchedule_Problem2_ScaledImageLocalityNeedsABigImageToWin(t *testing.T) {
	// Upstream's formula scales the image by the share of nodes having it
	// (1 of 3) and maps [23 MiB, 1000 MiB] onto 0..100.
	tests := []struct {
		name      string
		size      int64
		wantImage int64
		wantNode  string
	}{
		// 2 GiB / 3 = 682.7 MiB → 100×(682.7−23)/977 = 67; 37+134 = 171.
		{"2 GiB image", 2048 * 1024 * 1024, 67, "node1"},
		// 500 MiB / 3 = 166.7 MiB → 14; 37+28 = 65 < node3's 75.
		{"500 MiB image", 500 * 1024 * 1024, 14, "node3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, placed, pod := problem2(tt.size)
			got := scoreAll(t, problem2Profile(false), ImageLocality, pod, nodes, placed...)
			if got["node1"] != tt.wantImage || got["node2"] != 0 || got["node3"] != 0 {
				t.Errorf("ImageLocality = %v, want node1 %d", got, tt.wantImage)
			}
			r, err := algorithmFor(t, problem2Profile(false)).Schedule(pod, NewSnapshot(nodes, placed))
			if err != nil {
				t.Fatal(err)
			}
			if r.Node != tt.wantNode {
				t.Errorf("picked %s (%s), want %s", r.Node, r.Explain(), tt.wantNode)
			}
		})
	}
}

func TestSchedule_DefaultProfileSpreadsEqualPodsEvenly(t *testing.T) {
	var nodes []*v1.Node
	for i := range 4 {
		nodes = append(nodes, mkNode(fmt.Sprintf("n%d", i), "16", "32Gi"))
	}
	a := algorithmFor(t, DefaultProfile())
	st := NewSnapshot(nodes, nil)
	count := map[string]int{}
	for i := range 40 {
		pod := mkPod(fmt.Sprintf("p%d", i), req("1", "1Gi"))
		r, err := a.Schedule(pod, st)
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.NodeName = r.Node
		st.Node(r.Node).AddPod(NewPodInfo(pod))
		count[r.Node]++
	}
	for _, n := range nodes {
		if count[n.Name] != 10 {
			t.Errorf("placement %v, want 10 per node", count)
			break
		}
	}
}

func TestSchedule_FitErrorMessageInUpstreamStyle(t *testing.T) {
	cp := v1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: v1.TaintEffectNoSchedule}
	nodes := []*v1.Node{mkNode("small", "1", "4Gi"), mkNode("cp1", "8", "8Gi", taints(cp)), mkNode("cp2", "8", "8Gi", taints(cp))}
	a := algorithmFor(t, DefaultProfile())
	st := NewSnapshot(nodes, nil)
	pod := mkPod("p", req("2", ""))
	_, err := a.Schedule(pod, st)
	var fe *FitError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a FitError", err)
	}
	if want := "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }."; fe.Error() != want {
		t.Errorf("got  %q\nwant %q", fe.Error(), want)
	}
	if !fe.Diagnosis.UnschedulablePlugins.Has(NodeResourcesFit) || !fe.Diagnosis.UnschedulablePlugins.Has(TaintToleration) {
		t.Errorf("unschedulable plugins = %v", fe.Diagnosis.UnschedulablePlugins)
	}
	p := a.Preempt(pod, st, &fe.Diagnosis, nil)
	if p.Node != "" {
		t.Fatalf("preemption found %v, want none", p)
	}
	fe.Diagnosis.PostFilterMsg = p.Message
	want := "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
	if fe.Error() != want {
		t.Errorf("got  %q\nwant %q", fe.Error(), want)
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	tests := []struct {
		pct   int32
		nodes int
		want  int
	}{
		{0, 50, 50},
		{0, 100, 100},
		{0, 1000, 420},  // 50 − 8 = 42%
		{0, 5000, 500},  // 50 − 40 = 10%
		{0, 6000, 300},  // 50 − 48 = 2% → 5%
		{30, 1000, 300}, // explicit
		{1, 1000, 100},  // never under 100 nodes
		{100, 5000, 5000},
	}
	for _, tt := range tests {
		if got := NumFeasibleNodesToFind(tt.pct, tt.nodes); got != tt.want {
			t.Errorf("NumFeasibleNodesToFind(%d%%, %d) = %d, want %d", tt.pct, tt.nodes, got, tt.want)
		}
	}
}

func TestSchedule_SearchResumesWhereTheLastStopped(t *testing.T) {
	var nodes []*v1.Node
	for i := range 300 {
		nodes = append(nodes, mkNode(fmt.Sprintf("n%03d", i), "8", "8Gi"))
	}
	a := algorithmFor(t, DefaultProfile())
	st := NewSnapshot(nodes, nil)
	want := NumFeasibleNodesToFind(0, 300) // 144
	for i := range 3 {
		r, err := a.Schedule(mkPod(fmt.Sprintf("p%d", i), req("1", "1Gi")), st)
		if err != nil {
			t.Fatal(err)
		}
		if r.Evaluated != want || a.nextStart != (i+1)*want%300 {
			t.Fatalf("pod %d: evaluated %d, next start %d; want %d and %d", i, r.Evaluated, a.nextStart, want, (i+1)*want%300)
		}
	}
}

func TestSchedule_MatchFieldsPinnedPodEvaluatesOnlyItsNode(t *testing.T) {
	var nodes []*v1.Node
	for i := range 500 {
		nodes = append(nodes, mkNode(fmt.Sprintf("n%03d", i), "8", "8Gi"))
	}
	pin := func(node string) *v1.Pod {
		return mkPod("ds", affinity(requiredNodeTerms(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node}}}})))
	}
	a := algorithmFor(t, DefaultProfile())
	st := NewSnapshot(nodes, nil)
	r, err := a.Schedule(pin("n123"), st)
	if err != nil || r.Node != "n123" || r.Evaluated != 1 {
		t.Fatalf("got %+v, %v; want n123 after evaluating 1 node", r, err)
	}
	_, err = a.Schedule(pin("gone"), st)
	if want := "0/500 nodes are available: 500 node(s) didn't match Pod's node affinity/selector."; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestSchedule_NominatedPodReservesRoomAgainstLowerPriority(t *testing.T) {
	nodes := []*v1.Node{mkNode("n", "2", "4Gi")}
	nominated := mkPod("big", req("2", ""), priority(10))
	nominated.Status.NominatedNodeName = "n"
	st := NewSnapshot(nodes, []*v1.Pod{nominated})
	a := algorithmFor(t, DefaultProfile())
	if _, err := a.Schedule(mkPod("low", req("1", ""), priority(5)), st); err == nil || err.Error() != "0/1 nodes are available: 1 Insufficient cpu." {
		t.Errorf("lower priority: err = %v, want Insufficient cpu", err)
	}
	if r, err := a.Schedule(mkPod("high", req("1", ""), priority(20)), st); err != nil || r.Node != "n" {
		t.Errorf("higher priority: %v, %v; want n", r, err)
	}
}

func TestSchedule_NominatedNodeIsTriedFirst(t *testing.T) {
	nodes := []*v1.Node{mkNode("a", "8", "8Gi"), mkNode("b", "2", "8Gi")}
	pod := mkPod("p", req("1", ""))
	pod.Status.NominatedNodeName = "b"
	r, err := algorithmFor(t, DefaultProfile()).Schedule(pod, NewSnapshot(nodes, nil))
	if err != nil || r.Node != "b" || !r.Nominated {
		t.Errorf("got %+v, %v; want nominated node b", r, err)
	}
}

func TestSchedule_NoNodes(t *testing.T) {
	_, err := algorithmFor(t, DefaultProfile()).Schedule(mkPod("p"), NewSnapshot(nil, nil))
	if err == nil || err.Error() != "no nodes available to schedule pods" {
		t.Errorf("err = %v", err)
	}
}
