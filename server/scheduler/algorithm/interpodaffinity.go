package algorithm

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

type topologyPair struct {
	key, value string
}

// pairCounts counts matching pods per topology domain; zero counts are
// deleted so that an empty map means "no pod anywhere".
type pairCounts map[topologyPair]int64

func (m pairCounts) update(node *v1.Node, key string, delta int64) {
	v, ok := node.Labels[key]
	if !ok {
		return
	}
	p := topologyPair{key, v}
	m[p] += delta
	if m[p] == 0 {
		delete(m, p)
	}
}

func (m pairCounts) clone() pairCounts {
	out := make(pairCounts, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// affinityState is InterPodAffinity's pre-filter result: for the incoming
// pod, the domains holding pods its required terms match, and the domains
// where existing pods' required anti-affinity forbids it.
type affinityState struct {
	existingAnti pairCounts
	affinity     pairCounts
	anti         pairCounts
}

// newAffinityState walks every pod only when the incoming pod has required
// terms of its own; existing anti-affinity needs only the nodes that have
// such pods.
func newAffinityState(c *cycle) *affinityState {
	pi := c.pi
	s := &affinityState{existingAnti: pairCounts{}, affinity: pairCounts{}, anti: pairCounts{}}
	for _, n := range c.st.NodesWithRequiredAntiAffinityPods() {
		if n.Node == nil {
			continue
		}
		for _, p := range n.PodsWithRequiredAntiAffinity {
			s.addExistingAnti(c, p, n, 1)
		}
	}
	if len(pi.RequiredAffinity) == 0 && len(pi.RequiredAntiAffinity) == 0 {
		return s
	}
	for _, n := range c.st.Nodes() {
		for _, p := range n.Pods {
			s.addIncomingTerms(c, p, n, 1)
		}
	}
	return s
}

func (s *affinityState) addExistingAnti(c *cycle, p *PodInfo, n *NodeInfo, delta int64) {
	for i := range p.RequiredAntiAffinity {
		t := &p.RequiredAntiAffinity[i]
		if t.Matches(c.pi.Pod, c.nsLabels) {
			s.existingAnti.update(n.Node, t.TopologyKey, delta)
		}
	}
}

func (s *affinityState) addIncomingTerms(c *cycle, p *PodInfo, n *NodeInfo, delta int64) {
	pi := c.pi
	if len(pi.RequiredAffinity) > 0 && matchesAll(c, pi.RequiredAffinity, p.Pod) {
		for i := range pi.RequiredAffinity {
			s.affinity.update(n.Node, pi.RequiredAffinity[i].TopologyKey, delta)
		}
	}
	for i := range pi.RequiredAntiAffinity {
		t := &pi.RequiredAntiAffinity[i]
		if t.Matches(p.Pod, c.podNSLabels(t, p.Pod)) {
			s.anti.update(n.Node, t.TopologyKey, delta)
		}
	}
}

// addPod and removePod keep the state right when a dry run adds a
// nominated pod to a node or takes a victim off it.
func (s *affinityState) addPod(c *cycle, p *PodInfo, n *NodeInfo, delta int64) {
	if n.Node == nil {
		return
	}
	s.addExistingAnti(c, p, n, delta)
	s.addIncomingTerms(c, p, n, delta)
}

func (s *affinityState) clone() *affinityState {
	return &affinityState{existingAnti: s.existingAnti.clone(), affinity: s.affinity.clone(), anti: s.anti.clone()}
}

func matchesAll(c *cycle, terms []AffinityTerm, pod *v1.Pod) bool {
	for i := range terms {
		if !terms[i].Matches(pod, c.podNSLabels(&terms[i], pod)) {
			return false
		}
	}
	return true
}

// podNSLabels fetches pod's namespace labels only for terms that need them.
func (c *cycle) podNSLabels(t *AffinityTerm, pod *v1.Pod) labels.Set {
	if !t.selectsNamespaces {
		return nil
	}
	return c.st.NamespaceLabels(pod.Namespace)
}

func filterInterPodAffinity(c *cycle, n *NodeInfo) *Status {
	s := c.affinity
	if s == nil {
		return nil
	}
	for p, count := range s.existingAnti {
		if v, ok := n.Node.Labels[p.key]; ok && count > 0 && v == p.value {
			return statusExistingAntiAff
		}
	}
	for i := range c.pi.RequiredAntiAffinity {
		t := &c.pi.RequiredAntiAffinity[i]
		if v, ok := n.Node.Labels[t.TopologyKey]; ok && s.anti[topologyPair{t.TopologyKey, v}] > 0 {
			return statusPodAntiAffinity
		}
	}
	if !s.satisfiesAffinity(c, n) {
		return statusPodAffinity
	}
	return nil
}

// satisfiesAffinity lets the first pod of a group that has affinity to
// itself through when no pod matches yet, or it would wait forever.
func (s *affinityState) satisfiesAffinity(c *cycle, n *NodeInfo) bool {
	terms := c.pi.RequiredAffinity
	if len(terms) == 0 {
		return true
	}
	exist := true
	for i := range terms {
		v, ok := n.Node.Labels[terms[i].TopologyKey]
		if !ok {
			return false
		}
		if s.affinity[topologyPair{terms[i].TopologyKey, v}] <= 0 {
			exist = false
		}
	}
	if exist {
		return true
	}
	return len(s.affinity) == 0 && matchesAll(c, terms, c.pi.Pod)
}

// affinityScorer adds up, per topology domain, the weights of preferred
// terms between the incoming pod and existing pods in both directions
// (existing pods' required affinity to it counting HardPodAffinityWeight).
type affinityScorer struct {
	domains map[string]map[string]int64
}

func prepareAffinityScore(c *cycle, _ []*NodeInfo) nodeScorer {
	pi := c.pi
	own := len(pi.PreferredAffinity)+len(pi.PreferredAntiAffinity) > 0
	nodes := c.st.NodesWithAffinityPods()
	if own {
		nodes = c.st.Nodes()
	}
	if !own && len(nodes) == 0 {
		return nil
	}
	s := &affinityScorer{domains: map[string]map[string]int64{}}
	for _, n := range nodes {
		if n.Node == nil || len(n.Node.Labels) == 0 {
			continue
		}
		pods := n.PodsWithAffinity
		if own {
			pods = n.Pods
		}
		for _, p := range pods {
			s.existingPod(c, p, n.Node)
		}
	}
	return s
}

func (s *affinityScorer) add(node *v1.Node, key string, w int64) {
	v, ok := node.Labels[key]
	if !ok || w == 0 {
		return
	}
	m := s.domains[key]
	if m == nil {
		m = map[string]int64{}
		s.domains[key] = m
	}
	m[v] += w
}

func (s *affinityScorer) existingPod(c *cycle, p *PodInfo, node *v1.Node) {
	pi := c.pi
	for i := range pi.PreferredAffinity {
		t := &pi.PreferredAffinity[i]
		if t.Matches(p.Pod, c.podNSLabels(&t.AffinityTerm, p.Pod)) {
			s.add(node, t.TopologyKey, int64(t.Weight))
		}
	}
	for i := range pi.PreferredAntiAffinity {
		t := &pi.PreferredAntiAffinity[i]
		if t.Matches(p.Pod, c.podNSLabels(&t.AffinityTerm, p.Pod)) {
			s.add(node, t.TopologyKey, -int64(t.Weight))
		}
	}
	if w := int64(c.alg.profile.HardPodAffinityWeight); w > 0 {
		for i := range p.RequiredAffinity {
			t := &p.RequiredAffinity[i]
			if t.Matches(pi.Pod, c.nsLabels) {
				s.add(node, t.TopologyKey, w)
			}
		}
	}
	for i := range p.PreferredAffinity {
		t := &p.PreferredAffinity[i]
		if t.Matches(pi.Pod, c.nsLabels) {
			s.add(node, t.TopologyKey, int64(t.Weight))
		}
	}
	for i := range p.PreferredAntiAffinity {
		t := &p.PreferredAntiAffinity[i]
		if t.Matches(pi.Pod, c.nsLabels) {
			s.add(node, t.TopologyKey, -int64(t.Weight))
		}
	}
}

func (s *affinityScorer) score(_ *cycle, n *NodeInfo) int64 {
	var total int64
	for key, m := range s.domains {
		if v, ok := n.Node.Labels[key]; ok {
			total += m[v]
		}
	}
	return total
}

// normalize maps [min, max] onto [0, 100]; all equal means all 0.
func (s *affinityScorer) normalize(scores []int64) {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, v := range scores {
		lo, hi = min(lo, v), max(hi, v)
	}
	for i, v := range scores {
		if hi > lo {
			scores[i] = int64(float64(MaxNodeScore) * float64(v-lo) / float64(hi-lo))
		} else {
			scores[i] = 0
		}
	}
}
