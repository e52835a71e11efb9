// Package algorithm decides where a pod should run: the filters, scores and
// preemption of upstream's default scheduler profile, over a read-only view
// of the cluster (State) so that it can be tested and benchmarked without
// an API server, and run against the scheduler's cache in production.
package algorithm

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// State is the cluster as one scheduling cycle sees it. Implementations
// must not change what they have handed out while the cycle runs.
type State interface {
	// Nodes lists every node (all with Node set), in the order searches
	// walk them.
	Nodes() []*NodeInfo
	// Node finds a node by name (nil if unknown).
	Node(name string) *NodeInfo
	// NodesWithAffinityPods lists the nodes having a pod with any
	// inter-pod (anti-)affinity; NodesWithRequiredAntiAffinityPods those
	// having one with a required anti-affinity term.
	NodesWithAffinityPods() []*NodeInfo
	NodesWithRequiredAntiAffinityPods() []*NodeInfo
	// ImageNodes counts the nodes that have an image (as NodeInfo.Images
	// names it).
	ImageNodes(image string) int
	// NamespaceLabels are a namespace's labels, for namespaceSelector.
	NamespaceLabels(namespace string) labels.Set
	// NominatedPods are pods not yet bound that preemption has made room
	// for on node: they keep that room against lower-priority pods.
	// HasNominatedPods tells whether there are any at all, sparing a
	// lookup per node and pod in the common case.
	NominatedPods(node string) []*PodInfo
	HasNominatedPods() bool
	// SpreadSelector selects the pods that belong with pod for default
	// topology spreading: those its Services, ReplicaSet, StatefulSet or
	// ReplicationController select (nil or empty for none).
	SpreadSelector(pod *v1.Pod) labels.Selector
}

// Snapshot is a State held in memory: the test harness, and a simple
// implementation for callers without an incremental cache.
type Snapshot struct {
	list       []*NodeInfo
	byName     map[string]*NodeInfo
	affinity   []*NodeInfo
	antiAff    []*NodeInfo
	images     map[string]int
	Namespaces map[string]labels.Set
	Nominated  map[string][]*PodInfo
	// Selectors gives SpreadSelector's answer (none when nil).
	Selectors func(*v1.Pod) labels.Selector
}

// NewSnapshot builds a State of nodes with pods placed on the node their
// spec.nodeName names (pods naming no known node are ignored), and pods
// without a node but with status.nominatedNodeName counted as nominated.
func NewSnapshot(nodes []*v1.Node, pods []*v1.Pod) *Snapshot {
	s := &Snapshot{byName: map[string]*NodeInfo{}, Namespaces: map[string]labels.Set{}, Nominated: map[string][]*PodInfo{}}
	for _, n := range nodes {
		ni := NewNodeInfo(n)
		s.list = append(s.list, ni)
		s.byName[n.Name] = ni
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			if nn := p.Status.NominatedNodeName; nn != "" {
				s.Nominated[nn] = append(s.Nominated[nn], NewPodInfo(p))
			}
			continue
		}
		if ni := s.byName[p.Spec.NodeName]; ni != nil {
			ni.AddPod(NewPodInfo(p))
		}
	}
	s.Index()
	return s
}

// Index recomputes the derived lists after NodeInfos were changed in place.
func (s *Snapshot) Index() {
	s.affinity, s.antiAff = nil, nil
	s.images = map[string]int{}
	for _, ni := range s.list {
		if len(ni.PodsWithAffinity) > 0 {
			s.affinity = append(s.affinity, ni)
		}
		if len(ni.PodsWithRequiredAntiAffinity) > 0 {
			s.antiAff = append(s.antiAff, ni)
		}
		for name := range ni.Images {
			s.images[name]++
		}
	}
}

// Nodes implements State.
func (s *Snapshot) Nodes() []*NodeInfo { return s.list }

// Node implements State.
func (s *Snapshot) Node(name string) *NodeInfo { return s.byName[name] }

// NodesWithAffinityPods implements State.
func (s *Snapshot) NodesWithAffinityPods() []*NodeInfo { return s.affinity }

// NodesWithRequiredAntiAffinityPods implements State.
func (s *Snapshot) NodesWithRequiredAntiAffinityPods() []*NodeInfo { return s.antiAff }

// ImageNodes implements State.
func (s *Snapshot) ImageNodes(image string) int { return s.images[image] }

// NamespaceLabels implements State.
func (s *Snapshot) NamespaceLabels(ns string) labels.Set { return s.Namespaces[ns] }

// NominatedPods implements State.
func (s *Snapshot) NominatedPods(node string) []*PodInfo { return s.Nominated[node] }

// SpreadSelector implements State.
func (s *Snapshot) SpreadSelector(pod *v1.Pod) labels.Selector {
	if s.Selectors == nil {
		return nil
	}
	return s.Selectors(pod)
}

// HasNominatedPods implements State.
func (s *Snapshot) HasNominatedPods() bool { return len(s.Nominated) > 0 }

// NormalizedImageName is how a pod's image is looked up in node images:
// a reference without a tag or digest means ":latest".
func NormalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		name += ":latest"
	}
	return name
}
