package algorithm

import (
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const gi = 1024 * 1024 * 1024

type nodeOpt func(*v1.Node)

func mkNode(name, cpu, mem string, opts ...nodeOpt) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}}}
	n.Status.Allocatable = v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(cpu),
		v1.ResourceMemory: resource.MustParse(mem),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func nodeLabels(kv ...string) nodeOpt {
	return func(n *v1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func taints(ts ...v1.Taint) nodeOpt {
	return func(n *v1.Node) { n.Spec.Taints = append(n.Spec.Taints, ts...) }
}

func allocatable(name v1.ResourceName, q string) nodeOpt {
	return func(n *v1.Node) { n.Status.Allocatable[name] = resource.MustParse(q) }
}

func images(size int64, names ...string) nodeOpt {
	return func(n *v1.Node) {
		n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: names, SizeBytes: size})
	}
}

func cordoned(n *v1.Node) { n.Spec.Unschedulable = true }

type podOpt func(*v1.Pod)

func mkPod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}}
	for _, o := range opts {
		o(p)
	}
	if len(p.Spec.Containers) == 0 {
		p.Spec.Containers = []v1.Container{{Name: "c", Image: "app"}}
	}
	return p
}

// req adds a container requesting cpu and memory ("" for none).
func req(cpu, mem string) podOpt {
	return func(p *v1.Pod) {
		c := v1.Container{Name: "c", Image: "app", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}}}
		if cpu != "" {
			c.Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			c.Resources.Requests[v1.ResourceMemory] = resource.MustParse(mem)
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
}

func image(img string) podOpt {
	return func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c", Image: img}) }
}

func on(node string) podOpt { return func(p *v1.Pod) { p.Spec.NodeName = node } }

func podLabels(kv ...string) podOpt {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func priority(v int32) podOpt { return func(p *v1.Pod) { p.Spec.Priority = &v } }

func tolerate(ts ...v1.Toleration) podOpt {
	return func(p *v1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, ts...) }
}

func affinity(a *v1.Affinity) podOpt { return func(p *v1.Pod) { p.Spec.Affinity = a } }

func hostPort(port int32, ip string, proto v1.Protocol) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c", Image: "app", Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: ip, Protocol: proto}}})
	}
}

func selector(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func algorithmFor(t *testing.T, p Profile) *Algorithm {
	t.Helper()
	a, err := New(p, Options{Parallelism: 1, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// filterAll runs one filter plugin on every node and returns each node's
// first reason ("" when it passes).
func filterAll(t *testing.T, plugin string, pod *v1.Pod, nodes []*v1.Node, pods ...*v1.Pod) map[string]string {
	t.Helper()
	p := DefaultProfile()
	p.Filters = []string{plugin}
	a := algorithmFor(t, p)
	st := NewSnapshot(nodes, pods)
	c, s := a.newCycle(NewPodInfo(pod), st)
	out := map[string]string{}
	for _, n := range st.Nodes() {
		if s != nil {
			out[n.Node.Name] = s.Message()
			continue
		}
		if c.only != nil && !c.only.Has(n.Node.Name) {
			out[n.Node.Name] = ReasonNodeAffinity
			continue
		}
		out[n.Node.Name] = c.filter(n).Message()
	}
	return out
}

// scoreAll runs one score plugin (weight 1) over every node as feasible and
// returns the normalised scores; nil when the plugin skips the pod.
func scoreAll(t *testing.T, p Profile, plugin string, pod *v1.Pod, nodes []*v1.Node, pods ...*v1.Pod) map[string]int64 {
	t.Helper()
	a := algorithmFor(t, p)
	st := NewSnapshot(nodes, pods)
	c, s := a.newCycle(NewPodInfo(pod), st)
	if s != nil {
		t.Fatalf("pre-filter: %s", s.Message())
	}
	ns := scorePrepares[plugin](c, st.Nodes())
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

func equalMaps[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
