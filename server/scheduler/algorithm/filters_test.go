package algorithm

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodRequests_CountsInitContainersSidecarsAndOverheadAsUpstream(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	ctr := func(cpu string, sidecar bool) v1.Container {
		c := v1.Container{Name: "x", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}
		if sidecar {
			c.RestartPolicy = &always
		}
		return c
	}
	tests := []struct {
		name         string
		init, app    []v1.Container
		overhead     string
		wantMilliCPU int64
	}{
		{"app containers add up", nil, []v1.Container{ctr("1", false), ctr("500m", false)}, "", 1500},
		{"largest init container wins over a smaller app sum", []v1.Container{ctr("3", false), ctr("1", false)}, []v1.Container{ctr("1", false)}, "", 3000},
		{"app sum wins over smaller init containers", []v1.Container{ctr("1", false)}, []v1.Container{ctr("2", false)}, "", 2000},
		{"sidecars add to the app sum", []v1.Container{ctr("1", true)}, []v1.Container{ctr("1", false)}, "", 2000},
		{"an init container runs beside earlier sidecars", []v1.Container{ctr("1", true), ctr("2", false)}, []v1.Container{ctr("500m", false)}, "", 3000},
		{"overhead is added", nil, []v1.Container{ctr("1", false)}, "250m", 1250},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{InitContainers: tt.init, Containers: tt.app}}
			if tt.overhead != "" {
				pod.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse(tt.overhead)}
			}
			if got := PodRequests(pod).MilliCPU; got != tt.wantMilliCPU {
				t.Errorf("PodRequests cpu = %dm, want %dm", got, tt.wantMilliCPU)
			}
		})
	}
}

func TestPodNonZeroRequests_DefaultsMissingRequestsPerContainer(t *testing.T) {
	pod := mkPod("p", req("", ""), req("1", ""))
	got := PodNonZeroRequests(pod)
	if got.MilliCPU != 1100 || got.Memory != 2*DefaultMemoryRequest {
		t.Errorf("non-zero = %dm / %d, want 1100m / %d", got.MilliCPU, got.Memory, 2*DefaultMemoryRequest)
	}
	if real := PodRequests(pod); real.MilliCPU != 1000 || real.Memory != 0 {
		t.Errorf("real requests = %dm / %d, want 1000m / 0", real.MilliCPU, real.Memory)
	}
}

func TestFilterFit(t *testing.T) {
	gpu := v1.ResourceName("example.com/gpu")
	withGPU := func(n string) podOpt {
		return func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "g", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{gpu: resource.MustParse(n)}}})
		}
	}
	tests := []struct {
		name    string
		pod     *v1.Pod
		node    *v1.Node
		placed  []*v1.Pod
		ignored []string
		want    string
	}{
		{"fits", mkPod("p", req("1", "1Gi")), mkNode("n", "2", "2Gi"), nil, nil, ""},
		{"insufficient cpu counting placed pods", mkPod("p", req("1", "1Gi")), mkNode("n", "2", "4Gi"), []*v1.Pod{mkPod("o", on("n"), req("1500m", ""))}, nil, "Insufficient cpu"},
		{"insufficient cpu and memory both reported", mkPod("p", req("3", "3Gi")), mkNode("n", "2", "2Gi"), nil, nil, "Insufficient cpu, Insufficient memory"},
		{"too many pods", mkPod("p"), mkNode("n", "2", "2Gi", allocatable(v1.ResourcePods, "1")), []*v1.Pod{mkPod("o", on("n"))}, nil, "Too many pods"},
		{"request-less pod fits a full node", mkPod("p"), mkNode("n", "1", "1Gi"), []*v1.Pod{mkPod("o", on("n"), req("1", "1Gi"))}, nil, ""},
		{"ephemeral storage", mkPod("p", func(p *v1.Pod) {
			p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}}}}
		}), mkNode("n", "1", "1Gi", allocatable(v1.ResourceEphemeralStorage, "5Gi")), nil, nil, "Insufficient ephemeral-storage"},
		{"extended resource short", mkPod("p", withGPU("2")), mkNode("n", "1", "1Gi", allocatable(gpu, "1")), nil, nil, "Insufficient example.com/gpu"},
		{"extended resource missing on node", mkPod("p", withGPU("1")), mkNode("n", "1", "1Gi"), nil, nil, "Insufficient example.com/gpu"},
		{"extended resource ignored by config", mkPod("p", withGPU("1")), mkNode("n", "1", "1Gi"), nil, []string{"example.com/gpu"}, ""},
		{"init container larger than the node", mkPod("p", req("1", ""), func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}}}
		}), mkNode("n", "2", "2Gi"), nil, nil, "Insufficient cpu"},
		{"overhead tips it over", mkPod("p", req("1", ""), func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")} }), mkNode("n", "2", "2Gi"), nil, nil, "Insufficient cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultProfile()
			p.Filters = []string{NodeResourcesFit}
			p.IgnoredResources = tt.ignored
			a := algorithmFor(t, p)
			st := NewSnapshot([]*v1.Node{tt.node}, tt.placed)
			c, _ := a.newCycle(NewPodInfo(tt.pod), st)
			if got := c.filter(st.Nodes()[0]).Message(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFilterFit_RequestLargerThanNodeIsUnresolvable(t *testing.T) {
	a := algorithmFor(t, DefaultProfile())
	st := NewSnapshot([]*v1.Node{mkNode("small", "1", "4Gi"), mkNode("busy", "4", "4Gi")}, []*v1.Pod{mkPod("o", on("busy"), req("3", ""))})
	c, _ := a.newCycle(NewPodInfo(mkPod("p", req("2", ""))), st)
	if s := c.filter(st.Node("small")); s.Code != UnschedulableAndUnresolvable {
		t.Errorf("small node: code %v, want UnschedulableAndUnresolvable", s.Code)
	}
	if s := c.filter(st.Node("busy")); s.Code != Unschedulable {
		t.Errorf("busy node: code %v, want Unschedulable (preemption could help)", s.Code)
	}
}

func TestSimpleFilters(t *testing.T) {
	cp := v1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: v1.TaintEffectNoSchedule}
	tests := []struct {
		name   string
		plugin string
		pod    *v1.Pod
		nodes  []*v1.Node
		placed []*v1.Pod
		want   map[string]string
	}{
		{"NodeName rejects other nodes", NodeName, mkPod("p", on("b")), []*v1.Node{mkNode("a", "1", "1Gi"), mkNode("b", "1", "1Gi")}, nil,
			map[string]string{"a": ReasonNodeName, "b": ""}},
		{"NodeUnschedulable rejects cordoned nodes", NodeUnschedulable, mkPod("p"), []*v1.Node{mkNode("a", "1", "1Gi", cordoned), mkNode("b", "1", "1Gi")}, nil,
			map[string]string{"a": ReasonUnschedulable, "b": ""}},
		{"NodeUnschedulable passes a pod tolerating the unschedulable taint", NodeUnschedulable,
			mkPod("p", tolerate(v1.Toleration{Key: taintUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})),
			[]*v1.Node{mkNode("a", "1", "1Gi", cordoned)}, nil, map[string]string{"a": ""}},
		{"taints NoSchedule and NoExecute must be tolerated", TaintToleration, mkPod("p"),
			[]*v1.Node{mkNode("a", "1", "1Gi", taints(cp)), mkNode("b", "1", "1Gi", taints(v1.Taint{Key: "k", Value: "v", Effect: v1.TaintEffectNoExecute})), mkNode("c", "1", "1Gi", taints(v1.Taint{Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}))}, nil,
			map[string]string{"a": "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }", "b": "node(s) had untolerated taint {k: v}", "c": ""}},
		{"tolerations by Exists and by value", TaintToleration,
			mkPod("p", tolerate(v1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: v1.TolerationOpExists}, v1.Toleration{Key: "k", Value: "other", Effect: v1.TaintEffectNoExecute})),
			[]*v1.Node{mkNode("a", "1", "1Gi", taints(cp)), mkNode("b", "1", "1Gi", taints(v1.Taint{Key: "k", Value: "v", Effect: v1.TaintEffectNoExecute}))}, nil,
			map[string]string{"a": "", "b": "node(s) had untolerated taint {k: v}"}},
		{"nodeSelector", NodeAffinity, mkPod("p", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			[]*v1.Node{mkNode("a", "1", "1Gi", nodeLabels("disk", "ssd")), mkNode("b", "1", "1Gi", nodeLabels("disk", "hdd")), mkNode("c", "1", "1Gi")}, nil,
			map[string]string{"a": "", "b": ReasonNodeAffinity, "c": ReasonNodeAffinity}},
		{"required node affinity expressions are ANDed within a term, terms ORed", NodeAffinity, mkPod("p", affinity(requiredNodeTerms(
			v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}}, {Key: "gpu", Operator: v1.NodeSelectorOpDoesNotExist}}},
			v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "cores", Operator: v1.NodeSelectorOpGt, Values: []string{"32"}}}},
		))), []*v1.Node{
			mkNode("n1", "1", "1Gi", nodeLabels("zone", "a")),
			mkNode("n2", "1", "1Gi", nodeLabels("zone", "a", "gpu", "yes")),
			mkNode("n3", "1", "1Gi", nodeLabels("zone", "c", "cores", "64")),
			mkNode("n4", "1", "1Gi", nodeLabels("zone", "c", "cores", "16")),
		}, nil, map[string]string{"n1": "", "n2": ReasonNodeAffinity, "n3": "", "n4": ReasonNodeAffinity}},
		{"matchFields metadata.name pins a DaemonSet pod", NodeAffinity, mkPod("p", affinity(requiredNodeTerms(
			v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{"b"}}}},
		))), []*v1.Node{mkNode("a", "1", "1Gi"), mkNode("b", "1", "1Gi"), mkNode("c", "1", "1Gi")}, nil,
			map[string]string{"a": ReasonNodeAffinity, "b": "", "c": ReasonNodeAffinity}},
		{"matchFields NotIn excludes a node", NodeAffinity, mkPod("p", affinity(requiredNodeTerms(
			v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpNotIn, Values: []string{"a"}}}},
		))), []*v1.Node{mkNode("a", "1", "1Gi"), mkNode("b", "1", "1Gi")}, nil,
			map[string]string{"a": ReasonNodeAffinity, "b": ""}},
		{"host ports conflict by protocol and IP", NodePorts, mkPod("p", hostPort(8080, "", "")),
			[]*v1.Node{mkNode("a", "1", "1Gi"), mkNode("b", "1", "1Gi"), mkNode("c", "1", "1Gi"), mkNode("d", "1", "1Gi")},
			[]*v1.Pod{mkPod("o1", on("a"), hostPort(8080, "", "")), mkPod("o2", on("b"), hostPort(8080, "", v1.ProtocolUDP)), mkPod("o3", on("c"), hostPort(8080, "10.0.0.1", "")), mkPod("o4", on("d"), hostPort(9090, "", ""))},
			map[string]string{"a": ReasonNodePorts, "b": "", "c": ReasonNodePorts, "d": ""}},
		{"a specific host IP conflicts with itself and the wildcard only", NodePorts, mkPod("p", hostPort(8080, "10.0.0.2", "")),
			[]*v1.Node{mkNode("a", "1", "1Gi"), mkNode("b", "1", "1Gi"), mkNode("c", "1", "1Gi")},
			[]*v1.Pod{mkPod("o1", on("a"), hostPort(8080, "10.0.0.1", "")), mkPod("o2", on("b"), hostPort(8080, "10.0.0.2", "")), mkPod("o3", on("c"), hostPort(8080, "0.0.0.0", ""))},
			map[string]string{"a": "", "b": ReasonNodePorts, "c": ReasonNodePorts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := filterAll(t, tt.plugin, tt.pod, tt.nodes, tt.placed...); !equalMaps(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func requiredNodeTerms(terms ...v1.NodeSelectorTerm) *v1.Affinity {
	return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
}

func podAffinityTerm(key string, sel *metav1.LabelSelector) v1.PodAffinityTerm {
	return v1.PodAffinityTerm{TopologyKey: key, LabelSelector: sel}
}

func TestFilterInterPodAffinity(t *testing.T) {
	zoned := func(name, zone string) *v1.Node { return mkNode(name, "4", "4Gi", nodeLabels("zone", zone)) }
	nodes := []*v1.Node{zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), mkNode("x", "4", "4Gi")}
	db := mkPod("db", on("a1"), podLabels("app", "db"))
	tests := []struct {
		name   string
		pod    *v1.Pod
		placed []*v1.Pod
		want   map[string]string
	}{
		{"required affinity: only the zone holding a match, and only nodes with the key",
			mkPod("p", affinity(&v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{podAffinityTerm("zone", selector("app", "db"))}}})),
			[]*v1.Pod{db}, map[string]string{"a1": "", "a2": "", "b1": ReasonPodAffinity, "x": ReasonPodAffinity}},
		{"required affinity to itself lets the first pod of the group in",
			mkPod("p", podLabels("app", "web"), affinity(&v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{podAffinityTerm("zone", selector("app", "web"))}}})),
			[]*v1.Pod{db}, map[string]string{"a1": "", "a2": "", "b1": "", "x": ReasonPodAffinity}},
		{"required affinity ignores pods of other namespaces",
			mkPod("p", affinity(&v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{podAffinityTerm("zone", selector("app", "db"))}}})),
			[]*v1.Pod{func() *v1.Pod { p := mkPod("db", on("a1"), podLabels("app", "db")); p.Namespace = "other"; return p }()},
			map[string]string{"a1": ReasonPodAffinity, "a2": ReasonPodAffinity, "b1": ReasonPodAffinity, "x": ReasonPodAffinity}},
		{"required anti-affinity keeps the pod out of the zone holding a match",
			mkPod("p", affinity(&v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{podAffinityTerm("zone", selector("app", "db"))}}})),
			[]*v1.Pod{db}, map[string]string{"a1": ReasonPodAntiAffinity, "a2": ReasonPodAntiAffinity, "b1": "", "x": ""}},
		{"an existing pod's anti-affinity keeps the incoming pod away",
			mkPod("p", podLabels("app", "web")),
			[]*v1.Pod{mkPod("lonely", on("b1"), affinity(&v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{podAffinityTerm(v1.LabelHostname, selector("app", "web"))}}}))},
			map[string]string{"a1": "", "a2": "", "b1": ReasonExistingAntiAff, "x": ""}},
		{"namespaceSelector selects pods by their namespace's labels",
			mkPod("p", affinity(&v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "zone", LabelSelector: selector("app", "db"), NamespaceSelector: selector("team", "data")}}}})),
			[]*v1.Pod{func() *v1.Pod { p := mkPod("db", on("b1"), podLabels("app", "db")); p.Namespace = "data"; return p }()},
			map[string]string{"a1": "", "a2": "", "b1": ReasonPodAntiAffinity, "x": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultProfile()
			p.Filters = []string{InterPodAffinity}
			a := algorithmFor(t, p)
			st := NewSnapshot(nodes, tt.placed)
			st.Namespaces["data"] = map[string]string{"team": "data"}
			c, s := a.newCycle(NewPodInfo(tt.pod), st)
			if s != nil {
				t.Fatal(s.Message())
			}
			got := map[string]string{}
			for _, n := range st.Nodes() {
				got[n.Node.Name] = c.filter(n).Message()
			}
			if !equalMaps(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func spread(key string, skew int32, action v1.UnsatisfiableConstraintAction, sel *metav1.LabelSelector, tweak ...func(*v1.TopologySpreadConstraint)) podOpt {
	return func(p *v1.Pod) {
		c := v1.TopologySpreadConstraint{MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: action, LabelSelector: sel}
		for _, f := range tweak {
			f(&c)
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	}
}

func TestFilterPodTopologySpread(t *testing.T) {
	zoned := func(name, zone string, opts ...nodeOpt) *v1.Node {
		return mkNode(name, "4", "4Gi", append([]nodeOpt{nodeLabels("zone", zone)}, opts...)...)
	}
	web := func(name, node string) *v1.Pod { return mkPod(name, on(node), podLabels("app", "web")) }
	ignore, honor := v1.NodeInclusionPolicyIgnore, v1.NodeInclusionPolicyHonor
	three := int32(3)
	tests := []struct {
		name   string
		pod    *v1.Pod
		nodes  []*v1.Node
		placed []*v1.Pod
		want   map[string]string
	}{
		{"skew over maxSkew is rejected, nodes without the key too",
			mkPod("p", podLabels("app", "web"), spread("zone", 1, v1.DoNotSchedule, selector("app", "web"))),
			[]*v1.Node{zoned("a1", "a"), zoned("b1", "b"), mkNode("x", "4", "4Gi")},
			[]*v1.Pod{web("w1", "a1")},
			map[string]string{"a1": ReasonSpreadSkew, "b1": "", "x": ReasonSpreadMissing}},
		{"a pod not matching its own selector does not count itself",
			mkPod("p", spread("zone", 1, v1.DoNotSchedule, selector("app", "web"))),
			[]*v1.Node{zoned("a1", "a"), zoned("b1", "b")},
			[]*v1.Pod{web("w1", "a1")},
			map[string]string{"a1": "", "b1": ""}},
		{"terminating pods are not counted",
			mkPod("p", podLabels("app", "web"), spread("zone", 1, v1.DoNotSchedule, selector("app", "web"))),
			[]*v1.Node{zoned("a1", "a"), zoned("b1", "b")},
			[]*v1.Pod{func() *v1.Pod { p := web("w1", "a1"); now := metav1.Now(); p.DeletionTimestamp = &now; return p }()},
			map[string]string{"a1": "", "b1": ""}},
		{"minDomains above the number of domains makes the minimum 0",
			mkPod("p", podLabels("app", "web"), spread("zone", 1, v1.DoNotSchedule, selector("app", "web"), func(c *v1.TopologySpreadConstraint) { c.MinDomains = &three })),
			[]*v1.Node{zoned("a1", "a"), zoned("b1", "b")},
			[]*v1.Pod{web("w1", "a1"), web("w2", "b1")},
			map[string]string{"a1": ReasonSpreadSkew, "b1": ReasonSpreadSkew}},
		{"nodeAffinityPolicy Honor (default) leaves domains the pod cannot use out of the minimum",
			mkPod("p", podLabels("app", "web"), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }, spread("zone", 1, v1.DoNotSchedule, selector("app", "web"))),
			[]*v1.Node{zoned("a1", "a", nodeLabels("disk", "ssd")), zoned("b1", "b")},
			[]*v1.Pod{web("w1", "a1")},
			map[string]string{"a1": "", "b1": ""}},
		{"nodeAffinityPolicy Ignore counts them",
			mkPod("p", podLabels("app", "web"), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }, spread("zone", 1, v1.DoNotSchedule, selector("app", "web"), func(c *v1.TopologySpreadConstraint) { c.NodeAffinityPolicy = &ignore })),
			[]*v1.Node{zoned("a1", "a", nodeLabels("disk", "ssd")), zoned("b1", "b")},
			[]*v1.Pod{web("w1", "a1")},
			map[string]string{"a1": ReasonSpreadSkew, "b1": ""}},
		{"nodeTaintsPolicy Honor leaves tainted domains out of the minimum",
			mkPod("p", podLabels("app", "web"), spread("zone", 1, v1.DoNotSchedule, selector("app", "web"), func(c *v1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &honor })),
			[]*v1.Node{zoned("a1", "a"), zoned("b1", "b", taints(v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}))},
			[]*v1.Pod{web("w1", "a1")},
			map[string]string{"a1": "", "b1": ""}},
		{"ScheduleAnyway constraints never filter",
			mkPod("p", podLabels("app", "web"), spread("zone", 1, v1.ScheduleAnyway, selector("app", "web"))),
			[]*v1.Node{zoned("a1", "a"), zoned("b1", "b")},
			[]*v1.Pod{web("w1", "a1"), web("w2", "a1")},
			map[string]string{"a1": "", "b1": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := filterAll(t, PodTopologySpread, tt.pod, tt.nodes, tt.placed...); !equalMaps(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
