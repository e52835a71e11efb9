package resourcequota

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"skiff/server/controller/worker"
	"skiff/server/quota"
)

// graceMargin is added to a deleting pod's grace period before its quota
// is measured again, so the measurement falls after the end, not at it.
const graceMargin = time.Second

func (c *controller) addQuota(obj any) {
	q, ok := obj.(*corev1.ResourceQuota)
	if !ok {
		return
	}
	if statusStale(q) {
		c.fast.Enqueue(q)
		return
	}
	c.slow.Enqueue(q)
}

// updateQuota acts on spec changes and on a status that no longer matches
// the spec (written by hand, or a quota new to status). Status-only
// changes are otherwise ignored: they are mostly the controller's own and
// the admission check's writes, and each recalculation lists the whole
// namespace.
func (c *controller) updateQuota(oldObj, curObj any) {
	old, ok1 := oldObj.(*corev1.ResourceQuota)
	cur, ok2 := curObj.(*corev1.ResourceQuota)
	if !ok1 || !ok2 {
		return
	}
	if quota.Equals(old.Spec.Hard, cur.Spec.Hard) && !statusStale(cur) {
		return
	}
	c.fast.Enqueue(cur)
}

// deleteQuota gives back the quota's own count in the other quotas of
// its namespace.
func (c *controller) deleteQuota(obj any) {
	if q, ok := worker.Unwrap[*corev1.ResourceQuota](obj); ok {
		c.replenish(quotasGR, q.Namespace)
	}
}

// statusStale: status.hard is not spec.hard, or a limited resource has no
// usage yet, which makes the admission check refuse what it would count.
// Upstream prioritizes these quotas the same way.
func statusStale(q *corev1.ResourceQuota) bool {
	if !quota.Equals(q.Spec.Hard, q.Status.Hard) {
		return true
	}
	for name := range q.Status.Hard {
		if _, ok := q.Status.Used[name]; !ok {
			return true
		}
	}
	return false
}

// replenishing recalculates the quotas of a namespace when one of its
// objects of gr is deleted or changes as changed says.
func (c *controller) replenishing(gr schema.GroupResource, changed func(old, cur runtime.Object) bool) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, curObj any) {
			old, ok1 := oldObj.(runtime.Object)
			cur, ok2 := curObj.(runtime.Object)
			m, ok3 := curObj.(metav1.Object)
			if ok1 && ok2 && ok3 && changed(old, cur) {
				c.replenish(gr, m.GetNamespace())
			}
		},
		DeleteFunc: func(obj any) {
			if m, ok := worker.Unwrap[metav1.Object](obj); ok {
				c.replenish(gr, m.GetNamespace())
			}
		},
	}
}

// usageChanged: what the object uses changed (a service's type, a claim's
// request). Increases are recalculated too; admission charged them
// already, so the measurement agrees.
func (c *controller) usageChanged(gr schema.GroupResource) func(old, cur runtime.Object) bool {
	return func(old, cur runtime.Object) bool {
		a, err1 := c.registry.Usage(gr, old)
		b, err2 := c.registry.Usage(gr, cur)
		return err1 == nil && err2 == nil && !quota.Equals(a, b)
	}
}

// podChanged: the pod's usage changed (it finished, or was resized), or it
// moved between the Terminating and NotTerminating scopes. A pod being
// deleted stops counting when its grace period ends, with no event then:
// its quotas are measured again at that time.
func (c *controller) podChanged(oldObj, curObj runtime.Object) bool {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := curObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return false
	}
	if old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil && cur.DeletionGracePeriodSeconds != nil {
		end := cur.DeletionTimestamp.Add(time.Duration(*cur.DeletionGracePeriodSeconds) * time.Second)
		c.replenishAfter(podsGR, cur.Namespace, end.Sub(c.now())+graceMargin)
	}
	if terminating(old) != terminating(cur) {
		return true
	}
	return c.usageChanged(podsGR)(old, cur)
}

func terminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// replenish recalculates, soon, the quotas of namespace that limit
// something of gr.
func (c *controller) replenish(gr schema.GroupResource, namespace string) {
	c.replenishAfter(gr, namespace, 0)
}

func (c *controller) replenishAfter(gr schema.GroupResource, namespace string, d time.Duration) {
	quotas, err := c.quotas.ResourceQuotas(namespace).List(labels.Everything())
	if err != nil {
		return
	}
	c.enqueueLimiting(gr, quotas, d)
}

// replenishEverywhere recalculates the quotas of every namespace that
// limit something of gr.
func (c *controller) replenishEverywhere(gr schema.GroupResource) {
	quotas, err := c.quotas.List(labels.Everything())
	if err != nil {
		return
	}
	c.enqueueLimiting(gr, quotas, 0)
}

func (c *controller) enqueueLimiting(gr schema.GroupResource, quotas []*corev1.ResourceQuota, d time.Duration) {
	ev := c.registry.For(gr)
	for _, q := range quotas {
		// spec too: a quota whose status is not written yet is about to
		// be measured, but its new limits may already cover gr.
		names := append(quota.Names(q.Status.Hard), quota.Names(q.Spec.Hard)...)
		if len(ev.MatchingResources(names)) == 0 {
			continue
		}
		if d > 0 {
			c.fast.EnqueueAfter(q, d)
		} else {
			c.fast.Enqueue(q)
		}
	}
}
