package daemonset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Event reasons, as upstream's daemon set controller and pod control.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedCreate     = "FailedCreate"
	reasonFailedDelete     = "FailedDelete"
	reasonFailedDaemonPod  = "FailedDaemonPod"
)

// sync brings one daemon set's pods, history and status in line with it.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	ds, err := c.sets.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	// Once deleted, the set's history may already be gone (the garbage
	// collector takes history and pods in any order), so its status could
	// not be worked out right: leave it be.
	if ds.DeletionTimestamp != nil {
		return nil
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	cur, old, err := c.constructHistory(ctx, ds)
	if err != nil {
		return fmt.Errorf("construct history: %w", err)
	}
	hash := cur.Labels[hashLabel]
	if !c.expectations.satisfied(key) {
		// The cache is behind our own creates and deletes: only report.
		return c.updateStatus(ctx, ds, nodes, hash, false)
	}
	err = c.manage(ctx, key, ds, nodes, hash)
	if err == nil && c.expectations.satisfied(key) {
		if ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
			err = c.rollingUpdate(ctx, key, ds, nodes, hash)
		}
		if err == nil {
			err = c.cleanupHistory(ctx, ds, old)
		}
	}
	return errors.Join(err, c.updateStatus(ctx, ds, nodes, hash, true))
}

// manage creates pods on nodes that lack one and deletes pods on nodes that
// must not run one, failed pods (with back-off) and surplus pods.
func (c *controller) manage(ctx context.Context, key string, ds *appsv1.DaemonSet, nodes []*corev1.Node, hash string) error {
	byNode, err := c.nodesToPods(ctx, ds, false)
	if err != nil {
		return err
	}
	now := time.Now()
	var create []string
	var remove []*corev1.Pod
	for _, node := range nodes {
		p := planNode(ds, node, byNode[node.Name], hash, now)
		if p.create {
			create = append(create, node.Name)
		}
		remove = append(remove, p.delete...)
		for _, pod := range p.failed {
			if c.allowFailedPodDeletion(ds, node.Name, now) {
				c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedDaemonPod, "Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node.Name)
				remove = append(remove, pod)
			}
		}
	}
	// A pod that waits for a node that was deleted can never be scheduled,
	// and the pod garbage collector only removes bound pods.
	exists := map[string]bool{}
	for _, n := range nodes {
		exists[n.Name] = true
	}
	for node, pods := range byNode {
		if exists[node] {
			continue
		}
		for _, pod := range pods {
			if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
				remove = append(remove, pod)
			}
		}
	}
	return c.syncNodes(ctx, key, ds, remove, create, hash)
}

// allowFailedPodDeletion rate-limits replacing failed pods per node: a
// kubelet that keeps rejecting the pod would otherwise be fought in a hot
// loop. A denied deletion is retried once the back-off passes.
func (c *controller) allowFailedPodDeletion(ds *appsv1.DaemonSet, node string, now time.Time) bool {
	id := string(ds.UID) + "/" + node
	if c.backoff.IsInBackOffSinceUpdate(id, now) {
		c.queue.EnqueueAfter(ds, c.backoff.Get(id))
		return false
	}
	c.backoff.Next(id, now)
	return true
}

// rollingUpdate takes one step of replacing pods of older revisions.
func (c *controller) rollingUpdate(ctx context.Context, key string, ds *appsv1.DaemonSet, nodes []*corev1.Node, hash string) error {
	byNode, err := c.nodesToPods(ctx, ds, false)
	if err != nil {
		return err
	}
	desired := 0
	nodeByName := map[string]*corev1.Node{}
	for _, node := range nodes {
		nodeByName[node.Name] = node
		if run, _ := nodeShouldRunDaemonPod(node, ds); run {
			desired++
			if _, ok := byNode[node.Name]; !ok {
				byNode[node.Name] = nil
			}
		}
	}
	surge, unavail, err := rolloutLimits(ds, desired)
	if err != nil {
		return fmt.Errorf("daemon set %s: %w", key, err)
	}
	shouldRun := func(name string) bool {
		n, ok := nodeByName[name]
		if !ok {
			return false
		}
		run, _ := nodeShouldRunDaemonPod(n, ds)
		return run
	}
	names, createOn := planRollingUpdate(rollout{ds: ds, hash: hash, now: time.Now(), nodes: byNode, shouldRun: shouldRun, desired: desired, surge: surge, unavail: unavail})
	byName := map[string]*corev1.Pod{}
	for _, pods := range byNode {
		for _, p := range pods {
			byName[p.Name] = p
		}
	}
	var remove []*corev1.Pod
	for _, n := range names {
		remove = append(remove, byName[n])
	}
	return c.syncNodes(ctx, key, ds, remove, createOn, hash)
}

// syncNodes deletes pods and creates pods for nodes, at most Burst of each.
// Creations go in batches that double while they succeed ("slow start"), so
// a quota or admission error costs one failed request, not hundreds.
func (c *controller) syncNodes(ctx context.Context, key string, ds *appsv1.DaemonSet, remove []*corev1.Pod, create []string, hash string) error {
	create = create[:min(len(create), c.burst)]
	remove = remove[:min(len(remove), c.burst)]
	if len(create) == 0 && len(remove) == 0 {
		return nil
	}
	c.expectations.expect(key, len(create), len(remove))
	template := podTemplate(ds, hash)
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for pos, batch := 0, 1; pos < len(create); pos, batch = pos+batch, 2*batch {
		batch = min(batch, len(create)-pos)
		before := len(errs)
		var wg sync.WaitGroup
		for _, node := range create[pos : pos+batch] {
			wg.Go(func() {
				if err := c.createPod(ctx, ds, &template, node); err != nil {
					c.expectations.observe(key, 1, 0)
					fail(err)
				}
			})
		}
		wg.Wait()
		if skipped := len(create) - pos - batch; len(errs) > before && skipped > 0 {
			c.expectations.observe(key, skipped, 0)
			break
		}
	}
	var wg sync.WaitGroup
	for _, pod := range remove {
		wg.Go(func() {
			if err := c.deletePod(ctx, ds, pod); err != nil {
				c.expectations.observe(key, 0, 1)
				if !apierrors.IsNotFound(err) {
					fail(err)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *controller) createPod(ctx context.Context, ds *appsv1.DaemonSet, template *corev1.PodTemplateSpec, node string) error {
	pod, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, newDaemonPod(ds, template, node), metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// Every later create would fail the same way; the namespace
			// controller is emptying the namespace.
			return nil
		}
		c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		return fmt.Errorf("create daemon pod for node %s: %w", node, err)
	}
	c.log.Debug("created daemon pod", "daemonset", ds.Namespace+"/"+ds.Name, "pod", pod.Name, "node", node)
	c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", pod.Name)
	return nil
}

func (c *controller) deletePod(ctx context.Context, ds *appsv1.DaemonSet, pod *corev1.Pod) error {
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
		}
		return fmt.Errorf("delete daemon pod %s: %w", pod.Name, err)
	}
	c.log.Debug("deleted daemon pod", "daemonset", ds.Namespace+"/"+ds.Name, "pod", pod.Name)
	c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", pod.Name)
	return nil
}

// computeStatus counts, over the nodes the set should run on, those with a
// pod, a ready pod, an available pod and an up-to-date pod; and the nodes
// running a pod they should not.
func computeStatus(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, now time.Time) appsv1.DaemonSetStatus {
	var st appsv1.DaemonSetStatus
	for _, node := range nodes {
		run, _ := nodeShouldRunDaemonPod(node, ds)
		pods := byNode[node.Name]
		if !run {
			if len(pods) > 0 {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		pod := slices.MinFunc(pods, olderFirst)
		if podReady(pod) {
			st.NumberReady++
			if podAvailable(pod, ds.Spec.MinReadySeconds, now) {
				st.NumberAvailable++
			}
		}
		if podUpdated(ds, pod, hash) {
			st.UpdatedNumberScheduled++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	return st
}

// updateStatus writes the counts to the set's status when they changed.
func (c *controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, hash string, observed bool) error {
	byNode, err := c.nodesToPods(ctx, ds, false)
	if err != nil {
		return err
	}
	counts := computeStatus(ds, nodes, byNode, hash, time.Now())
	if ds.Spec.MinReadySeconds > 0 && counts.NumberReady != counts.NumberAvailable {
		// Nothing else happens when a ready pod becomes available.
		c.queue.EnqueueAfter(ds, time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	generation := ds.Status.ObservedGeneration
	if observed {
		generation = ds.Generation
	}
	want := withCounts(ds.Status, counts, generation)
	if equality.Semantic.DeepEqual(ds.Status, want) {
		return nil
	}
	client := c.client.AppsV1().DaemonSets(ds.Namespace)
	cur := ds.DeepCopy()
	for attempt := 0; ; attempt++ {
		cur.Status = withCounts(cur.Status, counts, generation)
		_, err := client.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 5 {
			return fmt.Errorf("update status of daemon set %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		// Someone else wrote the set (the collision count, a spec change):
		// keep their write and put the counts, of the generation they
		// were made for, on top.
		if cur, err = client.Get(ctx, ds.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get daemon set %s/%s: %w", ds.Namespace, ds.Name, err)
		}
	}
}

// withCounts is st with the counts (and observed generation) replaced,
// keeping what the controller does not count: collision count, conditions.
func withCounts(st, counts appsv1.DaemonSetStatus, generation int64) appsv1.DaemonSetStatus {
	out := *st.DeepCopy()
	out.DesiredNumberScheduled, out.CurrentNumberScheduled, out.NumberMisscheduled = counts.DesiredNumberScheduled, counts.CurrentNumberScheduled, counts.NumberMisscheduled
	out.NumberReady, out.NumberAvailable, out.NumberUnavailable = counts.NumberReady, counts.NumberAvailable, counts.NumberUnavailable
	out.UpdatedNumberScheduled = counts.UpdatedNumberScheduled
	out.ObservedGeneration = generation
	return out
}
