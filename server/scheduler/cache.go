package scheduler

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	"skiff/server/scheduler/algorithm"
)

// podState is a pod the cache accounts for on a node.
type podState struct {
	pi   *algorithm.PodInfo
	node string
	// assumed: the scheduler placed it and the binding has not shown up
	// in the informer yet.
	assumed bool
}

// clusterCache is the cluster as the scheduler believes it to be: the informers'
// nodes and bound pods plus the pods it has assumed onto nodes while their
// bindings are in flight, so that the next pod does not get the same room.
type clusterCache struct {
	mu    sync.Mutex
	nodes map[string]*algorithm.NodeInfo
	pods  map[types.UID]*podState
	// dirty nodes changed since the last snapshot; listChanged means a
	// node came, went or moved zone, so the walk order must be rebuilt.
	dirty       map[string]struct{}
	listChanged bool
}

func newClusterCache() *clusterCache {
	return &clusterCache{nodes: map[string]*algorithm.NodeInfo{}, pods: map[types.UID]*podState{}, dirty: map[string]struct{}{}}
}

func (c *clusterCache) nodeInfo(name string) *algorithm.NodeInfo {
	ni := c.nodes[name]
	if ni == nil {
		ni = algorithm.NewNodeInfo(nil)
		c.nodes[name] = ni
	}
	c.dirty[name] = struct{}{}
	return ni
}

// dropIfEmpty forgets a node object's placeholder once no pod needs it.
func (c *clusterCache) dropIfEmpty(name string) {
	if ni := c.nodes[name]; ni != nil && ni.Node == nil && len(ni.Pods) == 0 {
		delete(c.nodes, name)
	}
}

func (c *clusterCache) addNode(node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni := c.nodeInfo(node.Name)
	if ni.Node == nil || zoneOf(ni.Node) != zoneOf(node) {
		c.listChanged = true
	}
	ni.SetNode(node)
}

func (c *clusterCache) removeNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ni := c.nodes[name]; ni != nil {
		ni.SetNode(nil)
		c.dirty[name] = struct{}{}
		c.listChanged = true
		c.dropIfEmpty(name)
	}
}

// assume puts a pod the scheduler chose a node for (pod.Spec.NodeName set)
// on that node until its binding is confirmed or forgotten.
func (c *clusterCache) assume(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(pod.UID)
	pi := algorithm.NewPodInfo(pod)
	c.nodeInfo(pod.Spec.NodeName).AddPod(pi)
	c.pods[pod.UID] = &podState{pi: pi, node: pod.Spec.NodeName, assumed: true}
}

// forget undoes assume after a failed binding; a pod the informer has
// meanwhile seen bound is left alone.
func (c *clusterCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps := c.pods[uid]; ps != nil && ps.assumed {
		c.removeLocked(uid)
	}
}

// upsertPod records a bound pod the informer reports. Confirming an
// assumed pod keeps its PodInfo when nothing that matters changed, to
// spare a snapshot copy of the node per binding.
func (c *clusterCache) upsertPod(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps := c.pods[pod.UID]; ps != nil {
		if ps.assumed && ps.node == pod.Spec.NodeName && samePlacement(ps.pi.Pod, pod) {
			ps.assumed = false
			return
		}
		c.removeLocked(pod.UID)
	}
	pi := algorithm.NewPodInfo(pod)
	c.nodeInfo(pod.Spec.NodeName).AddPod(pi)
	c.pods[pod.UID] = &podState{pi: pi, node: pod.Spec.NodeName}
}

// samePlacement: the bound pod accounts exactly as the assumed copy did.
func samePlacement(a, b *v1.Pod) bool {
	return labels.Equals(a.Labels, b.Labels) && a.DeletionTimestamp == nil && b.DeletionTimestamp == nil
}

func (c *clusterCache) removePod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(uid)
}

func (c *clusterCache) removeLocked(uid types.UID) {
	ps := c.pods[uid]
	if ps == nil {
		return
	}
	delete(c.pods, uid)
	if ni := c.nodes[ps.node]; ni != nil {
		ni.RemovePod(ps.pi)
		c.dirty[ps.node] = struct{}{}
		c.dropIfEmpty(ps.node)
	}
}

func (c *clusterCache) isAssumed(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.pods[uid]
	return ps != nil && ps.assumed
}

// snapshot is the algorithm's State: copies of the cache's NodeInfos,
// refreshed before each cycle by copying only the nodes that changed.
type snapshot struct {
	byName    map[string]*algorithm.NodeInfo
	list      []*algorithm.NodeInfo
	index     map[string]int
	affinity  []*algorithm.NodeInfo
	antiAff   []*algorithm.NodeInfo
	images    map[string]int
	nominated map[string][]*algorithm.PodInfo
	ns        corelisters.NamespaceLister
	selectors *spreadSelectors
}

func newSnapshot(ns corelisters.NamespaceLister, selectors *spreadSelectors) *snapshot {
	return &snapshot{byName: map[string]*algorithm.NodeInfo{}, index: map[string]int{}, images: map[string]int{}, ns: ns, selectors: selectors}
}

func (s *snapshot) SpreadSelector(pod *v1.Pod) labels.Selector {
	if s.selectors == nil {
		return nil
	}
	return s.selectors.selector(pod)
}

// update brings s up to date with the cache.
func (c *clusterCache) update(s *snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.dirty) == 0 && !c.listChanged {
		return
	}
	reindex, reimage := c.listChanged, c.listChanged
	for name := range c.dirty {
		old := s.byName[name]
		ni := c.nodes[name]
		if ni == nil || ni.Node == nil {
			delete(s.byName, name)
			continue
		}
		cp := ni.Clone()
		s.byName[name] = cp
		if i, ok := s.index[name]; ok && !c.listChanged {
			s.list[i] = cp
		}
		if old == nil || len(old.PodsWithAffinity) > 0 || len(cp.PodsWithAffinity) > 0 {
			reindex = true
		}
		if old == nil || !sameKeys(old.Images, cp.Images) {
			reimage = true
		}
	}
	clear(c.dirty)
	if c.listChanged {
		s.list = zoneInterleaved(s.byName)
		clear(s.index)
		for i, ni := range s.list {
			s.index[ni.Node.Name] = i
		}
		c.listChanged = false
	}
	if reindex {
		s.affinity, s.antiAff = s.affinity[:0], s.antiAff[:0]
		for _, ni := range s.list {
			if len(ni.PodsWithAffinity) > 0 {
				s.affinity = append(s.affinity, ni)
			}
			if len(ni.PodsWithRequiredAntiAffinity) > 0 {
				s.antiAff = append(s.antiAff, ni)
			}
		}
	} else {
		// The lists hold the previous copies of nodes whose affinity pods
		// did not change; refresh the pointers.
		for i, ni := range s.affinity {
			s.affinity[i] = s.byName[ni.Node.Name]
		}
		for i, ni := range s.antiAff {
			s.antiAff[i] = s.byName[ni.Node.Name]
		}
	}
	if reimage {
		clear(s.images)
		for _, ni := range s.list {
			for name := range ni.Images {
				s.images[name]++
			}
		}
	}
}

func sameKeys(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func zoneOf(n *v1.Node) string {
	return n.Labels[v1.LabelTopologyRegion] + ":\x00:" + n.Labels[v1.LabelTopologyZone]
}

// zoneInterleaved orders nodes taking one from each zone in turn, so that a
// search stopping after a share of the nodes still sees every zone.
func zoneInterleaved(nodes map[string]*algorithm.NodeInfo) []*algorithm.NodeInfo {
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	var zones []string
	byZone := map[string][]*algorithm.NodeInfo{}
	for _, name := range names {
		ni := nodes[name]
		z := zoneOf(ni.Node)
		if _, ok := byZone[z]; !ok {
			zones = append(zones, z)
		}
		byZone[z] = append(byZone[z], ni)
	}
	out := make([]*algorithm.NodeInfo, 0, len(names))
	for i := 0; len(out) < len(names); i++ {
		for _, z := range zones {
			if i < len(byZone[z]) {
				out = append(out, byZone[z][i])
			}
		}
	}
	return out
}

func (s *snapshot) Nodes() []*algorithm.NodeInfo                             { return s.list }
func (s *snapshot) Node(name string) *algorithm.NodeInfo                     { return s.byName[name] }
func (s *snapshot) NodesWithAffinityPods() []*algorithm.NodeInfo             { return s.affinity }
func (s *snapshot) NodesWithRequiredAntiAffinityPods() []*algorithm.NodeInfo { return s.antiAff }
func (s *snapshot) ImageNodes(image string) int                              { return s.images[image] }
func (s *snapshot) NominatedPods(node string) []*algorithm.PodInfo           { return s.nominated[node] }
func (s *snapshot) HasNominatedPods() bool                                   { return len(s.nominated) > 0 }

func (s *snapshot) NamespaceLabels(name string) labels.Set {
	if s.ns == nil {
		return nil
	}
	ns, err := s.ns.Get(name)
	if err != nil {
		return nil
	}
	return ns.Labels
}
