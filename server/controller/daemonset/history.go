package daemonset

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
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
)

const hashLabel = appsv1.DefaultDaemonSetUniqueLabelKey

// revisionPatch is what a ControllerRevision of ds holds: a strategic merge
// patch replacing spec.template. kubectl compares it byte for byte with the
// one it computes the same way (rollout undo skips a revision equal to the
// current one) and applies it to roll back, so the shape is upstream's.
func revisionPatch(ds *appsv1.DaemonSet) ([]byte, error) {
	b, err := json.Marshal(ds)
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
		return nil, fmt.Errorf("daemon set %s/%s has no template", ds.Namespace, ds.Name)
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

// templateHash names the revision of a template. The collision count is
// mixed in so that bumping it gives a fresh name when two templates hash
// alike.
func templateHash(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	b, _ := json.Marshal(t) // a PodTemplateSpec always encodes
	h.Write(b)
	if collisionCount != nil {
		var c [8]byte
		binary.LittleEndian.PutUint32(c[:], uint32(*collisionCount))
		h.Write(c[:])
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// revisionName keeps the name a valid object name however long ds's is.
func revisionName(owner, hash string) string {
	if len(owner) > 223 {
		owner = owner[:223]
	}
	return owner + "-" + hash
}

// claimRevisions returns the revisions ds owns, adopting orphans that match
// its selector (as after an orphaning delete and re-create of the set).
func (c *controller) claimRevisions(ctx context.Context, ds *appsv1.DaemonSet) ([]*appsv1.ControllerRevision, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of daemon set %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	all, err := c.revisions.ControllerRevisions(ds.Namespace).List(selector)
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ControllerRevision
	for _, r := range all {
		ref := metav1.GetControllerOf(r)
		switch {
		case ref != nil && ref.UID == ds.UID:
			out = append(out, r)
		case ref == nil && r.DeletionTimestamp == nil && ds.DeletionTimestamp == nil:
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
				"ownerReferences": []any{metav1.NewControllerRef(ds, controllerKind)}, "uid": r.UID}})
			adopted, err := c.client.AppsV1().ControllerRevisions(r.Namespace).Patch(ctx, r.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("adopt controller revision %s/%s: %w", r.Namespace, r.Name, err)
			}
			out = append(out, adopted)
		}
	}
	return out, nil
}

// constructHistory finds (or makes) the revision of ds's current template
// and returns it with the older ones. A rollback to an old template makes
// that old revision current again, with the next revision number, which
// is how `kubectl rollout history` shows it.
func (c *controller) constructHistory(ctx context.Context, ds *appsv1.DaemonSet) (*appsv1.ControllerRevision, []*appsv1.ControllerRevision, error) {
	histories, err := c.claimRevisions(ctx, ds)
	if err != nil {
		return nil, nil, err
	}
	patch, err := revisionPatch(ds)
	if err != nil {
		return nil, nil, err
	}
	var current, old []*appsv1.ControllerRevision
	for _, h := range histories {
		if _, ok := h.Labels[hashLabel]; !ok {
			// Pods find their revision by this label; a revision written
			// without it gets its name, which is unique.
			h = h.DeepCopy()
			h.Labels = maps.Clone(h.Labels)
			if h.Labels == nil {
				h.Labels = map[string]string{}
			}
			h.Labels[hashLabel] = h.Name
			if h, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, h, metav1.UpdateOptions{}); err != nil {
				return nil, nil, fmt.Errorf("label controller revision: %w", err)
			}
		}
		if bytes.Equal(h.Data.Raw, patch) {
			current = append(current, h)
		} else {
			old = append(old, h)
		}
	}
	next := maxRevision(old) + 1
	if len(current) == 0 {
		cur, err := c.snapshot(ctx, ds, patch, next)
		return cur, old, err
	}
	cur, err := c.dedupCurrent(ctx, ds, current)
	if err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		cur = cur.DeepCopy()
		cur.Revision = next
		if cur, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("renumber controller revision: %w", err)
		}
	}
	return cur, old, nil
}

func maxRevision(rs []*appsv1.ControllerRevision) int64 {
	var m int64
	for _, r := range rs {
		m = max(m, r.Revision)
	}
	return m
}

// dedupCurrent keeps the newest of several revisions holding the current
// template, moving pods that name the others over to it first.
func (c *controller) dedupCurrent(ctx context.Context, ds *appsv1.DaemonSet, current []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	if len(current) == 1 {
		return current[0], nil
	}
	keep := slices.MaxFunc(current, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	pods, err := c.claimPods(ctx, ds)
	if err != nil {
		return nil, err
	}
	for _, r := range current {
		if r == keep {
			continue
		}
		for _, pod := range pods {
			if pod.Labels[hashLabel] != r.Labels[hashLabel] {
				continue
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{hashLabel: keep.Labels[hashLabel]}}})
			if _, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("relabel pod %s: %w", pod.Name, err)
			}
		}
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete duplicate controller revision: %w", err)
		}
	}
	return keep, nil
}

// snapshot stores ds's current template as revision number rev. A name
// taken by a different template is a hash collision: the collision count
// is bumped in status and the sync retried with a new name.
func (c *controller) snapshot(ctx context.Context, ds *appsv1.DaemonSet, patch []byte, rev int64) (*appsv1.ControllerRevision, error) {
	hash := templateHash(&ds.Spec.Template, ds.Status.CollisionCount)
	lbls := maps.Clone(ds.Spec.Template.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[hashLabel] = hash
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            revisionName(ds.Name, hash),
			Namespace:       ds.Namespace,
			Labels:          lbls,
			Annotations:     maps.Clone(ds.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: rev,
	}
	created, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Create(ctx, cr, metav1.CreateOptions{})
	if err == nil {
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create controller revision: %w", err)
	}
	existing, getErr := c.client.AppsV1().ControllerRevisions(ds.Namespace).Get(ctx, cr.Name, metav1.GetOptions{})
	if getErr != nil {
		return nil, fmt.Errorf("get controller revision: %w", getErr)
	}
	if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == ds.UID && bytes.Equal(existing.Data.Raw, patch) {
		return existing, nil
	}
	fresh, getErr := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	if getErr != nil {
		return nil, fmt.Errorf("get daemon set: %w", getErr)
	}
	if !equalCount(fresh.Status.CollisionCount, ds.Status.CollisionCount) {
		return nil, fmt.Errorf("daemon set %s/%s: stale collision count, retrying", ds.Namespace, ds.Name)
	}
	fresh.Status.CollisionCount = new(deref(fresh.Status.CollisionCount) + 1)
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("bump collision count: %w", err)
	}
	return nil, fmt.Errorf("hash collision on controller revision %s: %w", cr.Name, err)
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func equalCount(a, b *int32) bool {
	return (a == nil) == (b == nil) && deref(a) == deref(b)
}

// cleanupHistory deletes the oldest revisions beyond revisionHistoryLimit
// that no pod runs any more.
func (c *controller) cleanupHistory(ctx context.Context, ds *appsv1.DaemonSet, old []*appsv1.ControllerRevision) error {
	limit := 10
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	excess := len(old) - limit
	if excess <= 0 {
		return nil
	}
	nodes, err := c.nodesToPods(ctx, ds, true)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, pods := range nodes {
		for _, pod := range pods {
			live[pod.Labels[hashLabel]] = true
		}
	}
	for _, r := range revisionsToDelete(old, live, excess) {
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete controller revision %s: %w", r.Name, err)
		}
	}
	return nil
}

// revisionsToDelete picks up to n revisions, oldest first, that no live
// pod runs.
func revisionsToDelete(old []*appsv1.ControllerRevision, live map[string]bool, n int) []*appsv1.ControllerRevision {
	sorted := slices.Clone(old)
	slices.SortStableFunc(sorted, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	var out []*appsv1.ControllerRevision
	for _, r := range sorted {
		if len(out) == n {
			break
		}
		if !live[r.Labels[hashLabel]] {
			out = append(out, r)
		}
	}
	return out
}
