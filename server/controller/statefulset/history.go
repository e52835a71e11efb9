package statefulset

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// revisionPatch is what a ControllerRevision of set holds: a strategic
// merge patch replacing spec.template. kubectl builds the same bytes to
// tell whether a revision is the current one, and applies them for
// `rollout undo`; the controller applies them to recreate pods of an old
// revision below a partition.
func revisionPatch(set *appsv1.StatefulSet) ([]byte, error) {
	b, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	spec, _ := raw["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	if template == nil {
		return nil, fmt.Errorf("stateful set %s/%s has no template", set.Namespace, set.Name)
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

// revisionHash is upstream's: FNV-32 of the data and the collision count.
func revisionHash(data []byte, collisionCount *int32) string {
	h := fnv.New32()
	h.Write(data)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

func revisionName(owner, hash string) string {
	if len(owner) > 223 {
		owner = owner[:223]
	}
	return owner + "-" + hash
}

// newRevision is set's template as revision number rev.
func newRevision(set *appsv1.StatefulSet, rev int64, collisionCount int32) (*appsv1.ControllerRevision, error) {
	patch, err := revisionPatch(set)
	if err != nil {
		return nil, err
	}
	lbls := maps.Clone(set.Spec.Template.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	hash := revisionHash(patch, &collisionCount)
	lbls[appsv1.ControllerRevisionHashLabelKey] = hash
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            revisionName(set.Name, hash),
			Namespace:       set.Namespace,
			Labels:          lbls,
			Annotations:     maps.Clone(set.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: rev,
	}, nil
}

// applyRevision is set with its template as of rev.
func applyRevision(set *appsv1.StatefulSet, rev *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	b, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(b, rev.Data.Raw, &appsv1.StatefulSet{})
	if err != nil {
		return nil, fmt.Errorf("apply revision %s: %w", rev.Name, err)
	}
	out := &appsv1.StatefulSet{}
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, fmt.Errorf("apply revision %s: %w", rev.Name, err)
	}
	return out, nil
}

func sortRevisions(revs []*appsv1.ControllerRevision) {
	slices.SortStableFunc(revs, func(a, b *appsv1.ControllerRevision) int {
		if c := cmp.Compare(a.Revision, b.Revision); c != 0 {
			return c
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
}

// listRevisions returns the revisions set owns, adopting orphans its
// selector matches, oldest first.
func (c *controller) listRevisions(ctx context.Context, set *appsv1.StatefulSet) ([]*appsv1.ControllerRevision, error) {
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector: %w", err)
	}
	all, err := c.revisions.ControllerRevisions(set.Namespace).List(selector)
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ControllerRevision
	for _, r := range all {
		ref := metav1.GetControllerOf(r)
		switch {
		case ref != nil && ref.UID == set.UID:
			out = append(out, r)
		case ref == nil && r.DeletionTimestamp == nil && set.DeletionTimestamp == nil:
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
				"ownerReferences": []any{metav1.NewControllerRef(set, controllerKind)}, "uid": r.UID}})
			adopted, err := c.client.AppsV1().ControllerRevisions(r.Namespace).Patch(ctx, r.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("adopt controller revision %s: %w", r.Name, err)
			}
			out = append(out, adopted)
		}
	}
	sortRevisions(out)
	return out, nil
}

// revisionsOf finds the current revision (what status says pods run) and
// the update revision (the set's template now), creating or renumbering
// the latter. revs are sorted oldest first.
func (c *controller) revisionsOf(ctx context.Context, set *appsv1.StatefulSet, revs []*appsv1.ControllerRevision) (current, update *appsv1.ControllerRevision, collisionCount int32, err error) {
	if set.Status.CollisionCount != nil {
		collisionCount = *set.Status.CollisionCount
	}
	next := int64(1)
	if len(revs) > 0 {
		next = revs[len(revs)-1].Revision + 1
	}
	update, err = newRevision(set, next, collisionCount)
	if err != nil {
		return nil, nil, collisionCount, err
	}
	var equal []*appsv1.ControllerRevision
	for _, r := range revs {
		if bytes.Equal(r.Data.Raw, update.Data.Raw) {
			equal = append(equal, r)
		}
	}
	switch {
	case len(equal) > 0 && equal[len(equal)-1] == revs[len(revs)-1]:
		// The template has not changed since the newest revision.
		update = revs[len(revs)-1]
	case len(equal) > 0:
		// A rollback to an older template: that revision becomes the newest.
		r := equal[len(equal)-1].DeepCopy()
		r.Revision = next
		if update, err = c.client.AppsV1().ControllerRevisions(r.Namespace).Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			return nil, nil, collisionCount, fmt.Errorf("renumber controller revision %s: %w", r.Name, err)
		}
	default:
		if update, err = c.createRevision(ctx, set, update, &collisionCount); err != nil {
			return nil, nil, collisionCount, err
		}
	}
	for _, r := range revs {
		if r.Name == set.Status.CurrentRevision {
			current = r
		}
	}
	if current == nil {
		current = update
	}
	return current, update, collisionCount, nil
}

// createRevision stores rev, bumping the collision count (and with it the
// name) while the name is taken by a different template.
func (c *controller) createRevision(ctx context.Context, set *appsv1.StatefulSet, rev *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	client := c.client.AppsV1().ControllerRevisions(set.Namespace)
	for {
		hash := revisionHash(rev.Data.Raw, collisionCount)
		rev.Name = revisionName(set.Name, hash)
		rev.Labels[appsv1.ControllerRevisionHashLabelKey] = hash
		created, err := client.Create(ctx, rev, metav1.CreateOptions{})
		if err == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create controller revision: %w", err)
		}
		existing, err := client.Get(ctx, rev.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get controller revision: %w", err)
		}
		if bytes.Equal(existing.Data.Raw, rev.Data.Raw) {
			return existing, nil
		}
		*collisionCount++
	}
}

// truncateHistory deletes the oldest revisions beyond revisionHistoryLimit
// that neither status nor any pod refers to.
func (c *controller) truncateHistory(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, revs []*appsv1.ControllerRevision, current, update *appsv1.ControllerRevision) error {
	live := map[string]bool{}
	if current != nil {
		live[current.Name] = true
	}
	if update != nil {
		live[update.Name] = true
	}
	for _, p := range pods {
		live[podRevision(p)] = true
	}
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	var dead []*appsv1.ControllerRevision
	for _, r := range revs {
		if !live[r.Name] {
			dead = append(dead, r)
		}
	}
	if len(dead) <= limit {
		return nil
	}
	for _, r := range dead[:len(dead)-limit] {
		if err := c.client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete controller revision %s: %w", r.Name, err)
		}
	}
	return nil
}
