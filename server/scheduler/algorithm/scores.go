package algorithm

import (
	"math"

	v1 "k8s.io/api/core/v1"
)

// nodeScorer is a score plugin prepared for one pod: score rates each
// feasible node, normalize then maps the raw scores onto 0..MaxNodeScore.
type nodeScorer interface {
	score(c *cycle, n *NodeInfo) int64
	normalize(scores []int64)
}

// prepareFunc returns nil when the plugin has nothing to say about the pod
// (it then adds 0 to every node).
type prepareFunc func(c *cycle, feasible []*NodeInfo) nodeScorer

var scorePrepares = map[string]prepareFunc{
	NodeResourcesFit:                prepareFitScore,
	NodeResourcesBalancedAllocation: prepareBalancedScore,
	ImageLocality:                   prepareImageScore,
	TaintToleration:                 prepareTaintScore,
	NodeAffinity:                    prepareNodeAffinityScore,
	InterPodAffinity:                prepareAffinityScore,
	PodTopologySpread:               prepareSpreadScore,
}

// noNormalize is for scores already on 0..100.
type noNormalize struct{}

func (noNormalize) normalize([]int64) {}

type fitScorer struct {
	noNormalize
	resources []ResourceWeight
	most      bool
}

// prepareFitScore scores by what would be requested with the pod there,
// request-less pods counted at the non-zero defaults.
func prepareFitScore(c *cycle, _ []*NodeInfo) nodeScorer {
	p := &c.alg.profile
	return &fitScorer{resources: p.FitResources, most: p.FitStrategy == MostAllocated}
}

func (f *fitScorer) score(c *cycle, n *NodeInfo) int64 {
	var total, weights int64
	for _, rw := range f.resources {
		want := c.pi.NonZero.Get(rw.Name)
		if want == 0 && isScalar(rw.Name) {
			continue
		}
		capacity := n.Allocatable.Get(rw.Name)
		if capacity == 0 {
			continue
		}
		requested := n.NonZeroRequested.Get(rw.Name) + want
		if f.most {
			total += MostAllocatedScore(requested, capacity) * rw.Weight
		} else {
			total += LeastAllocatedScore(requested, capacity) * rw.Weight
		}
		weights += rw.Weight
	}
	if weights == 0 {
		return 0
	}
	return total / weights
}

func isScalar(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods:
		return false
	}
	return true
}

// LeastAllocatedScore is the share of capacity left free, 0..100.
func LeastAllocatedScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * MaxNodeScore / capacity
}

// MostAllocatedScore is the share of capacity in use, 0..100.
func MostAllocatedScore(requested, capacity int64) int64 {
	if capacity == 0 {
		return 0
	}
	if requested > capacity {
		requested = capacity
	}
	return requested * MaxNodeScore / capacity
}

type balancedScorer struct {
	noNormalize
	resources []ResourceWeight
}

// prepareBalancedScore skips pods requesting nothing: they cannot unbalance
// a node.
func prepareBalancedScore(c *cycle, _ []*NodeInfo) nodeScorer {
	if c.pi.Requests.IsZero() {
		return nil
	}
	return &balancedScorer{resources: c.alg.profile.BalancedResources}
}

// score is 100 × (1 − the standard deviation of the requested fractions),
// counting real requests, not the non-zero defaults.
func (b *balancedScorer) score(c *cycle, n *NodeInfo) int64 {
	var buf [8]float64
	fractions := buf[:0]
	for _, rw := range b.resources {
		want := c.pi.Requests.Get(rw.Name)
		if want == 0 && isScalar(rw.Name) {
			continue
		}
		capacity := n.Allocatable.Get(rw.Name)
		if capacity == 0 {
			continue
		}
		fractions = append(fractions, min(float64(n.Requested.Get(rw.Name)+want)/float64(capacity), 1))
	}
	return BalancedScore(fractions)
}

// BalancedScore scores requested fractions by how alike they are.
func BalancedScore(fractions []float64) int64 {
	var std float64
	switch len(fractions) {
	case 0, 1:
	case 2:
		std = math.Abs(fractions[0]-fractions[1]) / 2
	default:
		var sum float64
		for _, f := range fractions {
			sum += f
		}
		mean := sum / float64(len(fractions))
		var sq float64
		for _, f := range fractions {
			sq += (f - mean) * (f - mean)
		}
		std = math.Sqrt(sq / float64(len(fractions)))
	}
	return int64((1 - std) * float64(MaxNodeScore))
}

// Image sizes below minImageSize count as nothing, and each container's
// image is capped at maxImageSize, so that tiny images do not sway the
// choice and one huge image does not decide it alone.
const (
	mib          int64 = 1024 * 1024
	minImageSize       = 23 * mib
	maxImageSize       = 1000 * mib
)

type imageScorer struct {
	noNormalize
	images   []string
	total    int
	presence bool
}

func prepareImageScore(c *cycle, _ []*NodeInfo) nodeScorer {
	s := &imageScorer{total: len(c.st.Nodes()), presence: c.alg.profile.ImageLocalityPresence}
	for _, cs := range [][]v1.Container{c.pi.Pod.Spec.InitContainers, c.pi.Pod.Spec.Containers} {
		for i := range cs {
			s.images = append(s.images, NormalizedImageName(cs[i].Image))
		}
	}
	if len(s.images) == 0 {
		return nil
	}
	return s
}

// score is upstream's: the sizes of the pod's images the node has, each
// scaled by the share of nodes having it (an image everywhere is no reason
// to pick one node), mapped linearly from [23 MiB, 1000 MiB × containers]
// onto 0..100. In presence mode it is simply the share of the pod's
// images the node has.
func (s *imageScorer) score(c *cycle, n *NodeInfo) int64 {
	if s.presence {
		have := 0
		for _, img := range s.images {
			if _, ok := n.Images[img]; ok {
				have++
			}
		}
		return MaxNodeScore * int64(have) / int64(len(s.images))
	}
	var sum int64
	for _, img := range s.images {
		if size, ok := n.Images[img]; ok && s.total > 0 {
			sum += int64(float64(size) * float64(c.st.ImageNodes(img)) / float64(s.total))
		}
	}
	return ImageScore(sum, len(s.images))
}

// ImageScore maps a scaled image size sum onto 0..100.
func ImageScore(sum int64, containers int) int64 {
	hi := maxImageSize * int64(containers)
	sum = min(max(sum, minImageSize), hi)
	return MaxNodeScore * (sum - minImageSize) / (hi - minImageSize)
}

// taintScorer counts PreferNoSchedule taints the pod does not tolerate;
// the node with fewest gets 100.
type taintScorer struct {
	tolerations []v1.Toleration
}

func prepareTaintScore(c *cycle, _ []*NodeInfo) nodeScorer {
	s := &taintScorer{}
	for _, t := range c.pi.Pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == v1.TaintEffectPreferNoSchedule {
			s.tolerations = append(s.tolerations, t)
		}
	}
	return s
}

func (s *taintScorer) score(_ *cycle, n *NodeInfo) int64 {
	var count int64
	for i := range n.Node.Spec.Taints {
		t := &n.Node.Spec.Taints[i]
		if t.Effect == v1.TaintEffectPreferNoSchedule && !tolerates(s.tolerations, t) {
			count++
		}
	}
	return count
}

func (s *taintScorer) normalize(scores []int64) { normalizeToMax(scores, true) }

type nodeAffinityScorer struct {
	pref *preferredNodeAffinity
}

func prepareNodeAffinityScore(c *cycle, _ []*NodeInfo) nodeScorer {
	p := newPreferredNodeAffinity(c.pi.Pod)
	if p == nil {
		return nil
	}
	return &nodeAffinityScorer{pref: p}
}

func (s *nodeAffinityScorer) score(_ *cycle, n *NodeInfo) int64 { return s.pref.score(n.Node) }

func (s *nodeAffinityScorer) normalize(scores []int64) { normalizeToMax(scores, false) }

// normalizeToMax scales so the highest becomes 100 (reverse: the highest
// becomes 0 and the lowest 100); all zero gives 0, or 100 reversed.
func normalizeToMax(scores []int64, reverse bool) {
	var hi int64
	for _, v := range scores {
		hi = max(hi, v)
	}
	for i, v := range scores {
		switch {
		case hi == 0 && reverse:
			scores[i] = MaxNodeScore
		case hi == 0:
			scores[i] = 0
		case reverse:
			scores[i] = MaxNodeScore - MaxNodeScore*v/hi
		default:
			scores[i] = MaxNodeScore * v / hi
		}
	}
}
