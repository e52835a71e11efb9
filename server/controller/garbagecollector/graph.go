package garbagecollector

import (
	"fmt"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// objectRef names one object: where it is served and which incarnation
// (UID) it is. It is part of the work queues' keys, so it stays comparable.
type objectRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

func (r objectRef) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s/%s (%s)", r.APIVersion, r.Kind, r.Name, r.UID)
	}
	return fmt.Sprintf("%s %s %s/%s (%s)", r.APIVersion, r.Kind, r.Namespace, r.Name, r.UID)
}

func (r objectRef) group() string {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.Group
}

// ownerRefIn is the object an owner reference of an object in namespace ns
// points at. References carry no namespace: a namespaced owner lives in
// its dependent's namespace, a cluster-scoped one in none; which of the two
// is only known from discovery, so callers resolve the scope later.
func ownerRefIn(o metav1.OwnerReference, ns string) objectRef {
	return objectRef{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: ns, Name: o.Name, UID: o.UID}
}

// refMatches reports whether a dependent in namespace depNS that holds
// reference o really points at the observed object owner. The version is
// not compared: every version of a group serves the same objects.
func refMatches(o metav1.OwnerReference, depNS string, owner objectRef) bool {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil || gv.Group != owner.group() || o.Kind != owner.Kind || o.Name != owner.Name || o.UID != owner.UID {
		return false
	}
	return owner.Namespace == "" || owner.Namespace == depNS
}

// node is what the graph keeps of one observed object.
type node struct {
	ref    objectRef
	owners []metav1.OwnerReference
	// deleting: the object has a deletionTimestamp.
	deleting bool
	// foreground: deleting, and waiting for the garbage collector to delete
	// its dependents (the foregroundDeletion finalizer).
	foreground bool
	// orphan: deleting, and waiting for the garbage collector to strip the
	// references to it from its dependents (the orphan finalizer).
	orphan bool
}

// nodeFor makes the node for an observed object.
func nodeFor(ref objectRef, m metav1.Object) *node {
	n := &node{ref: ref, owners: slices.Clone(m.GetOwnerReferences()), deleting: m.GetDeletionTimestamp() != nil}
	n.foreground = n.deleting && slices.Contains(m.GetFinalizers(), metav1.FinalizerDeleteDependents)
	n.orphan = n.deleting && slices.Contains(m.GetFinalizers(), metav1.FinalizerOrphanDependents)
	return n
}

// item is a work-queue key.
type item struct {
	ref objectRef
	// virtual: ref is an owner known only from references to it, not yet
	// seen by an informer; the work is to check whether it exists.
	virtual bool
}

// work is something the graph asks the workers to do after a change.
type work struct {
	orphan bool // attemptToOrphan rather than attemptToDelete
	item   item
}

func deleteWork(r objectRef) work { return work{item: item{ref: r}} }
func verifyWork(r objectRef) work { return work{item: item{ref: r, virtual: true}} }
func orphanWork(r objectRef) work { return work{orphan: true, item: item{ref: r}} }

func (w work) String() string {
	return fmt.Sprintf("orphan=%v virtual=%v %s", w.orphan, w.item.virtual, w.item.ref)
}

// graph holds the ownership relations of every observed object. Owners
// that are referenced but not observed ("virtual" owners upstream) have no
// node, only dependents: whoever observes them later finds those waiting.
type graph struct {
	mu    sync.Mutex
	nodes map[types.UID]*node
	// dependents indexes observed objects by the UIDs their owner
	// references name, observed or not.
	dependents map[types.UID]map[types.UID]struct{}
}

func newGraph() *graph {
	return &graph{nodes: map[types.UID]*node{}, dependents: map[types.UID]map[types.UID]struct{}{}}
}

// lock takes the graph's lock and returns its release, for
// "defer g.lock()()".
func (g *graph) lock() func() {
	g.mu.Lock()
	return g.mu.Unlock
}

func (g *graph) size() int {
	defer g.lock()()
	return len(g.nodes)
}

// observe records an added or updated object and returns the work this
// change calls for.
func (g *graph) observe(n *node) []work {
	defer g.lock()()
	uid := n.ref.UID
	old := g.nodes[uid]
	var out []work
	if old == nil {
		// Dependents that named this owner by other coordinates (another
		// kind, or another namespace) point at nothing: let them be checked.
		for d := range g.dependents[uid] {
			dn := g.nodes[d]
			for _, o := range dn.owners {
				if o.UID == uid && !refMatches(o, dn.ref.Namespace, n.ref) {
					out = append(out, deleteWork(dn.ref))
				}
			}
		}
	}
	g.nodes[uid] = n
	var oldOwners []metav1.OwnerReference
	if old != nil {
		oldOwners = old.owners
	}
	added, removed, unblocked := diffOwners(oldOwners, n.owners)
	for _, o := range added {
		g.link(o.UID, uid)
		owner := g.nodes[o.UID]
		switch {
		case owner == nil:
			out = append(out, verifyWork(ownerRefIn(o, n.ref.Namespace)))
		case !refMatches(o, n.ref.Namespace, owner.ref), owner.foreground:
			// A bad reference may be dangling; a new dependent of an owner
			// deleted in the foreground must go too.
			out = append(out, deleteWork(n.ref))
		}
	}
	for _, o := range removed {
		g.unlink(o.UID, uid)
	}
	// An owner waiting for its blocking dependents may be done now.
	for _, o := range append(removed, unblocked...) {
		if owner := g.nodes[o.UID]; owner != nil && owner.foreground {
			out = append(out, deleteWork(owner.ref))
		}
	}
	return append(out, g.transitions(old, n)...)
}

// transitions starts orphaning or foreground deletion when an object
// begins waiting for it. Only the start is acted on; retries are the
// queues' business.
func (g *graph) transitions(old, n *node) []work {
	if n.orphan && (old == nil || !old.orphan) {
		return []work{orphanWork(n.ref)}
	}
	if !n.foreground || (old != nil && old.foreground) {
		return nil
	}
	var out []work
	for d := range g.dependents[n.ref.UID] {
		out = append(out, deleteWork(g.nodes[d].ref))
	}
	return append(out, deleteWork(n.ref))
}

// forget removes an object that is gone (its informer said so, or a live
// lookup found nothing with its UID) and returns the follow-up work: its
// dependents may now be garbage, and owners waiting for it may finish.
func (g *graph) forget(ref objectRef) []work {
	defer g.lock()()
	n := g.nodes[ref.UID]
	if n == nil {
		return nil
	}
	delete(g.nodes, ref.UID)
	var out []work
	for _, o := range n.owners {
		g.unlink(o.UID, ref.UID)
		if owner := g.nodes[o.UID]; owner != nil && owner.foreground {
			out = append(out, deleteWork(owner.ref))
		}
	}
	for d := range g.dependents[ref.UID] {
		out = append(out, deleteWork(g.nodes[d].ref))
	}
	return out
}

func (g *graph) link(owner, dependent types.UID) {
	if g.dependents[owner] == nil {
		g.dependents[owner] = map[types.UID]struct{}{}
	}
	g.dependents[owner][dependent] = struct{}{}
}

func (g *graph) unlink(owner, dependent types.UID) {
	delete(g.dependents[owner], dependent)
	if len(g.dependents[owner]) == 0 {
		delete(g.dependents, owner)
	}
}

// get returns a copy of the node with this UID.
func (g *graph) get(uid types.UID) (node, bool) {
	defer g.lock()()
	n, ok := g.nodes[uid]
	if !ok {
		return node{}, false
	}
	return *n, true
}

// dependentsOf lists the observed objects that reference uid.
func (g *graph) dependentsOf(uid types.UID) []objectRef {
	defer g.lock()()
	var out []objectRef
	for d := range g.dependents[uid] {
		out = append(out, g.nodes[d].ref)
	}
	return out
}

// dependentFacts tells whether uid has observed dependents, and whether
// one of them is itself being deleted in the foreground (upstream's
// cheap cycle check before deleting an object in the foreground).
func (g *graph) dependentFacts(uid types.UID) (has, foreground bool) {
	defer g.lock()()
	for d := range g.dependents[uid] {
		has = true
		foreground = foreground || g.nodes[d].foreground
	}
	return has, foreground
}

// blocker is a dependent that keeps an owner deleted in the foreground.
type blocker struct {
	ref        objectRef
	foreground bool
}

// blockers lists the dependents whose reference to uid has
// blockOwnerDeletion: the owner's foregroundDeletion finalizer stays
// until none is left.
func (g *graph) blockers(uid types.UID) []blocker {
	defer g.lock()()
	var out []blocker
	for d := range g.dependents[uid] {
		dn := g.nodes[d]
		for _, o := range dn.owners {
			if o.UID == uid && o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion {
				out = append(out, blocker{ref: dn.ref, foreground: dn.foreground})
				break
			}
		}
	}
	return out
}

// diffOwners compares two reference lists by UID: references only in
// next are added, only in prev removed; unblocked ones stopped blocking
// their owner's deletion.
func diffOwners(prev, next []metav1.OwnerReference) (added, removed, unblocked []metav1.OwnerReference) {
	find := func(refs []metav1.OwnerReference, uid types.UID) *metav1.OwnerReference {
		for i := range refs {
			if refs[i].UID == uid {
				return &refs[i]
			}
		}
		return nil
	}
	blocks := func(r *metav1.OwnerReference) bool { return r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion }
	for i := range next {
		p := find(prev, next[i].UID)
		switch {
		case p == nil:
			added = append(added, next[i])
		case blocks(p) && !blocks(&next[i]):
			unblocked = append(unblocked, next[i])
		}
	}
	for i := range prev {
		if find(next, prev[i].UID) == nil {
			removed = append(removed, prev[i])
		}
	}
	return added, removed, unblocked
}
