package replicaset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// sync brings one ReplicaSet's pods to its spec and records the outcome in
// its status.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	rs, err := c.kind.get(ns, name)
	if apierrors.IsNotFound(err) {
		c.exp.forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s %s: %w", c.kind.noun(), key, err)
	}
	// Read before the pods are listed: an expectation met after the list
	// must not make an outdated list look current.
	needsSync := c.exp.satisfied(key)
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil || rs.Spec.Selector == nil || sel.Empty() {
		// Validation refuses such selectors; nothing can be done with one,
		// and an empty one would claim every pod of the namespace.
		c.log.Warn("invalid selector", c.kind.noun(), key, "err", err)
		return nil
	}
	all, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var active []*corev1.Pod
	terminating := int32(0)
	for _, p := range all {
		if podActive(p) {
			active = append(active, p)
		} else if podTerminating(p) && controlledBy(p, rs) {
			terminating++
		}
	}
	claimed, claimErr := c.claimPods(ctx, rs, sel, active)
	if claimErr != nil {
		return claimErr
	}
	var manageErr error
	if needsSync && rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, rs, claimed)
	}
	status := calculateStatus(rs, claimed, terminating, manageErr, time.Now())
	if !c.kind.countsTerminating() {
		status.TerminatingReplicas = nil
	}
	updated, err := c.updateStatus(ctx, rs, status)
	if apierrors.IsNotFound(err) {
		// Deleted since the cache showed it: nothing is left to report
		// on or to retry for, and its deletion event forgets the rest.
		return nil
	}
	if err != nil {
		return errors.Join(manageErr, err)
	}
	if manageErr == nil && updated.Spec.MinReadySeconds > 0 && updated.Status.ReadyReplicas == replicasOf(updated) &&
		updated.Status.AvailableReplicas != replicasOf(updated) {
		// Ready pods become available on their own as time passes.
		c.queue.EnqueueAfter(updated, time.Duration(updated.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

func controlledBy(p *corev1.Pod, rs *appsv1.ReplicaSet) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.UID == rs.UID
}

func replicasOf(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// manageReplicas creates or deletes pods to close the gap between the
// claimed pods and spec.replicas, at most the burst size at a time.
func (c *controller) manageReplicas(ctx context.Context, rs *appsv1.ReplicaSet, pods []*corev1.Pod) error {
	key, _ := cache.MetaNamespaceKeyFunc(rs)
	diff := len(pods) - int(replicasOf(rs))
	switch {
	case diff < 0:
		n := min(-diff, c.burst)
		// Expected before the first create: the informer may show the pod
		// before Create even returns.
		c.exp.expectCreations(key, n)
		created, err := slowStartBatch(n, 1, func() error {
			err := c.createPod(ctx, rs)
			if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				// The namespace is going; no pod will ever show up.
				c.exp.creationObserved(key)
				return nil
			}
			return err
		})
		// Creations never attempted or failed will not be observed.
		for range n - created {
			c.exp.creationObserved(key)
		}
		return err
	case diff > 0:
		n := min(diff, c.burst)
		victims := podsToDelete(pods, c.relatedPods(rs), n, time.Now())
		keys := make([]string, len(victims))
		for i, p := range victims {
			keys[i] = podKey(p)
		}
		c.exp.expectDeletions(key, keys)
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for _, p := range victims {
			wg.Go(func() {
				if err := c.deletePodOf(ctx, rs, p); err != nil {
					c.exp.deletionObserved(key, podKey(p))
					if !apierrors.IsNotFound(err) {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return errs[0]
		}
	}
	return nil
}

// relatedPods are the pods of the ReplicaSet's family: of all the
// ReplicaSets with the same controller (a Deployment's old and new ones),
// or its own when it has none. Scale-down spreads the family over nodes.
func (c *controller) relatedPods(rs *appsv1.ReplicaSet) []*corev1.Pod {
	family := []*appsv1.ReplicaSet{rs}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		family = nil
		all, _ := c.kind.list(rs.Namespace)
		for _, other := range all {
			if o := metav1.GetControllerOfNoCopy(other); o != nil && o.UID == ref.UID {
				family = append(family, other)
			}
		}
	}
	seen := map[string]bool{}
	var out []*corev1.Pod
	for _, member := range family {
		sel, err := metav1.LabelSelectorAsSelector(member.Spec.Selector)
		if err != nil {
			continue
		}
		pods, _ := c.pods.Pods(rs.Namespace).List(sel)
		for _, p := range pods {
			if !seen[string(p.UID)] {
				seen[string(p.UID)] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// calculateStatus is the status the claimed pods give, with a
// ReplicaFailure condition while creating or deleting pods fails.
func calculateStatus(rs *appsv1.ReplicaSet, pods []*corev1.Pod, terminating int32, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	st := *rs.Status.DeepCopy()
	tmpl := labels.SelectorFromSet(rs.Spec.Template.Labels)
	var labelled, ready, available int32
	for _, p := range pods {
		if tmpl.Matches(labels.Set(p.Labels)) {
			labelled++
		}
		if podReady(p) {
			ready++
			if podAvailable(p, rs.Spec.MinReadySeconds, now) {
				available++
			}
		}
	}
	failure := condition(st.Conditions, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && failure == nil:
		reason := ""
		if diff := len(pods) - int(replicasOf(rs)); diff < 0 {
			reason = "FailedCreate"
		} else if diff > 0 {
			reason = "FailedDelete"
		}
		st.Conditions = append(st.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: manageErr.Error(),
		})
	case manageErr == nil && failure != nil:
		st.Conditions = withoutCondition(st.Conditions, appsv1.ReplicaSetReplicaFailure)
	}
	st.Replicas = int32(len(pods))
	st.FullyLabeledReplicas = labelled
	st.ReadyReplicas = ready
	st.AvailableReplicas = available
	st.TerminatingReplicas = &terminating
	return st
}

func condition(conds []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) *appsv1.ReplicaSetCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func withoutCondition(conds []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) []appsv1.ReplicaSetCondition {
	var out []appsv1.ReplicaSetCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// updateStatus writes the status when it changed, with observedGeneration,
// retrying once on a conflict against a fresh copy.
func (c *controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, st appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	st.ObservedGeneration = rs.Generation
	if reflect.DeepEqual(rs.Status, st) {
		return rs, nil
	}
	cur := rs.DeepCopy()
	for attempt := 0; ; attempt++ {
		cur.Status = st
		updated, err := c.kind.updateStatus(ctx, cur)
		if err == nil {
			return updated, nil
		}
		if attempt >= 1 || !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("update status of %s %s/%s: %w", c.kind.noun(), rs.Namespace, rs.Name, err)
		}
		if cur, err = c.kind.fetch(ctx, rs.Namespace, rs.Name); err != nil {
			return nil, fmt.Errorf("get %s %s/%s: %w", c.kind.noun(), rs.Namespace, rs.Name, err)
		}
		// Generation may have moved on; the status still describes what
		// this sync saw, so it claims only the generation it read.
	}
}
