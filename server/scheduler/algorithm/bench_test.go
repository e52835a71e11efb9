package algorithm

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkSchedule is the algorithm alone (no API server): one pod per op
// on clusters already holding 10 pods per node, each placed pod added to
// the state as the runner's assume would.
//
//	go test -run '^$' -bench Schedule ./server/scheduler/algorithm/
func BenchmarkSchedule(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			var ns []*v1.Node
			var pods []*v1.Pod
			for i := range nodes {
				name := fmt.Sprintf("n%05d", i)
				ns = append(ns, mkNode(name, "32", "128Gi", nodeLabels(v1.LabelTopologyZone, fmt.Sprintf("z%d", i%3))))
				for j := range 10 {
					pods = append(pods, mkPod(fmt.Sprintf("%s-%d", name, j), on(name), req("100m", "128Mi"), podLabels("app", fmt.Sprintf("a%d", j))))
				}
			}
			st := NewSnapshot(ns, pods)
			a, err := New(DefaultProfile(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				pod := mkPod(fmt.Sprintf("p%d", i), req("100m", "128Mi"), podLabels("app", "bench"))
				r, err := a.Schedule(pod, st)
				if err != nil {
					b.Fatal(err)
				}
				pod.Spec.NodeName = r.Node
				st.Node(r.Node).AddPod(NewPodInfo(pod))
			}
		})
	}
}
