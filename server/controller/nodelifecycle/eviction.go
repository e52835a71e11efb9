package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"skiff/server/podcondition"
)

// tolerates is upstream's toleration match for the operators our API
// accepts (Equal, Exists); any other never matches.
func tolerates(tol corev1.Toleration, taint corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != taint.Key {
		return false
	}
	switch tol.Operator {
	case "", corev1.TolerationOpEqual:
		return tol.Value == taint.Value
	case corev1.TolerationOpExists:
		return true
	}
	return false
}

// evictionDeadline says when a pod must leave a node with these taints:
// at once (the zero time) if it does not tolerate one of the NoExecute
// ones, else when the first toleration window runs out, each window being
// counted from when its taint appeared (since). evict is false when every
// NoExecute taint is tolerated for ever. As upstream, a taint is judged by
// the first toleration matching it.
func evictionDeadline(taints []corev1.Taint, tolerations []corev1.Toleration, since func(corev1.Taint) time.Time) (at time.Time, evict bool) {
	for _, taint := range taints {
		if taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		var match *corev1.Toleration
		for i := range tolerations {
			if tolerates(tolerations[i], taint) {
				match = &tolerations[i]
				break
			}
		}
		if match == nil {
			return time.Time{}, true
		}
		if match.TolerationSeconds == nil {
			continue
		}
		var deadline time.Time
		if s := *match.TolerationSeconds; s > 0 {
			deadline = since(taint).Add(time.Duration(s) * time.Second)
		}
		if !evict || deadline.Before(at) {
			at, evict = deadline, true
		}
	}
	return at, evict
}

// noteTaints remembers when each NoExecute taint without timeAdded was
// first seen on the node, the only start its tolerationSeconds can have.
func (c *controller) noteTaints(node string, taints []corev1.Taint) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.taintSeen[node]
	seen := map[corev1.Taint]time.Time{}
	for _, t := range taints {
		if t.TimeAdded != nil {
			continue
		}
		if at, ok := old[t]; ok {
			seen[t] = at
		} else {
			seen[t] = now
		}
	}
	if len(seen) == 0 {
		delete(c.taintSeen, node)
		return
	}
	c.taintSeen[node] = seen
}

func (c *controller) taintStart(node string, t corev1.Taint) time.Time {
	if t.TimeAdded != nil {
		return t.TimeAdded.Time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.taintSeen[node][t]; ok {
		return at
	}
	// The lister can show a node before its handler has run.
	now := c.clock.Now()
	if c.taintSeen[node] == nil {
		c.taintSeen[node] = map[corev1.Taint]time.Time{}
	}
	c.taintSeen[node][t] = now
	return now
}

// judgePod deletes a pod whose node's NoExecute taints it does not (or no
// longer) tolerate, or comes back to it when its toleration runs out.
func (c *controller) judgePod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.unschedule(key, nil)
		c.mu.Lock()
		delete(c.evicted, key)
		c.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s: %w", key, err)
	}
	c.mu.Lock()
	gone := c.evicted[key] == pod.UID
	c.mu.Unlock()
	if gone || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		c.unschedule(key, nil)
		return nil
	}
	node, err := c.nodes.Get(pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		// Pods of a deleted node are the pod garbage collector's.
		c.unschedule(key, pod)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
	}
	taints := noExecuteTaints(node.Spec.Taints)
	at, evict := evictionDeadline(taints, pod.Spec.Tolerations, func(t corev1.Taint) time.Time { return c.taintStart(node.Name, t) })
	if !evict {
		c.unschedule(key, pod)
		return nil
	}
	if now := c.clock.Now(); at.After(now) {
		c.mu.Lock()
		prev, had := c.scheduled[key]
		c.scheduled[key] = at
		c.mu.Unlock()
		if !had || !prev.Equal(at) {
			c.log.Info("pod tolerates its node's NoExecute taints for a while; eviction scheduled", "pod", key, "node", node.Name, "at", at)
		}
		c.evictQ.AddAfter(key, at.Sub(now))
		return nil
	}
	return c.evict(ctx, key, pod, node.Name)
}

// unschedule calls off a pending eviction, telling the pod when it had one.
func (c *controller) unschedule(key string, pod *corev1.Pod) {
	c.mu.Lock()
	_, had := c.scheduled[key]
	delete(c.scheduled, key)
	c.mu.Unlock()
	if had && pod != nil {
		c.log.Info("pod eviction cancelled", "pod", key)
		c.rec.Eventf(pod, corev1.EventTypeNormal, "TaintManagerEviction", "Cancelling deletion of Pod %s", key)
	}
}

func (c *controller) evict(ctx context.Context, key string, pod *corev1.Pod, node string) error {
	c.log.Info("evicting pod from tainted node", "pod", key, "node", node)
	c.rec.Eventf(pod, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s", key)
	if err := c.markDisruptionTarget(ctx, pod); err != nil {
		if apierrors.IsNotFound(err) {
			c.unschedule(key, nil)
			return nil
		}
		return fmt.Errorf("mark pod %s as disruption target: %w", key, err)
	}
	// The UID precondition spares a pod recreated under the same name.
	uid := pod.UID
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", key, err)
	}
	c.unschedule(key, nil)
	c.mu.Lock()
	c.evicted[key] = uid
	c.mu.Unlock()
	return nil
}

// markDisruptionTarget tells the pod's owners (Jobs with pod failure
// policies, disruption budgets) why it is going, as upstream does.
func (c *controller) markDisruptionTarget(ctx context.Context, pod *corev1.Pod) error {
	fresh := false
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if fresh {
			p, err := c.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.UID != pod.UID {
				return apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
			}
			pod = p
		}
		fresh = true
		updated := pod.DeepCopy()
		if !setDisruptionTarget(&updated.Status, metav1.NewTime(c.clock.Now())) {
			return nil
		}
		_, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		return err
	})
}

func setDisruptionTarget(status *corev1.PodStatus, now metav1.Time) bool {
	return podcondition.Set(status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint"}, now)
}

// markPodNotReady sets the pod's Ready condition False, so that endpoints
// drop it, and reports whether it changed.
func markPodNotReady(status *corev1.PodStatus, now metav1.Time) bool {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type != corev1.PodReady {
			continue
		}
		if c.Status == corev1.ConditionFalse {
			return false
		}
		c.Status = corev1.ConditionFalse
		c.LastTransitionTime = now
		return true
	}
	return false
}

func (c *controller) markPodsNotReady(ctx context.Context, node string) error {
	var errs []error
	for _, pod := range c.podsOn(node) {
		if pod.Spec.NodeName != node {
			continue
		}
		updated := pod.DeepCopy()
		if !markPodNotReady(&updated.Status, metav1.NewTime(c.clock.Now())) {
			continue
		}
		_, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
			continue
		}
		c.rec.Event(pod, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
	}
	return errors.Join(errs...)
}
