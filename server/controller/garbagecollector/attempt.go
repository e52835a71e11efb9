package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// errInvalidOwnerScope: a cluster-scoped object names a namespaced owner,
// which cannot exist. Upstream leaves such objects alone instead of
// retrying a lookup that can never succeed.
var errInvalidOwnerScope = errors.New("cluster-scoped object references a namespaced owner")

// attemptToDelete handles one attemptToDelete item: an object that may be
// garbage, an owner deleted in the foreground, or an unobserved owner to
// verify. requeue asks to look again later without it being an error.
func (c *collector) attemptToDelete(ctx context.Context, it item) (requeue bool, err error) {
	if it.virtual {
		return c.verifyOwner(ctx, it.ref)
	}
	n, ok := c.graph.get(it.ref.UID)
	if !ok {
		return false, nil // gone already; forgetting it enqueued what follows
	}
	// Being deleted is a one-way trip: once the object is gone its
	// dependents are looked at. Only foreground deletion needs us now.
	if n.deleting && !n.foreground {
		return false, nil
	}
	latest, err := c.live(ctx, n.ref)
	if err != nil {
		return false, err
	}
	if latest == nil {
		c.gone(n.ref)
		return false, nil
	}
	if stateOf(latest) == ownerWaiting {
		return false, c.processDeletingDependents(ctx, n.ref)
	}
	refs := latest.OwnerReferences
	if len(refs) == 0 {
		return false, nil
	}
	states := make([]ownerState, len(refs))
	for i, o := range refs {
		if states[i], err = c.ownerState(ctx, o, latest.Namespace); err != nil {
			return false, err
		}
	}
	has, fg := c.graph.dependentFacts(n.ref.UID)
	return false, c.carryOut(ctx, n.ref, latest, decide(latest, refs, states, has, fg))
}

// verifyOwner checks an owner that dependents reference but no informer
// has reported. Only a live lookup that finds nothing with its UID makes
// it absent; then its dependents are re-examined.
func (c *collector) verifyOwner(ctx context.Context, ref objectRef) (bool, error) {
	if _, ok := c.graph.get(ref.UID); ok {
		return false, nil // observed since: the graph knows it now
	}
	namespaced, err := c.api.namespaced(ref.APIVersion, ref.Kind)
	switch {
	case err != nil:
		return false, err
	case !namespaced:
		ref.Namespace = ""
	case ref.Namespace == "":
		return false, errInvalidOwnerScope // referenced by a cluster-scoped object
	}
	if !c.absent.has(ref) {
		live, err := c.live(ctx, ref)
		if err != nil {
			return false, err
		}
		if live != nil {
			// It exists and the informer is behind (or does not watch its
			// kind): keep checking, so that its deletion is noticed too.
			return true, nil
		}
		c.absent.add(ref)
	}
	for _, d := range c.graph.dependentsOf(ref.UID) {
		c.toDelete.Add(item{ref: d})
	}
	return false, nil
}

// gone handles a live lookup that found an observed object missing: the
// informer will say so too, but its dependents need not wait for that.
func (c *collector) gone(ref objectRef) {
	c.absent.add(ref)
	c.enqueue(c.graph.forget(ref))
}

// live reads the object ref names from the API server. nil means absent:
// not found, or the name now belongs to another UID.
func (c *collector) live(ctx context.Context, ref objectRef) (*metav1.PartialObjectMetadata, error) {
	obj, err := c.api.get(ctx, ref)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case obj.UID != ref.UID:
		return nil, nil
	}
	return obj, nil
}

// ownerState classifies one owner reference of an object in namespace ns
// by a live lookup of the owner (or the record of its absence).
func (c *collector) ownerState(ctx context.Context, o metav1.OwnerReference, ns string) (ownerState, error) {
	namespaced, err := c.api.namespaced(o.APIVersion, o.Kind)
	if err != nil {
		return ownerSolid, err
	}
	owner := ownerRefIn(o, ns)
	switch {
	case !namespaced:
		owner.Namespace = ""
	case ns == "":
		return ownerSolid, errInvalidOwnerScope
	}
	if c.absent.has(owner) {
		return ownerDangling, nil
	}
	live, err := c.live(ctx, owner)
	if err != nil {
		return ownerSolid, err
	}
	if live == nil {
		c.absent.add(owner)
		return ownerDangling, nil
	}
	return stateOf(live), nil
}

// carryOut executes a decision about the object ref, read as latest.
func (c *collector) carryOut(ctx context.Context, ref objectRef, latest *metav1.PartialObjectMetadata, p plan) error {
	switch {
	case len(p.removeRefs) > 0:
		c.log.Info("removing references to absent or terminating owners", "object", ref, "owners", p.removeRefs)
		return c.removeOwnerRefs(ctx, ref, p.removeRefs)
	case !p.remove:
		return nil
	}
	if p.unblock {
		if err := c.patchLive(ctx, ref, func(o *metav1.PartialObjectMetadata) []byte {
			return ownersPatch(o, unblocked(o.OwnerReferences))
		}); err != nil {
			return err
		}
		var err error
		if latest, err = c.live(ctx, ref); err != nil || latest == nil {
			return err
		}
	}
	c.log.Info("deleting object whose owners are gone or deleting", "object", ref, "propagationPolicy", p.policy)
	return c.deleteObject(ctx, ref, latest, p.policy)
}

// deleteObject deletes latest as read, so that a decision on stale owner
// references is never carried out. Other changes (a status update) do not
// undo the decision: then the delete is retried on UID alone, or busy
// objects could never be collected.
func (c *collector) deleteObject(ctx context.Context, ref objectRef, latest *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	uid, rv := latest.UID, latest.ResourceVersion
	opts := metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
	err := c.api.delete(ctx, ref, opts)
	if apierrors.IsConflict(err) {
		now, lerr := c.live(ctx, ref)
		if lerr != nil || now == nil {
			return lerr
		}
		if !equality.Semantic.DeepEqual(now.OwnerReferences, latest.OwnerReferences) {
			return fmt.Errorf("owner references of %s changed, deciding again: %w", ref, err)
		}
		opts.Preconditions.ResourceVersion = nil
		err = c.api.delete(ctx, ref, opts)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// processDeletingDependents handles an owner deleted in the foreground:
// its finalizer goes once no dependent blocks it; until then the blocking
// dependents are (re)submitted for deletion. Their disappearance brings
// the owner back through the graph.
func (c *collector) processDeletingDependents(ctx context.Context, owner objectRef) error {
	bs := c.graph.blockers(owner.UID)
	if len(bs) == 0 {
		c.log.Info("dependents gone, removing finalizer", "object", owner, "finalizer", metav1.FinalizerDeleteDependents)
		return c.removeFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
	}
	for _, b := range bs {
		if !b.foreground {
			c.toDelete.Add(item{ref: b.ref})
		}
	}
	return nil
}

// attemptToOrphan handles an owner deleted with the orphan policy: every
// dependent loses its reference to it, then the orphan finalizer goes.
func (c *collector) attemptToOrphan(ctx context.Context, owner objectRef) error {
	live, err := c.live(ctx, owner)
	if err != nil || live == nil || live.DeletionTimestamp == nil || !slices.Contains(live.Finalizers, metav1.FinalizerOrphanDependents) {
		return err // no longer asking to orphan: someone else finalized it
	}
	deps := c.graph.dependentsOf(owner.UID)
	errs := make([]error, len(deps))
	var wg sync.WaitGroup
	// A few patches at a time: an owner may have many dependents, and the
	// API server is shared with everything else.
	sem := make(chan struct{}, 8)
	for i, d := range deps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := c.removeOwnerRefs(ctx, d, []types.UID{owner.UID}); err != nil {
				errs[i] = fmt.Errorf("orphan %s: %w", d, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.log.Info("dependents orphaned, removing finalizer", "object", owner, "dependents", len(deps), "finalizer", metav1.FinalizerOrphanDependents)
	return c.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents)
}

// removeOwnerRefs patches away the object's references to uids.
func (c *collector) removeOwnerRefs(ctx context.Context, ref objectRef, uids []types.UID) error {
	return c.patchLive(ctx, ref, func(o *metav1.PartialObjectMetadata) []byte {
		keep := withoutOwners(o.OwnerReferences, uids)
		if len(keep) == len(o.OwnerReferences) {
			return nil
		}
		return ownersPatch(o, keep)
	})
}

// removeFinalizer patches finalizer fin away.
func (c *collector) removeFinalizer(ctx context.Context, ref objectRef, fin string) error {
	return c.patchLive(ctx, ref, func(o *metav1.PartialObjectMetadata) []byte {
		if !slices.Contains(o.Finalizers, fin) {
			return nil
		}
		return finalizersPatch(o, slices.DeleteFunc(slices.Clone(o.Finalizers), func(f string) bool { return f == fin }))
	})
}

// patchLive reads the object, asks mk for a patch against what it read
// (nil: nothing to do) and applies it. The patch carries the read
// resourceVersion, so a concurrent change makes it fail with a conflict;
// then it is read and computed again. An object that is gone needs nothing.
func (c *collector) patchLive(ctx context.Context, ref objectRef, mk func(*metav1.PartialObjectMetadata) []byte) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		o, err := c.live(ctx, ref)
		if err != nil || o == nil {
			return err
		}
		p := mk(o)
		if p == nil {
			return nil
		}
		if err := c.api.patch(ctx, ref, p); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}
