package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rolloutRolling takes one RollingUpdate step: grow the new ReplicaSet
// within the surge, else shrink the old ones within the unavailability
// limit, else, once complete, prune history.
func (c *controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.replicaSetsAndSyncRevision(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	allRSs := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaledUp, err := c.reconcileNewReplicaSet(ctx, allRSs, newRS, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	scaledDown, err := c.reconcileOldReplicaSets(ctx, allRSs, activeReplicaSets(oldRSs), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanup(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// reconcileNewReplicaSet grows (or, above the replicas, shrinks) the new
// ReplicaSet as far as allowed now.
func (c *controller) reconcileNewReplicaSet(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	want := replicas(d.Spec.Replicas)
	cur := replicas(newRS.Spec.Replicas)
	if cur == want {
		return false, nil
	}
	if cur > want {
		scaled, _, err := c.scaleReplicaSetAndRecordEvent(ctx, newRS, want, d)
		return scaled, err
	}
	scaled, _, err := c.scaleReplicaSetAndRecordEvent(ctx, newRS, newRSReplicas(d, allRSs, newRS), d)
	return scaled, err
}

// reconcileOldReplicaSets shrinks the old ReplicaSets as far as the
// unavailability limit allows: first by their unavailable pods, which cost
// nothing to lose, then by available ones.
func (c *controller) reconcileOldReplicaSets(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if specReplicas(oldRSs) == 0 {
		return false, nil
	}
	minAvailable := replicas(d.Spec.Replicas) - maxUnavailable(d)
	newUnavailable := replicas(newRS.Spec.Replicas) - min(replicas(newRS.Spec.Replicas), newRS.Status.AvailableReplicas)
	maxScaledDown := specReplicas(allRSs) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	oldRSs, cleaned, err := c.cleanupUnhealthyReplicas(ctx, oldRSs, d, maxScaledDown)
	if err != nil {
		return false, err
	}
	allRSs = append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaled, err := c.scaleDownOldForRollingUpdate(ctx, allRSs, oldRSs, d)
	if err != nil {
		return false, err
	}
	return cleaned+scaled > 0, nil
}

// cleanupUnhealthyReplicas drops the unavailable pods of old ReplicaSets,
// oldest first, up to limit: they serve nobody, and may never come up.
func (c *controller) cleanupUnhealthyReplicas(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment, limit int32) ([]*appsv1.ReplicaSet, int32, error) {
	oldRSs = append([]*appsv1.ReplicaSet(nil), oldRSs...)
	sortOlderFirst(oldRSs)
	var total int32
	for i, rs := range oldRSs {
		if total >= limit {
			break
		}
		cur := replicas(rs.Spec.Replicas)
		if cur == 0 || cur <= rs.Status.AvailableReplicas {
			continue
		}
		n := min(limit-total, cur-rs.Status.AvailableReplicas)
		_, updated, err := c.scaleReplicaSetAndRecordEvent(ctx, rs, cur-n, d)
		if err != nil {
			return nil, total, err
		}
		total += n
		oldRSs[i] = updated
	}
	return oldRSs, total, nil
}

// scaleDownOldForRollingUpdate shrinks old ReplicaSets, oldest first, by
// as many available pods as exceed the minimum available.
func (c *controller) scaleDownOldForRollingUpdate(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) (int32, error) {
	minAvailable := replicas(d.Spec.Replicas) - maxUnavailable(d)
	available := availableBound(allRSs)
	if available <= minAvailable {
		return 0, nil
	}
	want := available - minAvailable
	oldRSs = append([]*appsv1.ReplicaSet(nil), oldRSs...)
	sortOlderFirst(oldRSs)
	var total int32
	for _, rs := range oldRSs {
		if total >= want {
			break
		}
		cur := replicas(rs.Spec.Replicas)
		if cur == 0 {
			continue
		}
		n := min(cur, want-total)
		if _, _, err := c.scaleReplicaSetAndRecordEvent(ctx, rs, cur-n, d); err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// rolloutRecreate scales every old ReplicaSet to zero, waits until their
// pods are all gone, and only then starts the new ReplicaSet at full size:
// old and new pods never run together.
func (c *controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) error {
	newRS, oldRSs, err := c.replicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	allRSs := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaledDown := false
	for _, rs := range activeReplicaSets(oldRSs) {
		scaled, _, err := c.scaleReplicaSetAndRecordEvent(ctx, rs, 0, d)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown || oldPodsRunning(newRS, oldRSs, podMap) {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if newRS == nil {
		if newRS, oldRSs, err = c.replicaSetsAndSyncRevision(ctx, d, rsList, true); err != nil {
			return err
		}
		allRSs = append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	}
	if _, err := c.reconcileNewReplicaSet(ctx, allRSs, newRS, d); err != nil {
		return err
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanup(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// oldPodsRunning: an old ReplicaSet still reports pods, or a pod of one
// has not finished — terminating pods included, they may still run.
func oldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) bool {
	if sumStatus(oldRSs, statusReplicas) > 0 {
		return true
	}
	for uid, pods := range podMap {
		if newRS != nil && newRS.UID == uid {
			continue
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				return true
			}
		}
	}
	return false
}
