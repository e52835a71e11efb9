package deployment

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newReplicaSet brings the existing new ReplicaSet's annotations and
// minReadySeconds up to date, or creates it when asked to. The new
// ReplicaSet's revision is one above the old ones', so a ReplicaSet that
// becomes new again on an undo moves to the top of the history.
func (c *controller) newReplicaSet(ctx context.Context, d *appsv1.Deployment, existing *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	newRevision := maxRevision(oldRSs) + 1
	if existing != nil {
		return c.refreshNewReplicaSet(ctx, d, existing, newRevision)
	}
	if !create {
		return nil, nil
	}
	hash := templateHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := *d.Spec.Template.DeepCopy()
	tmpl.Labels = withLabel(d.Spec.Template.Labels, hashLabel, hash)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, controllerKind)},
			Labels:          tmpl.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        new(int32(0)),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selectorWithLabel(d.Spec.Selector, hashLabel, hash),
			Template:        tmpl,
		},
	}
	count := newRSReplicas(d, append(oldRSs, rs), rs)
	rs.Spec.Replicas = &count
	setNewRSAnnotations(d, rs, newRevision, false)
	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	alreadyExisted := false
	switch {
	case apierrors.IsAlreadyExists(err):
		found, ok, err := c.takeExisting(ctx, d, rs)
		if !ok {
			return nil, err
		}
		created, alreadyExisted = found, true
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, fmt.Errorf("create replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if hasProgressDeadline(d) {
			setCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonFailedRSCreate, msg))
			_, _ = c.updateStatus(ctx, d)
		}
		c.recorder.Event(d, corev1.EventTypeWarning, reasonFailedRSCreate, msg)
		return nil, fmt.Errorf("create replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	if !alreadyExisted && count > 0 {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, count)
	}
	needsUpdate := setDeploymentRevision(d, strconv.FormatInt(newRevision, 10))
	if !alreadyExisted && hasProgressDeadline(d) {
		msg := fmt.Sprintf("Created new replica set %q", created.Name)
		setCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSCreated, msg))
		needsUpdate = true
	}
	if needsUpdate {
		if _, err := c.updateStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// takeExisting handles a name already taken: by our own new ReplicaSet
// (the cache had not shown it yet), which is then used; or by anything
// else, a hash collision, which bumps collisionCount so that the next
// attempt hashes to another name.
func (c *controller) takeExisting(ctx context.Context, d *appsv1.Deployment, want *appsv1.ReplicaSet) (*appsv1.ReplicaSet, bool, error) {
	rs, err := c.rsLister.ReplicaSets(want.Namespace).Get(want.Name)
	if err != nil {
		rs, err = c.client.AppsV1().ReplicaSets(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, false, fmt.Errorf("get existing replicaset %s/%s: %w", want.Namespace, want.Name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == d.UID && equalIgnoringHash(&d.Spec.Template, &rs.Spec.Template) {
		return rs, true, nil
	}
	if d.Status.CollisionCount == nil {
		d.Status.CollisionCount = new(int32(0))
	}
	*d.Status.CollisionCount++
	if _, err := c.updateStatus(ctx, d); err != nil {
		return nil, false, err
	}
	c.log.Info("replicaset name collision", "deployment", d.Namespace+"/"+d.Name, "replicaset", want.Name, "collisionCount", *d.Status.CollisionCount)
	return nil, false, fmt.Errorf("replicaset name %s/%s is taken by another object (collision count now %d)", want.Namespace, want.Name, *d.Status.CollisionCount)
}

func (c *controller) refreshNewReplicaSet(ctx context.Context, d *appsv1.Deployment, existing *appsv1.ReplicaSet, newRevision int64) (*appsv1.ReplicaSet, error) {
	rs := existing.DeepCopy()
	changed := setNewRSAnnotations(d, rs, newRevision, true)
	if changed || rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
		rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
		updated, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("update new replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		return updated, nil
	}
	needsUpdate := setDeploymentRevision(d, rs.Annotations[revisionAnnotation])
	if hasProgressDeadline(d) && getCondition(&d.Status, appsv1.DeploymentProgressing) == nil {
		msg := fmt.Sprintf("Found new replica set %q", rs.Name)
		setCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonFoundNewRS, msg))
		needsUpdate = true
	}
	if needsUpdate {
		if _, err := c.updateStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return existing, nil
}

// newRSReplicas is the size the new ReplicaSet may grow to now: for
// RollingUpdate as far as the surge allows, for Recreate all at once (old
// pods are gone by then).
func newRSReplicas(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	if !isRolling(d) {
		return replicas(d.Spec.Replicas)
	}
	cur := replicas(newRS.Spec.Replicas)
	maxTotal := replicas(d.Spec.Replicas) + maxSurge(d)
	current := podsBound(allRSs)
	if current >= maxTotal {
		return cur
	}
	return cur + min(maxTotal-current, replicas(d.Spec.Replicas)-cur)
}

// scaleReplicaSetAndRecordEvent scales rs to n when it is not there yet.
func (c *controller) scaleReplicaSetAndRecordEvent(ctx context.Context, rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment) (bool, *appsv1.ReplicaSet, error) {
	if replicas(rs.Spec.Replicas) == n {
		return false, rs, nil
	}
	op := "down"
	if replicas(rs.Spec.Replicas) < n {
		op = "up"
	}
	return c.scaleReplicaSet(ctx, rs, n, d, op)
}

// scaleReplicaSet sets rs's size and the replicas annotations, recording
// the size change as an event on the Deployment.
func (c *controller) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment, op string) (bool, *appsv1.ReplicaSet, error) {
	desired := replicas(d.Spec.Replicas)
	maxTotal := desired + maxSurge(d)
	sizeChange := replicas(rs.Spec.Replicas) != n
	if !sizeChange && !replicasAnnotationsNeedUpdate(rs, desired, maxTotal) {
		return false, rs, nil
	}
	from := replicas(rs.Spec.Replicas)
	cp := rs.DeepCopy()
	cp.Spec.Replicas = &n
	setReplicasAnnotations(cp, desired, maxTotal)
	updated, err := c.client.AppsV1().ReplicaSets(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return false, rs, fmt.Errorf("scale replicaset %s/%s to %d: %w", rs.Namespace, rs.Name, n, err)
	}
	if sizeChange {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", op, rs.Name, from, n)
	}
	return sizeChange, updated, nil
}

// scale resizes the Deployment's ReplicaSets to its current size without
// a rollout step: the only active one (or the newest) takes all; a
// saturated new one leaves the old ones nothing; otherwise, mid-rollout,
// the change is spread over the active ones in proportion to their sizes.
func (c *controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	if rs := activeOrLatest(newRS, oldRSs); rs != nil {
		if replicas(rs.Spec.Replicas) == replicas(d.Spec.Replicas) {
			return nil
		}
		_, _, err := c.scaleReplicaSetAndRecordEvent(ctx, rs, replicas(d.Spec.Replicas), d)
		return err
	}
	if saturated(d, newRS) {
		for _, old := range activeReplicaSets(oldRSs) {
			if _, _, err := c.scaleReplicaSetAndRecordEvent(ctx, old, 0, d); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRolling(d) {
		return nil
	}
	rss, sizes := proportionalSizes(d, activeReplicaSets(append(oldRSs, newRS)))
	op := ""
	if len(rss) > 0 {
		op = "down"
		if specReplicas(rss) < sumInt32(sizes) {
			op = "up"
		}
	}
	for i, rs := range rss {
		if _, _, err := c.scaleReplicaSet(ctx, rs, sizes[i], d, op); err != nil {
			return err
		}
	}
	return nil
}

func sumInt32(xs []int32) int32 {
	var n int32
	for _, x := range xs {
		n += x
	}
	return n
}

// activeOrLatest is the one ReplicaSet that should take a resize whole:
// the only active one, or with none active the new one, else the newest
// old one. With several active it is nil.
func activeOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	olds := append([]*appsv1.ReplicaSet(nil), oldRSs...)
	sort.SliceStable(olds, func(i, j int) bool { return olderFirst(olds[j], olds[i]) })
	active := activeReplicaSets(append(olds, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return olds[0]
	case 1:
		return active[0]
	}
	return nil
}

// saturated: the new ReplicaSet runs the whole deployment, available.
func saturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok := annotatedInt(rs, desiredReplicasAnnotation)
	r := replicas(d.Spec.Replicas)
	return ok && desired == r && replicas(rs.Spec.Replicas) == r && rs.Status.AvailableReplicas == r
}

// proportionalSizes spreads a resize over the active ReplicaSets, each
// growing or shrinking by its share of the total, judged against the size
// it was last scaled for (max-replicas annotation). Leftovers from rounding
// go to the largest. It returns the ReplicaSets in the order they are to
// be scaled, with their new sizes.
func proportionalSizes(d *appsv1.Deployment, active []*appsv1.ReplicaSet) ([]*appsv1.ReplicaSet, []int32) {
	rss := append([]*appsv1.ReplicaSet(nil), active...)
	allowed := int32(0)
	if replicas(d.Spec.Replicas) > 0 {
		allowed = replicas(d.Spec.Replicas) + maxSurge(d)
	}
	toAdd := allowed - specReplicas(rss)
	// Among equals, growth goes to the newer and shrinkage to the older.
	sort.SliceStable(rss, func(i, j int) bool {
		ri, rj := replicas(rss[i].Spec.Replicas), replicas(rss[j].Spec.Replicas)
		if ri != rj {
			return ri > rj
		}
		if toAdd > 0 {
			return olderFirst(rss[j], rss[i])
		}
		return olderFirst(rss[i], rss[j])
	})
	sizes := make([]int32, len(rss))
	added := int32(0)
	for i, rs := range rss {
		sizes[i] = replicas(rs.Spec.Replicas)
		if toAdd == 0 {
			continue
		}
		p := proportion(rs, d, toAdd, added)
		sizes[i] += p
		added += p
	}
	if len(rss) > 0 && toAdd != 0 {
		sizes[0] = max(sizes[0]+toAdd-added, 0)
	}
	return rss, sizes
}

// proportion is rs's share of toAdd, of which added is already handed
// out; it never hands out more than what is left.
func proportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if replicas(rs.Spec.Replicas) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	f := fraction(rs, d)
	left := toAdd - added
	if toAdd > 0 {
		return min(f, left)
	}
	return max(f, left)
}

// fraction is how much rs would change to keep its share of the
// deployment at the new size.
func fraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	cur := replicas(rs.Spec.Replicas)
	if replicas(d.Spec.Replicas) == 0 {
		return -cur
	}
	total := replicas(d.Spec.Replicas) + maxSurge(d)
	annotated, ok := annotatedInt(rs, maxReplicasAnnotation)
	if !ok || annotated == 0 {
		annotated = d.Status.Replicas
	}
	if annotated == 0 {
		return 0
	}
	return int32(math.Round(float64(cur)*float64(total)/float64(annotated))) - cur
}
