package algorithm

import (
	"math"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// At least this many candidate nodes (or this share of the nodes where
// preemption might help) are dry-run before picking one, as upstream.
const (
	minCandidateNodesPercentage = 10
	minCandidateNodesAbsolute   = 100
)

// Preemption is what preemption decided: a node where evicting Victims
// makes room for the pod, or why there is none.
type Preemption struct {
	// Node is "" when preemption cannot help.
	Node    string
	Victims []*v1.Pod
	// PDBViolations counts victims whose eviction a disruption budget
	// does not allow; candidates without any are preferred.
	PDBViolations int
	// Message, when Node is "", is what upstream appends to the fit
	// error ("preemption: ...").
	Message string
	// Ineligible: the pod may not preempt now (preemptionPolicy Never,
	// or victims of its last preemption are still going), so a nomination
	// it has stands.
	Ineligible bool
}

type candidate struct {
	node       string
	victims    []*PodInfo
	violations int
}

// Preempt looks for a node where evicting pods of lower priority than pod
// lets it fit, d being why the search found none.
func (a *Algorithm) Preempt(pod *v1.Pod, st State, d *Diagnosis, pdbs []*policyv1.PodDisruptionBudget) *Preemption {
	if p := pod.Spec.PreemptionPolicy; p != nil && *p == v1.PreemptNever {
		return &Preemption{Message: "preemption: " + ReasonNotEligibleNever, Ineligible: true}
	}
	pi := NewPodInfo(pod)
	if waiting(pi, st, d) {
		return &Preemption{Message: "preemption: " + ReasonNotEligibleWaiter, Ineligible: true}
	}
	all := st.Nodes()
	pd := Diagnosis{AbsentStatus: newStatus(UnschedulableAndUnresolvable, "", ReasonNotHelpful)}
	fail := func() *Preemption {
		return &Preemption{Message: "preemption: " + (&FitError{Pod: pod, NumAllNodes: len(all), Diagnosis: pd}).Error()}
	}
	var potential []*NodeInfo
	for _, n := range all {
		if s := d.statusOf(n.Node.Name); s != nil && s.Code == Unschedulable {
			potential = append(potential, n)
		}
	}
	c, s := a.newCycle(pi, st)
	if s != nil || len(potential) == 0 {
		return fail()
	}
	// Dry runs continue past want until a candidate that breaks no budget
	// turns up.
	want := min(max(len(potential)*minCandidateNodesPercentage/100, minCandidateNodesAbsolute), len(potential))
	offset := a.rand.IntN(len(potential))
	var candidates []candidate
	nonViolating := 0
	for i := 0; i < len(potential) && (nonViolating == 0 || len(candidates) < want); i++ {
		n := potential[(offset+i)%len(potential)]
		victims, violations, s := c.selectVictims(n, pdbs)
		if !s.IsSuccess() {
			pd.set(n.Node.Name, s)
			continue
		}
		candidates = append(candidates, candidate{n.Node.Name, victims, violations})
		if violations == 0 {
			nonViolating++
		}
	}
	if len(candidates) == 0 {
		return fail()
	}
	best := pickCandidate(candidates)
	out := &Preemption{Node: best.node, PDBViolations: best.violations}
	for _, v := range best.victims {
		out.Victims = append(out.Victims, v.Pod)
	}
	return out
}

// waiting: the pod already preempted on its nominated node and victims
// there are still terminating; preempting again would evict more pods for
// the same room.
func waiting(pi *PodInfo, st State, d *Diagnosis) bool {
	nn := pi.Pod.Status.NominatedNodeName
	if nn == "" {
		return false
	}
	if s := d.statusOf(nn); s != nil && s.Code == UnschedulableAndUnresolvable {
		return false
	}
	n := st.Node(nn)
	if n == nil {
		return false
	}
	for _, p := range n.Pods {
		if p.Priority < pi.Priority && p.Pod.DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

// selectVictims finds the fewest, least important pods to evict from n: it
// removes every pod of lower priority, checks the pod fits, then puts back
// as many as still let it fit, most important first, pods whose eviction
// would break a disruption budget before the others.
func (c *cycle) selectVictims(n *NodeInfo, pdbs []*policyv1.PodDisruptionBudget) ([]*PodInfo, int, *Status) {
	nn, cc := n.Clone(), c.clone()
	var potential []*PodInfo
	for _, p := range n.Pods {
		if p.Priority < c.pi.Priority {
			potential = append(potential, p)
			nn.RemovePod(p)
			cc.addPod(p, nn, -1)
		}
	}
	if len(potential) == 0 {
		return nil, 0, newStatus(UnschedulableAndUnresolvable, "", ReasonNoVictims)
	}
	if s := cc.filter(nn); !s.IsSuccess() {
		return nil, 0, s
	}
	sort.SliceStable(potential, func(i, j int) bool { return moreImportant(potential[i], potential[j]) })
	violating, ok := splitByPDB(potential, pdbs)
	var victims []*PodInfo
	reprieve := func(p *PodInfo) bool {
		nn.AddPod(p)
		cc.addPod(p, nn, 1)
		if cc.filter(nn).IsSuccess() {
			return true
		}
		nn.RemovePod(p)
		cc.addPod(p, nn, -1)
		victims = append(victims, p)
		return false
	}
	violations := 0
	for _, p := range violating {
		if !reprieve(p) {
			violations++
		}
	}
	for _, p := range ok {
		reprieve(p)
	}
	sort.SliceStable(victims, func(i, j int) bool { return moreImportant(victims[i], victims[j]) })
	return victims, violations, nil
}

// moreImportant: higher priority, then running longer.
func moreImportant(a, b *PodInfo) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return startTime(a.Pod).Before(startTime(b.Pod))
}

func startTime(p *v1.Pod) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	if !p.CreationTimestamp.IsZero() {
		return p.CreationTimestamp.Time
	}
	return time.Now()
}

// splitByPDB separates the pods whose eviction a budget does not allow,
// spending each budget's allowed disruptions in order.
func splitByPDB(pods []*PodInfo, pdbs []*policyv1.PodDisruptionBudget) (violating, ok []*PodInfo) {
	allowed := make([]int32, len(pdbs))
	selectors := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
		if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil {
			selectors[i] = s
		}
	}
	for _, p := range pods {
		broken := false
		for i, pdb := range pdbs {
			sel := selectors[i]
			if pdb.Namespace != p.Pod.Namespace || sel == nil || sel.Empty() || len(p.Pod.Labels) == 0 || !sel.Matches(labels.Set(p.Pod.Labels)) {
				continue
			}
			if _, done := pdb.Status.DisruptedPods[p.Pod.Name]; done {
				continue
			}
			if allowed[i]--; allowed[i] < 0 {
				broken = true
			}
		}
		if broken {
			violating = append(violating, p)
		} else {
			ok = append(ok, p)
		}
	}
	return violating, ok
}

// pickCandidate applies upstream's tie-breakers in order: fewest budget
// violations, lowest highest victim priority, lowest sum of priorities,
// fewest victims, latest start of the most important victims, first.
func pickCandidate(cs []candidate) candidate {
	type key func(c *candidate) int64
	keys := []key{
		func(c *candidate) int64 { return -int64(c.violations) },
		func(c *candidate) int64 {
			if len(c.victims) == 0 {
				return math.MaxInt64
			}
			return -int64(c.victims[0].Priority)
		},
		func(c *candidate) int64 {
			var sum int64
			for _, v := range c.victims {
				sum += int64(v.Priority) + math.MaxInt32 + 1
			}
			return -sum
		},
		func(c *candidate) int64 { return -int64(len(c.victims)) },
		func(c *candidate) int64 {
			if len(c.victims) == 0 {
				return math.MaxInt64
			}
			top := c.victims[0].Priority
			earliest := startTime(c.victims[0].Pod)
			for _, v := range c.victims {
				if v.Priority == top && startTime(v.Pod).Before(earliest) {
					earliest = startTime(v.Pod)
				}
			}
			return earliest.UnixNano()
		},
	}
	remaining := cs
	for _, k := range keys {
		best := int64(math.MinInt64)
		var next []candidate
		for i := range remaining {
			switch v := k(&remaining[i]); {
			case v > best:
				best, next = v, []candidate{remaining[i]}
			case v == best:
				next = append(next, remaining[i])
			}
		}
		if remaining = next; len(remaining) == 1 {
			break
		}
	}
	return remaining[0]
}
