package deployment

import (
	"context"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// sync brings one Deployment a step closer to its spec. Every step that
// changes a ReplicaSet returns; the ReplicaSet's update brings the
// Deployment back for the next step, decided on fresh state.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.dLister.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get deployment %s: %w", key, err)
	}
	d := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || d.Spec.Selector == nil {
		// Validation refuses these; nothing can be done with one.
		c.log.Warn("deployment with an invalid selector", "deployment", key, "err", err)
		return nil
	}
	if sel.Empty() {
		// Validation refuses these today; one stored earlier would take
		// every pod in the namespace.
		c.recorder.Eventf(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_, err := c.updateStatus(ctx, d)
			return err
		}
		return nil
	}
	rsList, err := c.replicaSetsFor(ctx, d)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rsList)
	}
	if err := c.checkPausedCondition(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.syncScale(ctx, d, rsList)
	}
	scaling, err := c.isScalingEvent(ctx, d, rsList)
	if err != nil {
		return err
	}
	if scaling {
		return c.syncScale(ctx, d, rsList)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		podMap, err := c.podsByReplicaSet(d, rsList)
		if err != nil {
			return err
		}
		return c.rolloutRecreate(ctx, d, rsList, podMap)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return c.rolloutRolling(ctx, d, rsList)
	}
	return fmt.Errorf("deployment %s: unexpected strategy type %q", key, d.Spec.Strategy.Type)
}

func (c *controller) syncStatusOnly(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.replicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	return c.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// syncScale handles a paused Deployment, and a resize without a template
// change: ReplicaSets are scaled, none is created.
func (c *controller) syncScale(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.replicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, oldRSs); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := c.cleanup(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	return c.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// isScalingEvent: a ReplicaSet was scaled for another deployment size
// than the current one.
func (c *controller) isScalingEvent(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (bool, error) {
	newRS, oldRSs, err := c.replicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range activeReplicaSets(append(oldRSs, newRS)) {
		if desired, ok := annotatedInt(rs, desiredReplicasAnnotation); ok && desired != replicas(d.Spec.Replicas) {
			return true, nil
		}
	}
	return false, nil
}

// checkPausedCondition records pausing and resuming in the Progressing
// condition, so that the progress deadline does not run while paused.
func (c *controller) checkPausedCondition(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(&d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == reasonTimedOut {
		return nil
	}
	pausedCond := cond != nil && cond.Reason == reasonPaused
	switch {
	case d.Spec.Paused && !pausedCond:
		setCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonPaused, "Deployment is paused"))
	case !d.Spec.Paused && pausedCond:
		setCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonResumed, "Deployment is resumed"))
	default:
		return nil
	}
	_, err := c.updateStatus(ctx, d)
	return err
}

// replicaSetsAndSyncRevision splits the Deployment's ReplicaSets into the
// new one (of the current template; created when asked and missing) and
// the old ones, and brings the revision annotations up to date.
func (c *controller) replicaSetsAndSyncRevision(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rsList)
	var oldRSs []*appsv1.ReplicaSet
	for _, rs := range rsList {
		if existing == nil || rs.UID != existing.UID {
			oldRSs = append(oldRSs, rs)
		}
	}
	newRS, err := c.newReplicaSet(ctx, d, existing, oldRSs, create)
	if err != nil {
		return nil, nil, err
	}
	if existing != nil && newRS != existing {
		// Later steps of this sync start from the written version, or
		// their writes would conflict with this one.
		for i := range rsList {
			if rsList[i] == existing {
				rsList[i] = newRS
			}
		}
	}
	return newRS, oldRSs, nil
}

// findNewReplicaSet is the oldest ReplicaSet running the Deployment's
// template; there is normally one, but two may share a template if the
// hash label was tampered with.
func findNewReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := append([]*appsv1.ReplicaSet(nil), rsList...)
	sortOlderFirst(sorted)
	for _, rs := range sorted {
		if equalIgnoringHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// updateStatus writes d's status, and its revision annotation with it:
// as upstream, /status of a Deployment keeps annotations.
func (c *controller) updateStatus(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	updated, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	// Later writes of the same sync build on this one.
	d.ResourceVersion = updated.ResourceVersion
	return updated, nil
}

// setDeploymentRevision reports whether the annotation changed.
func setDeploymentRevision(d *appsv1.Deployment, revision string) bool {
	if d.Annotations[revisionAnnotation] == revision {
		return false
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[revisionAnnotation] = revision
	return true
}

func (c *controller) syncDeploymentStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	st := calculateStatus(allRSs, newRS, d)
	if reflect.DeepEqual(d.Status, st) {
		return nil
	}
	d.Status = st
	_, err := c.updateStatus(ctx, d)
	return err
}

// cleanup deletes the oldest ReplicaSets beyond revisionHistoryLimit, of
// those fully scaled down; they are only kept for rollbacks.
func (c *controller) cleanup(ctx context.Context, d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet) error {
	if d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var cleanable []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	diff := len(cleanable) - int(*d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return nil
	}
	sortByRevision(cleanable)
	for _, rs := range cleanable[:diff] {
		// Still running pods, or not yet caught up with a scale-down.
		if rs.Status.Replicas != 0 || replicas(rs.Spec.Replicas) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete old replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
		}
	}
	return nil
}
