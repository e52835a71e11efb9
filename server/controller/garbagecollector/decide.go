package garbagecollector

import (
	"encoding/json"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ownerState is what a live lookup found for one owner reference.
type ownerState int

const (
	// ownerSolid: the owner exists and is not being deleted in the
	// foreground; the dependent must stay.
	ownerSolid ownerState = iota
	// ownerDangling: nothing with the owner's UID exists at its
	// coordinates.
	ownerDangling
	// ownerWaiting: the owner exists, being deleted in the foreground, and
	// waits for its dependents to go.
	ownerWaiting
)

func (s ownerState) String() string {
	return [...]string{"solid", "dangling", "waiting"}[s]
}

// stateOf classifies a live owner (nil when absent).
func stateOf(owner metav1.Object) ownerState {
	switch {
	case owner == nil:
		return ownerDangling
	case owner.GetDeletionTimestamp() != nil && slices.Contains(owner.GetFinalizers(), metav1.FinalizerDeleteDependents):
		return ownerWaiting
	}
	return ownerSolid
}

// plan is what attemptToDelete does with one dependent.
type plan struct {
	// removeRefs: patch away the references to these owners, and keep
	// the object.
	removeRefs []types.UID
	// remove: delete the object with policy.
	remove bool
	policy metav1.DeletionPropagation
	// unblock: before deleting, clear blockOwnerDeletion on the object's
	// own references, so that a cycle of foreground deletions cannot wait
	// on itself.
	unblock bool
}

// decide is upstream's attemptToDeleteItem decision for an object whose
// owner references (refs) were classified by live lookups (states, same
// order). hasDependents and dependentForeground describe the object's own
// dependents in the graph.
func decide(obj metav1.Object, refs []metav1.OwnerReference, states []ownerState, hasDependents, dependentForeground bool) plan {
	var solid, stale []types.UID
	waiting := false
	for i, s := range states {
		switch s {
		case ownerSolid:
			solid = append(solid, refs[i].UID)
		case ownerWaiting:
			waiting = true
			// A dependent that another owner keeps alive must stop
			// blocking an owner that waits for its dependents, or that
			// owner would wait forever.
			stale = append(stale, refs[i].UID)
		default:
			stale = append(stale, refs[i].UID)
		}
	}
	switch {
	case len(solid) > 0:
		return plan{removeRefs: stale}
	case waiting && hasDependents:
		// Deleting in the foreground keeps the waiting owner waiting until
		// this object's own dependents are gone too.
		return plan{remove: true, policy: metav1.DeletePropagationForeground, unblock: dependentForeground}
	}
	policy := metav1.DeletePropagationBackground
	switch fin := obj.GetFinalizers(); {
	case slices.Contains(fin, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case slices.Contains(fin, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	}
	return plan{remove: true, policy: policy}
}

// metaPatch is a JSON merge patch of metadata. UID and resourceVersion
// are preconditions: the API server refuses the patch (409) if the object
// changed since it was read, and the caller reads it again.
type metaPatch struct {
	Metadata patchMeta `json:"metadata"`
}

type patchMeta struct {
	UID             types.UID `json:"uid"`
	ResourceVersion string    `json:"resourceVersion"`
	// Pointers: nil leaves the field alone, a pointer to nil clears it.
	OwnerReferences *[]metav1.OwnerReference `json:"ownerReferences,omitempty"`
	Finalizers      *[]string                `json:"finalizers,omitempty"`
}

// withoutOwners drops the references to uids.
func withoutOwners(refs []metav1.OwnerReference, uids []types.UID) []metav1.OwnerReference {
	return slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return slices.Contains(uids, r.UID) })
}

// unblocked clears blockOwnerDeletion on every reference.
func unblocked(refs []metav1.OwnerReference) []metav1.OwnerReference {
	out := slices.Clone(refs)
	for i := range out {
		if out[i].BlockOwnerDeletion != nil {
			out[i].BlockOwnerDeletion = new(bool)
		}
	}
	return out
}

// ownersPatch replaces obj's owner references.
func ownersPatch(obj metav1.Object, refs []metav1.OwnerReference) []byte {
	if len(refs) == 0 {
		refs = nil
	}
	b, _ := json.Marshal(metaPatch{patchMeta{UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(), OwnerReferences: &refs}})
	return b
}

// finalizersPatch replaces obj's finalizers. Removing the last one of an
// object being deleted lets the API server delete it.
func finalizersPatch(obj metav1.Object, fin []string) []byte {
	if len(fin) == 0 {
		fin = nil
	}
	b, _ := json.Marshal(metaPatch{patchMeta{UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(), Finalizers: &fin}})
	return b
}
