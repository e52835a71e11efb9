package algorithm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Searches stop after this many feasible nodes at least, and never look at
// less than minPercentage of a big cluster (upstream's constants).
const (
	minFeasibleNodes = 100
	minPercentage    = 5
)

// Options tune an Algorithm.
type Options struct {
	// PercentageOfNodesToScore is how much of the cluster a search looks
	// at before picking among the feasible nodes found; 0 adapts it to
	// the cluster size (50% − nodes/125, at least 5%), 100 is all.
	PercentageOfNodesToScore int32
	// Parallelism is how many goroutines filter and score nodes
	// (default GOMAXPROCS, at most 16).
	Parallelism int
	// Rand breaks ties between equally scored nodes (default random).
	Rand *rand.Rand
}

// Algorithm schedules pods for one profile. It remembers where the last
// search stopped, so Schedule must not be called concurrently.
type Algorithm struct {
	profile     Profile
	filters     []namedFilter
	scores      []namedScore
	percentage  int32
	parallelism int
	rand        *rand.Rand
	ignored     ignoredResources
	nextStart   int
	statuses    []*Status
}

type namedFilter struct {
	name string
	fn   filterFunc
}

type namedScore struct {
	name    string
	weight  int64
	prepare prepareFunc
}

// New compiles a profile.
func New(p Profile, o Options) (*Algorithm, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := &Algorithm{profile: p, percentage: o.PercentageOfNodesToScore, parallelism: o.Parallelism, rand: o.Rand}
	if a.parallelism <= 0 {
		a.parallelism = min(runtime.GOMAXPROCS(0), 16)
	}
	if a.rand == nil {
		a.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	for _, f := range p.Filters {
		a.filters = append(a.filters, namedFilter{f, filterFuncs[f]})
	}
	for _, s := range p.Scores {
		a.scores = append(a.scores, namedScore{s.Name, s.Weight, scorePrepares[s.Name]})
	}
	a.ignored = ignoredResources{names: map[string]bool{}, groups: map[string]bool{}}
	for _, r := range p.IgnoredResources {
		a.ignored.names[r] = true
	}
	for _, g := range p.IgnoredResourceGroups {
		a.ignored.groups[g] = true
	}
	return a, nil
}

// Profile is the profile a was built from.
func (a *Algorithm) Profile() *Profile { return &a.profile }

// cycle is one attempt to place one pod: the pod and what the
// pre-filters computed for it over the state.
type cycle struct {
	alg          *Algorithm
	pi           *PodInfo
	st           State
	nsLabels     labels.Set
	nodeAffinity *requiredNodeAffinity
	affinity     *affinityState
	spread       *spreadState
	// only, when set, is every node the pod can go to.
	only sets.Set[string]
	// nominated: some pod somewhere is nominated.
	nominated bool
}

func (a *Algorithm) enabled(filter string) bool {
	return slices.Contains(a.profile.Filters, filter)
}

// newCycle runs the pre-filters; a non-nil Status rejects the pod on every
// node.
func (a *Algorithm) newCycle(pi *PodInfo, st State) (*cycle, *Status) {
	c := &cycle{alg: a, pi: pi, st: st, nsLabels: st.NamespaceLabels(pi.Pod.Namespace), nodeAffinity: newRequiredNodeAffinity(pi.Pod), nominated: st.HasNominatedPods()}
	if pi.ParseErr != nil {
		return nil, newStatus(UnschedulableAndUnresolvable, InterPodAffinity, fmt.Sprintf("invalid label selector: %v", pi.ParseErr))
	}
	if s := preFilterResourceClaims(pi.Pod); s != nil { // dynamicresources.go
		return nil, s
	}
	if a.enabled(NodeAffinity) {
		if c.only = c.nodeAffinity.nodeNames(); c.only != nil && c.only.Len() == 0 {
			return nil, newStatus(UnschedulableAndUnresolvable, NodeAffinity, ReasonAffinityConflict)
		}
	}
	if a.enabled(PodTopologySpread) {
		cs, _, err := c.spreadConstraints(v1.DoNotSchedule)
		if err != nil {
			return nil, newStatus(UnschedulableAndUnresolvable, PodTopologySpread, fmt.Sprintf("invalid label selector: %v", err))
		}
		if len(cs) > 0 {
			c.spread = newSpreadState(c, cs)
		}
	}
	if a.enabled(InterPodAffinity) && (len(st.NodesWithRequiredAntiAffinityPods()) > 0 || len(pi.RequiredAffinity)+len(pi.RequiredAntiAffinity) > 0) {
		c.affinity = newAffinityState(c)
	}
	return c, nil
}

// clone copies the cluster-wide pre-filter state, for dry runs that add
// or remove pods.
func (c *cycle) clone() *cycle {
	out := *c
	if c.affinity != nil {
		out.affinity = c.affinity.clone()
	}
	if c.spread != nil {
		out.spread = c.spread.clone()
	}
	return &out
}

func (c *cycle) addPod(p *PodInfo, n *NodeInfo, delta int) {
	if c.affinity != nil {
		c.affinity.addPod(c, p, n, int64(delta))
	}
	if c.spread != nil {
		c.spread.addPod(c, p, n, delta)
	}
}

func (c *cycle) runFilters(n *NodeInfo) *Status {
	for _, f := range c.alg.filters {
		if s := f.fn(c, n); !s.IsSuccess() {
			return s
		}
	}
	return nil
}

// nominatedFor lists the pods nominated to n that this pod must leave room
// for: those of at least its priority.
func (c *cycle) nominatedFor(n *NodeInfo) []*PodInfo {
	if !c.nominated {
		return nil
	}
	var out []*PodInfo
	for _, p := range c.st.NominatedPods(n.Node.Name) {
		if p.Pod.UID != c.pi.Pod.UID && p.Priority >= c.pi.Priority {
			out = append(out, p)
		}
	}
	return out
}

// filter checks n with the nominated pods on it and, when that passes,
// without them too: a nominated pod may never come, and filters like
// anti-affinity can pass only because of it.
func (c *cycle) filter(n *NodeInfo) *Status {
	if noms := c.nominatedFor(n); len(noms) > 0 {
		cc, nn := c.clone(), n.Clone()
		for _, p := range noms {
			nn.AddPod(p)
			cc.addPod(p, nn, 1)
		}
		if s := cc.runFilters(nn); !s.IsSuccess() {
			return s
		}
	}
	return c.runFilters(n)
}

// Result is where a pod goes and why.
type Result struct {
	Node string
	// Evaluated nodes were filtered; Feasible passed.
	Evaluated, Feasible int
	// Best and RunnerUp are set when more than one node was feasible.
	Best, RunnerUp *NodeScore
	// Nominated: the pod went to the node preemption made room on.
	Nominated bool
}

// NodeScore is a node's total and each plugin's weighted part of it.
type NodeScore struct {
	Node    string
	Total   int64
	Plugins []PluginScore
}

// PluginScore is one plugin's normalised score times its weight.
type PluginScore struct {
	Plugin string
	Score  int64
}

func (s *NodeScore) String() string {
	parts := make([]string, len(s.Plugins))
	for i, p := range s.Plugins {
		parts[i] = fmt.Sprintf("%s %d", p.Plugin, p.Score)
	}
	return fmt.Sprintf("%d: %s", s.Total, strings.Join(parts, ", "))
}

// Explain says why the node won, for the Scheduled event.
func (r *Result) Explain() string {
	switch {
	case r.Nominated:
		return "(the node preemption made room on)"
	case r.Best == nil:
		return fmt.Sprintf("(the only feasible node of %d evaluated)", r.Evaluated)
	case r.RunnerUp == nil:
		return fmt.Sprintf("(score %s)", r.Best)
	}
	return fmt.Sprintf("(score %s; runner-up %s %s)", r.Best, r.RunnerUp.Node, r.RunnerUp)
}

// Schedule picks a node for pod, or returns a *FitError saying why none
// fits.
func (a *Algorithm) Schedule(pod *v1.Pod, st State) (*Result, error) {
	pi := NewPodInfo(pod)
	all := st.Nodes()
	if len(all) == 0 {
		return nil, &FitError{Pod: pod}
	}
	c, s := a.newCycle(pi, st)
	if s != nil {
		d := Diagnosis{PreFilterMsg: s.Message(), AbsentStatus: s, UnschedulablePlugins: sets.New(s.Plugin)}
		return nil, &FitError{Pod: pod, NumAllNodes: len(all), Diagnosis: d}
	}
	if nn := pod.Status.NominatedNodeName; nn != "" {
		if n := st.Node(nn); n != nil && n.Node != nil && c.filter(n).IsSuccess() {
			return &Result{Node: nn, Evaluated: 1, Feasible: 1, Nominated: true}, nil
		}
	}
	feasible, d, evaluated := a.findFeasible(c, all)
	if len(feasible) == 0 {
		return nil, &FitError{Pod: pod, NumAllNodes: len(all), Diagnosis: d}
	}
	r := &Result{Evaluated: evaluated, Feasible: len(feasible)}
	if len(feasible) == 1 {
		r.Node = feasible[0].Node.Name
		return r, nil
	}
	r.Best, r.RunnerUp = a.prioritize(c, feasible)
	r.Node = r.Best.Node
	return r, nil
}

// NumFeasibleNodesToFind is how many feasible nodes a search of a cluster
// of n nodes stops at.
func NumFeasibleNodesToFind(percentage int32, n int) int {
	if n < minFeasibleNodes {
		return n
	}
	if percentage <= 0 {
		percentage = max(int32(50-n/125), minPercentage)
	}
	return max(n*int(percentage)/100, minFeasibleNodes)
}

// findFeasible filters nodes from where the last search stopped until
// enough are feasible, so successive pods look at different nodes.
func (a *Algorithm) findFeasible(c *cycle, all []*NodeInfo) ([]*NodeInfo, Diagnosis, int) {
	var d Diagnosis
	nodes, start := all, 0
	if c.only != nil {
		nodes = make([]*NodeInfo, 0, c.only.Len())
		for _, name := range sets.List(c.only) {
			if n := c.st.Node(name); n != nil && n.Node != nil {
				nodes = append(nodes, n)
			}
		}
		d.AbsentStatus = statusNodeAffinity
	} else {
		start = a.nextStart % len(all)
	}
	pct := a.percentage
	if p := a.profile.PercentageOfNodesToScore; p != nil {
		pct = *p
	}
	want := NumFeasibleNodesToFind(pct, len(nodes))
	feasible := make([]*NodeInfo, 0, min(want, len(nodes)))
	processed := 0
	for processed < len(nodes) && len(feasible) < want {
		batch := min(max(want-len(feasible), 4*a.parallelism), len(nodes)-processed)
		statuses := a.filterBatch(c, nodes, start+processed, batch)
		for i, s := range statuses {
			n := nodes[(start+processed+i)%len(nodes)]
			if s.IsSuccess() {
				feasible = append(feasible, n)
				if len(feasible) == want {
					batch = i + 1
					break
				}
			} else {
				d.set(n.Node.Name, s)
			}
		}
		processed += batch
	}
	if c.only == nil {
		a.nextStart = (start + processed) % len(all)
	}
	return feasible, d, processed
}

func (a *Algorithm) filterBatch(c *cycle, nodes []*NodeInfo, from, count int) []*Status {
	if cap(a.statuses) < count {
		a.statuses = make([]*Status, count)
	}
	out := a.statuses[:count]
	a.parallelize(count, func(i int) {
		out[i] = c.filter(nodes[(from+i)%len(nodes)])
	})
	return out
}

// parallelize runs fn for 0..n-1 on up to Parallelism goroutines, inline
// when the work is too small to be worth handing out.
func (a *Algorithm) parallelize(n int, fn func(i int)) {
	workers := min(a.parallelism, n/8)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	const chunk = 8
	for range workers {
		wg.Go(func() {
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				for i := lo; i < min(lo+chunk, n); i++ {
					fn(i)
				}
			}
		})
	}
	wg.Wait()
}

// prioritize scores the feasible nodes and returns the best (ties broken
// at random) and the runner-up.
func (a *Algorithm) prioritize(c *cycle, nodes []*NodeInfo) (*NodeScore, *NodeScore) {
	type ran struct {
		name   string
		weight int64
		scores []int64
	}
	var plugins []ran
	for _, s := range a.scores {
		ns := s.prepare(c, nodes)
		if ns == nil {
			continue
		}
		scores := make([]int64, len(nodes))
		a.parallelize(len(nodes), func(i int) { scores[i] = ns.score(c, nodes[i]) })
		ns.normalize(scores)
		plugins = append(plugins, ran{s.name, s.weight, scores})
	}
	totals := make([]int64, len(nodes))
	for _, p := range plugins {
		for i, v := range p.scores {
			totals[i] += v * p.weight
		}
	}
	best, second := -1, -1
	ties := 0
	for i, t := range totals {
		switch {
		case best < 0 || t > totals[best]:
			second, best, ties = best, i, 1
		case t == totals[best]:
			ties++
			if a.rand.IntN(ties) == 0 {
				second, best = best, i
			} else if second < 0 || t >= totals[second] {
				second = i
			}
		case second < 0 || t > totals[second]:
			second = i
		}
	}
	breakdown := func(i int) *NodeScore {
		if i < 0 {
			return nil
		}
		ns := &NodeScore{Node: nodes[i].Node.Name, Total: totals[i]}
		for _, p := range plugins {
			ns.Plugins = append(ns.Plugins, PluginScore{p.name, p.scores[i] * p.weight})
		}
		return ns
	}
	return breakdown(best), breakdown(second)
}
