package algorithm

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestScoreNodeResourcesFit(t *testing.T) {
	nodes := []*v1.Node{mkNode("big", "10", "20Gi"), mkNode("small", "4", "8Gi")}
	placed := []*v1.Pod{mkPod("o", on("big"), req("2", "4Gi")), mkPod("o2", on("small"), req("1", "2Gi"))}
	most := DefaultProfile()
	most.FitStrategy = MostAllocated
	tests := []struct {
		name    string
		profile Profile
		pod     *v1.Pod
		want    map[string]int64
	}{
		// big: 3/10 cpu and 6/20 GiB requested with the pod → 70 free;
		// small: 2/4 and 4/8 → 50.
		{"LeastAllocated favours free room", DefaultProfile(), mkPod("p", req("1", "2Gi")), map[string]int64{"big": 70, "small": 50}},
		{"MostAllocated favours fullness", most, mkPod("p", req("1", "2Gi")), map[string]int64{"big": 30, "small": 50}},
		// No requests: 100m and 200Mi count. big: cpu 2.1/10 → 79, mem
		// (20Gi−4Gi−200Mi)/20Gi → 79; small: 1.1/4 → 72, mem 2.2/8 → 72.
		{"request-less pods count at the non-zero defaults", DefaultProfile(), mkPod("p"), map[string]int64{"big": 79, "small": 72}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scoreAll(t, tt.profile, NodeResourcesFit, tt.pod, nodes, placed...); !equalMaps(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestScoreBalancedAllocation(t *testing.T) {
	nodes := []*v1.Node{mkNode("even", "4", "8Gi"), mkNode("skewed", "4", "4Gi")}
	// even: 2/4 cpu, 4/8 GiB → fractions .5/.5 → 100.
	// skewed: 2/4, 4/4 → |.5−1|/2 = .25 → 75.
	got := scoreAll(t, DefaultProfile(), NodeResourcesBalancedAllocation, mkPod("p", req("2", "4Gi")), nodes)
	if want := map[string]int64{"even": 100, "skewed": 75}; !equalMaps(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := scoreAll(t, DefaultProfile(), NodeResourcesBalancedAllocation, mkPod("p"), nodes); got != nil {
		t.Errorf("a pod requesting nothing should be skipped, got %v", got)
	}
}

func TestScoreImageLocality(t *testing.T) {
	const mb = 1024 * 1024
	nodes := []*v1.Node{
		mkNode("all", "1", "1Gi", images(500*mb, "docker.io/library/nginx:1.25"), images(300*mb, "registry.example/app:v1")),
		mkNode("nginx", "1", "1Gi", images(500*mb, "docker.io/library/nginx:1.25")),
		mkNode("none", "1", "1Gi"),
	}
	pod := mkPod("p", image("nginx:1.25"), image("registry.example/app:v1"))
	// Scaled: nginx is on 2 of 3 nodes → 333.3 MiB; app on 1 of 3 → 100
	// MiB. "all": 433.3 MiB of [23, 2000] → 100×(433.3−23)/1977 = 20;
	// "nginx": 333.3 → 15.
	got := scoreAll(t, DefaultProfile(), ImageLocality, pod, nodes)
	if want := map[string]int64{"all": 20, "nginx": 15, "none": 0}; !equalMaps(got, want) {
		t.Errorf("scaled: got %v, want %v", got, want)
	}
	p := DefaultProfile()
	p.ImageLocalityPresence = true
	got = scoreAll(t, p, ImageLocality, pod, nodes)
	if want := map[string]int64{"all": 100, "nginx": 50, "none": 0}; !equalMaps(got, want) {
		t.Errorf("presence: got %v, want %v", got, want)
	}
}

func TestScoreTaintToleration_FewerIntolerablePreferNoScheduleTaintsWin(t *testing.T) {
	soft := func(k string) v1.Taint { return v1.Taint{Key: k, Effect: v1.TaintEffectPreferNoSchedule} }
	nodes := []*v1.Node{mkNode("clean", "1", "1Gi"), mkNode("one", "1", "1Gi", taints(soft("a"))), mkNode("two", "1", "1Gi", taints(soft("a"), soft("b"))), mkNode("tolerated", "1", "1Gi", taints(soft("c")))}
	pod := mkPod("p", tolerate(v1.Toleration{Key: "c", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectPreferNoSchedule}))
	got := scoreAll(t, DefaultProfile(), TaintToleration, pod, nodes)
	if want := map[string]int64{"clean": 100, "one": 50, "two": 0, "tolerated": 100}; !equalMaps(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestScoreNodeAffinity_PreferredTermsNormalisedToTheBest(t *testing.T) {
	nodes := []*v1.Node{mkNode("both", "1", "1Gi", nodeLabels("ssd", "y", "zone", "a")), mkNode("ssd", "1", "1Gi", nodeLabels("ssd", "y")), mkNode("none", "1", "1Gi")}
	term := func(w int32, key string) v1.PreferredSchedulingTerm {
		return v1.PreferredSchedulingTerm{Weight: w, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: v1.NodeSelectorOpExists}}}}
	}
	pod := mkPod("p", affinity(&v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{term(8, "ssd"), term(2, "zone")}}}))
	got := scoreAll(t, DefaultProfile(), NodeAffinity, pod, nodes)
	if want := map[string]int64{"both": 100, "ssd": 80, "none": 0}; !equalMaps(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestScoreInterPodAffinity(t *testing.T) {
	nodes := []*v1.Node{
		mkNode("a1", "1", "1Gi", nodeLabels("zone", "a")),
		mkNode("a2", "1", "1Gi", nodeLabels("zone", "a")),
		mkNode("b1", "1", "1Gi", nodeLabels("zone", "b")),
	}
	cache := mkPod("cache", on("a1"), podLabels("app", "cache"))
	web := mkPod("web", on("a2"), podLabels("app", "web"))
	weighted := func(w int32, key string, kv ...string) v1.WeightedPodAffinityTerm {
		return v1.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: podAffinityTerm(key, selector(kv...))}
	}
	tests := []struct {
		name   string
		pod    *v1.Pod
		placed []*v1.Pod
		want   map[string]int64
	}{
		// zone a: +10 (cache); host a2: −5 (web) → a1 10, a2 5, b1 0.
		{"own preferred affinity and anti-affinity",
			mkPod("p", affinity(&v1.Affinity{
				PodAffinity:     &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{weighted(10, "zone", "app", "cache")}},
				PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{weighted(5, v1.LabelHostname, "app", "web")}},
			})),
			[]*v1.Pod{cache, web}, map[string]int64{"a1": 100, "a2": 50, "b1": 0}},
		// An existing pod on b1 prefers pods like p in its zone.
		{"existing pods' preferred affinity to the incoming pod",
			mkPod("p", podLabels("app", "api")),
			[]*v1.Pod{mkPod("friend", on("b1"), affinity(&v1.Affinity{PodAffinity: &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{weighted(7, "zone", "app", "api")}}}))},
			map[string]int64{"a1": 0, "a2": 0, "b1": 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scoreAll(t, DefaultProfile(), InterPodAffinity, tt.pod, nodes, tt.placed...); !equalMaps(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := scoreAll(t, DefaultProfile(), InterPodAffinity, mkPod("p"), nodes, cache); got != nil {
		t.Errorf("no affinity anywhere should skip the plugin, got %v", got)
	}
}

func TestScorePodTopologySpread_ScheduleAnywayPrefersEmptierDomains(t *testing.T) {
	nodes := []*v1.Node{
		mkNode("a1", "1", "1Gi", nodeLabels("zone", "a")),
		mkNode("a2", "1", "1Gi", nodeLabels("zone", "a")),
		mkNode("b1", "1", "1Gi", nodeLabels("zone", "b")),
		mkNode("nolabel", "1", "1Gi"),
	}
	web := func(n, node string) *v1.Pod { return mkPod(n, on(node), podLabels("app", "web")) }
	pod := mkPod("p", podLabels("app", "web"), spread("zone", 1, v1.ScheduleAnyway, selector("app", "web")))
	// zone a has 2, b 0; weight ln(2+2); a scores round(2×1.386) = 3,
	// b 0 → a: 100×(3+0−3)/3 = 0, b: 100; no zone label: 0.
	got := scoreAll(t, DefaultProfile(), PodTopologySpread, pod, nodes, web("w1", "a1"), web("w2", "a2"))
	if want := map[string]int64{"a1": 0, "a2": 0, "b1": 100, "nolabel": 0}; !equalMaps(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestNormalizeToMax(t *testing.T) {
	tests := []struct {
		name    string
		in      []int64
		reverse bool
		want    []int64
	}{
		{"scaled to the max", []int64{0, 5, 10}, false, []int64{0, 50, 100}},
		{"reversed", []int64{0, 5, 10}, true, []int64{100, 50, 0}},
		{"all zero", []int64{0, 0}, false, []int64{0, 0}},
		{"all zero reversed", []int64{0, 0}, true, []int64{100, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := append([]int64(nil), tt.in...)
			normalizeToMax(got, tt.reverse)
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestScorePodTopologySpread_SystemDefaultsSpreadPodsOfOneService(t *testing.T) {
	nodes := []*v1.Node{
		mkNode("a", "1", "1Gi", nodeLabels(v1.LabelTopologyZone, "z1")),
		mkNode("b", "1", "1Gi", nodeLabels(v1.LabelTopologyZone, "z1")),
		mkNode("nozone", "1", "1Gi"),
	}
	web := func(n, node string) *v1.Pod { return mkPod(n, on(node), podLabels("app", "web")) }
	placed := []*v1.Pod{web("w1", "a"), web("w2", "a"), mkPod("other", on("b"), podLabels("app", "db"))}
	pod := mkPod("p", podLabels("app", "web"))
	run := func(selectors func(*v1.Pod) labels.Selector) map[string]int64 {
		a := algorithmFor(t, DefaultProfile())
		st := NewSnapshot(nodes, placed)
		st.Selectors = selectors
		c, _ := a.newCycle(NewPodInfo(pod), st)
		ns := prepareSpreadScore(c, st.Nodes())
		if ns == nil {
			return nil
		}
		scores := make([]int64, len(st.Nodes()))
		for i, n := range st.Nodes() {
			scores[i] = ns.score(c, n)
		}
		ns.normalize(scores)
		out := map[string]int64{}
		for i, n := range st.Nodes() {
			out[n.Node.Name] = scores[i]
		}
		return out
	}
	if got := run(nil); got != nil {
		t.Errorf("a pod no Service or controller selects got default spreading: %v", got)
	}
	// Hostname (maxSkew 3, 3 nodes → weight ln 5) and zone (maxSkew 5, 2
	// domains z1 and "" → ln 4): a = 2×1.609+2 + 2×1.386+4 = 12.0 → 12;
	// b = 0+2 + 2×1.386+4 = 8.77 → 9; nozone = 0+2 (no zone label) → 2.
	// Normalised 100×(12+2−s)/12: a 16, b 41, nozone 100. The node without
	// a zone label is not ignored under the system defaults.
	got := run(func(*v1.Pod) labels.Selector { return labels.SelectorFromSet(labels.Set{"app": "web"}) })
	if want := map[string]int64{"a": 16, "b": 41, "nozone": 100}; !equalMaps(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
