package nodeipam

import (
	"fmt"
	"net"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// holding is what one node incarnation is recorded as holding.
type holding struct {
	uid   types.UID
	cidrs []*net.IPNet // only those inside a range; others are not ours to track
	// given is what occupy was given, inside a range or not, so that
	// seeing the same node again is recognised as nothing new.
	given []string
}

// allocator is the bookkeeping of which node holds which subnet, over one
// IPv4 range and an optional IPv6 one. It is rebuilt from the nodes on
// every start, so it never has to be stored.
type allocator struct {
	mu    sync.Mutex
	sets  []*cidrSet // IPv4 first: the first of podCIDRs is the primary one
	nodes map[string]holding
}

func newAllocator(sets ...*cidrSet) *allocator {
	return &allocator{sets: sets, nodes: map[string]holding{}}
}

// held is what the node is recorded as holding, if this incarnation is
// the one recorded.
func (a *allocator) held(name string, uid types.UID) ([]*net.IPNet, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.nodes[name]
	if !ok || h.uid != uid {
		return nil, false
	}
	return slices.Clone(h.cidrs), true
}

// occupy records the CIDRs a node already has (set by us earlier, before
// a restart, or by someone else). It returns those outside every range
// and whether any overlaps another node's.
func (a *allocator) occupy(name string, uid types.UID, cidrs []*net.IPNet) (outside []*net.IPNet, shared bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	given := cidrStrings(cidrs)
	if h, ok := a.nodes[name]; ok && h.uid == uid && slices.Equal(h.given, given) {
		return nil, false
	}
	a.releaseLocked(name)
	var inside []*net.IPNet
	for _, c := range cidrs {
		in := false
		for _, s := range a.sets {
			if ok, sh := s.occupy(c); ok {
				in, shared = true, shared || sh
				break
			}
		}
		if in {
			inside = append(inside, c)
		} else {
			outside = append(outside, c)
		}
	}
	a.nodes[name] = holding{uid: uid, cidrs: inside, given: given}
	return outside, shared
}

// allocate takes one subnet of every range for the node. Either all
// ranges yield one or none is taken.
func (a *allocator) allocate(name string, uid types.UID) ([]*net.IPNet, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(name)
	var got []*net.IPNet
	for _, s := range a.sets {
		c, err := s.allocate()
		if err != nil {
			for i, g := range got {
				a.sets[i].release(g)
			}
			return nil, fmt.Errorf("%v: %w", s.cluster, err)
		}
		got = append(got, c)
	}
	a.nodes[name] = holding{uid: uid, cidrs: got, given: cidrStrings(got)}
	return slices.Clone(got), nil
}

// release frees what the node holds; it reports whether it held anything.
func (a *allocator) release(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.releaseLocked(name)
}

// releaseIfNot frees what an incarnation of the node other than uid holds.
func (a *allocator) releaseIfNot(name string, uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h, ok := a.nodes[name]; ok && h.uid != uid {
		return a.releaseLocked(name)
	}
	return false
}

func (a *allocator) releaseLocked(name string) bool {
	h, ok := a.nodes[name]
	if !ok {
		return false
	}
	delete(a.nodes, name)
	for _, c := range h.cidrs {
		for _, s := range a.sets {
			if _, _, in := s.indices(c); in {
				s.release(c)
				break
			}
		}
	}
	return len(h.cidrs) > 0
}

func cidrStrings(cidrs []*net.IPNet) []string {
	out := make([]string, len(cidrs))
	for i, c := range cidrs {
		out[i] = c.String()
	}
	return out
}
