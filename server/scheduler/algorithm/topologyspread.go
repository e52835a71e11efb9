package algorithm

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

type spreadConstraint struct {
	maxSkew    int
	key        string
	minDomains int
	selector   labels.Selector
	// Which nodes count as domains: by default those matching the pod's
	// node affinity (Honor), whatever their taints (Ignore).
	honorAffinity bool
	honorTaints   bool
}

// spreadConstraints parses the pod's constraints with the given action or,
// when it has none, the profile's defaults over the pods its Services and
// controller select. requireAll is false for the system defaults only:
// nodes missing one of their keys still take part.
func (c *cycle) spreadConstraints(action v1.UnsatisfiableConstraintAction) (out []spreadConstraint, requireAll bool, err error) {
	pod := c.pi.Pod
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		out, err = ownSpreadConstraints(pod, action)
		return out, true, err
	}
	p := &c.alg.profile
	defaults := p.DefaultSpreadConstraints
	if p.SpreadDefaulting == SystemDefaulting {
		defaults = SystemDefaultSpreadConstraints()
	}
	if len(defaults) == 0 {
		return nil, true, nil
	}
	sel := c.st.SpreadSelector(pod)
	if sel == nil || sel.Empty() {
		return nil, true, nil
	}
	for _, d := range defaults {
		if d.WhenUnsatisfiable == action {
			out = append(out, spreadConstraint{maxSkew: int(d.MaxSkew), key: d.TopologyKey, minDomains: 1, selector: sel, honorAffinity: true})
		}
	}
	return out, p.SpreadDefaulting != SystemDefaulting, nil
}

func ownSpreadConstraints(pod *v1.Pod, action v1.UnsatisfiableConstraintAction) ([]spreadConstraint, error) {
	var out []spreadConstraint
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable != action {
			continue
		}
		sel, err := mergedSelector(tsc.LabelSelector, tsc.MatchLabelKeys, nil, pod.Labels)
		if err != nil {
			return nil, err
		}
		sc := spreadConstraint{maxSkew: int(tsc.MaxSkew), key: tsc.TopologyKey, minDomains: 1, selector: sel, honorAffinity: true}
		if tsc.MinDomains != nil {
			sc.minDomains = int(*tsc.MinDomains)
		}
		if p := tsc.NodeAffinityPolicy; p != nil && *p == v1.NodeInclusionPolicyIgnore {
			sc.honorAffinity = false
		}
		if p := tsc.NodeTaintsPolicy; p != nil && *p == v1.NodeInclusionPolicyHonor {
			sc.honorTaints = true
		}
		out = append(out, sc)
	}
	return out, nil
}

func (sc *spreadConstraint) includes(c *cycle, node *v1.Node) bool {
	if sc.honorAffinity && !c.nodeAffinity.matches(node) {
		return false
	}
	if sc.honorTaints {
		if _, bad := untoleratedTaint(node.Spec.Taints, c.pi.Pod.Spec.Tolerations, v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute); bad {
			return false
		}
	}
	return true
}

func (sc *spreadConstraint) counts(p *PodInfo, ns string) bool {
	return p.Pod.Namespace == ns && p.Pod.DeletionTimestamp == nil && sc.selector.Matches(labels.Set(p.Pod.Labels))
}

func countMatching(pods []*PodInfo, sc *spreadConstraint, ns string) int {
	n := 0
	for _, p := range pods {
		if sc.counts(p, ns) {
			n++
		}
	}
	return n
}

func hasAllKeys(node *v1.Node, cs []spreadConstraint) bool {
	for i := range cs {
		if _, ok := node.Labels[cs[i].key]; !ok {
			return false
		}
	}
	return true
}

// spreadState is PodTopologySpread's pre-filter result: matching pods per
// domain of each DoNotSchedule constraint, and the smallest count.
type spreadState struct {
	constraints []spreadConstraint
	counts      []map[string]int
	minMatch    []int
}

func newSpreadState(c *cycle, cs []spreadConstraint) *spreadState {
	s := &spreadState{constraints: cs, counts: make([]map[string]int, len(cs)), minMatch: make([]int, len(cs))}
	for i := range cs {
		s.counts[i] = map[string]int{}
	}
	ns := c.pi.Pod.Namespace
	for _, n := range c.st.Nodes() {
		if n.Node == nil || !hasAllKeys(n.Node, cs) {
			continue
		}
		for i := range cs {
			if cs[i].includes(c, n.Node) {
				s.counts[i][n.Node.Labels[cs[i].key]] += countMatching(n.Pods, &cs[i], ns)
			}
		}
	}
	for i := range cs {
		s.recomputeMin(i)
	}
	return s
}

func (s *spreadState) recomputeMin(i int) {
	m := math.MaxInt
	for _, v := range s.counts[i] {
		m = min(m, v)
	}
	if m == math.MaxInt {
		m = 0
	}
	s.minMatch[i] = m
}

func (s *spreadState) addPod(c *cycle, p *PodInfo, n *NodeInfo, delta int) {
	if n.Node == nil || !hasAllKeys(n.Node, s.constraints) {
		return
	}
	for i := range s.constraints {
		sc := &s.constraints[i]
		if !sc.includes(c, n.Node) || !sc.counts(p, c.pi.Pod.Namespace) {
			continue
		}
		s.counts[i][n.Node.Labels[sc.key]] += delta
		s.recomputeMin(i)
	}
}

func (s *spreadState) clone() *spreadState {
	out := &spreadState{constraints: s.constraints, counts: make([]map[string]int, len(s.counts)), minMatch: append([]int(nil), s.minMatch...)}
	for i, m := range s.counts {
		out.counts[i] = make(map[string]int, len(m))
		for k, v := range m {
			out.counts[i][k] = v
		}
	}
	return out
}

// filterSpread: placing the pod must not make any domain exceed the least
// populated one by more than maxSkew (the least counting as 0 while there
// are fewer domains than minDomains).
func filterSpread(c *cycle, n *NodeInfo) *Status {
	s := c.spread
	if s == nil {
		return nil
	}
	podLabels := labels.Set(c.pi.Pod.Labels)
	for i := range s.constraints {
		sc := &s.constraints[i]
		v, ok := n.Node.Labels[sc.key]
		if !ok {
			return statusSpreadMissing
		}
		least := s.minMatch[i]
		if len(s.counts[i]) < sc.minDomains {
			least = 0
		}
		self := 0
		if sc.selector.Matches(podLabels) {
			self = 1
		}
		if s.counts[i][v]+self-least > sc.maxSkew {
			return statusSpreadSkew
		}
	}
	return nil
}

// spreadScorer scores ScheduleAnyway constraints: fewer matching pods in
// the node's domains is better, each constraint weighted by the log of its
// number of domains so that wide topologies do not drown narrow ones.
type spreadScorer struct {
	constraints []spreadConstraint
	requireAll  bool
	pairs       map[topologyPair]int64
	weights     []float64
	ignored     map[string]bool
}

const ignoredSpreadScore = -1

func prepareSpreadScore(c *cycle, feasible []*NodeInfo) nodeScorer {
	cs, requireAll, err := c.spreadConstraints(v1.ScheduleAnyway)
	if err != nil || len(cs) == 0 {
		return nil
	}
	s := &spreadScorer{constraints: cs, requireAll: requireAll, pairs: map[topologyPair]int64{}, weights: make([]float64, len(cs)), ignored: map[string]bool{}}
	sizes := make([]int, len(cs))
	for _, n := range feasible {
		if requireAll && !hasAllKeys(n.Node, cs) {
			s.ignored[n.Node.Name] = true
			continue
		}
		for i := range cs {
			if cs[i].key == v1.LabelHostname {
				continue
			}
			p := topologyPair{cs[i].key, n.Node.Labels[cs[i].key]}
			if _, ok := s.pairs[p]; !ok {
				s.pairs[p] = 0
				sizes[i]++
			}
		}
	}
	for i := range cs {
		if cs[i].key == v1.LabelHostname {
			sizes[i] = len(feasible) - len(s.ignored)
		}
		s.weights[i] = math.Log(float64(sizes[i] + 2))
	}
	ns := c.pi.Pod.Namespace
	for _, n := range c.st.Nodes() {
		if n.Node == nil || (requireAll && !hasAllKeys(n.Node, cs)) {
			continue
		}
		for i := range cs {
			if cs[i].key == v1.LabelHostname || !cs[i].includes(c, n.Node) {
				continue
			}
			p := topologyPair{cs[i].key, n.Node.Labels[cs[i].key]}
			if _, ok := s.pairs[p]; ok {
				s.pairs[p] += int64(countMatching(n.Pods, &cs[i], ns))
			}
		}
	}
	return s
}

func (s *spreadScorer) score(c *cycle, n *NodeInfo) int64 {
	if s.ignored[n.Node.Name] {
		return ignoredSpreadScore
	}
	var total float64
	for i := range s.constraints {
		sc := &s.constraints[i]
		v, ok := n.Node.Labels[sc.key]
		if !ok {
			continue
		}
		var cnt int64
		if sc.key == v1.LabelHostname {
			cnt = int64(countMatching(n.Pods, sc, c.pi.Pod.Namespace))
		} else {
			cnt = s.pairs[topologyPair{sc.key, v}]
		}
		total += float64(cnt)*s.weights[i] + float64(sc.maxSkew-1)
	}
	return int64(math.Round(total))
}

// normalize: the least crowded node gets 100; nodes missing a topology
// key get 0.
func (s *spreadScorer) normalize(scores []int64) {
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, v := range scores {
		if v == ignoredSpreadScore {
			continue
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	for i, v := range scores {
		switch {
		case v == ignoredSpreadScore:
			scores[i] = 0
		case hi == 0:
			scores[i] = MaxNodeScore
		default:
			scores[i] = MaxNodeScore * (hi + lo - v) / hi
		}
	}
}
