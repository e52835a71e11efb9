package scheduler

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func cacheNode(name, zone string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelTopologyZone: zone}},
		Status:     v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourcePods: resource.MustParse("10")}},
	}
}

func boundPod(name, node, cpu string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
}

func TestCache_AssumedPodHoldsRoomUntilConfirmedOrForgotten(t *testing.T) {
	c := newClusterCache()
	c.addNode(cacheNode("n1", "a"))
	s := newSnapshot(nil, nil)
	requested := func() int64 {
		c.update(s)
		return s.Node("n1").Requested.MilliCPU
	}
	c.assume(boundPod("p", "n1", "1"))
	if got := requested(); got != 1000 {
		t.Fatalf("assumed: requested %dm, want 1000m", got)
	}
	c.forget("p")
	if got := requested(); got != 0 {
		t.Fatalf("forgotten: requested %dm, want 0", got)
	}
	c.assume(boundPod("q", "n1", "2"))
	c.upsertPod(boundPod("q", "n1", "2"))
	if c.isAssumed("q") {
		t.Fatal("the informer's bound pod did not confirm the assumption")
	}
	c.forget("q") // too late: the pod is bound
	if got := requested(); got != 2000 {
		t.Fatalf("confirmed: requested %dm, want 2000m", got)
	}
	c.removePod("q")
	if got := requested(); got != 0 {
		t.Fatalf("deleted: requested %dm, want 0", got)
	}
}

func TestCache_PodsBoundBeforeTheirNodeArrivesAreCounted(t *testing.T) {
	c := newClusterCache()
	c.upsertPod(boundPod("early", "n1", "1"))
	s := newSnapshot(nil, nil)
	c.update(s)
	if len(s.Nodes()) != 0 {
		t.Fatalf("a node without its object is listed: %v", s.Nodes())
	}
	c.addNode(cacheNode("n1", "a"))
	c.update(s)
	if n := s.Node("n1"); n == nil || n.Requested.MilliCPU != 1000 {
		t.Fatalf("n1 = %+v, want 1000m requested", n)
	}
}

func TestCache_SnapshotCopiesOnlyChangedNodesAndKeepsOldCopiesIntact(t *testing.T) {
	c := newClusterCache()
	c.addNode(cacheNode("n1", "a"))
	c.addNode(cacheNode("n2", "a"))
	s := newSnapshot(nil, nil)
	c.update(s)
	before1, before2 := s.Node("n1"), s.Node("n2")
	c.assume(boundPod("p", "n1", "1"))
	c.update(s)
	if s.Node("n2") != before2 {
		t.Error("unchanged n2 was copied again")
	}
	if s.Node("n1") == before1 || before1.Requested.MilliCPU != 0 || s.Node("n1").Requested.MilliCPU != 1000 {
		t.Error("n1's old copy changed or its new copy is wrong")
	}
	if s.Nodes()[s.index["n1"]] != s.Node("n1") {
		t.Error("the node list holds a stale copy")
	}
}

func TestCache_NodesAreWalkedZoneByZone(t *testing.T) {
	c := newClusterCache()
	for _, n := range []*v1.Node{cacheNode("a1", "a"), cacheNode("a2", "a"), cacheNode("a3", "a"), cacheNode("b1", "b"), cacheNode("c1", "c"), cacheNode("c2", "c")} {
		c.addNode(n)
	}
	s := newSnapshot(nil, nil)
	c.update(s)
	var got []string
	for _, n := range s.Nodes() {
		got = append(got, n.Node.Name)
	}
	want := []string{"a1", "b1", "c1", "a2", "c2", "a3"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	c.removeNode("b1")
	c.update(s)
	if len(s.Nodes()) != 5 || s.Node("b1") != nil {
		t.Errorf("after removing b1: %d nodes", len(s.Nodes()))
	}
}
