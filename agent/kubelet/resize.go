package kubelet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// In-place pod resize, as upstream's kubelet does it: a change of the
// containers' resources (through pods/resize) is first allocated, when the
// node has room (else the pod gets PodResizePending, Infeasible or
// Deferred), then actuated: the running containers' cgroups are updated in
// place, or the container is restarted when its resizePolicy says so.
// Status reports the allocation (allocatedResources) and what the cgroups
// hold (resources); PodResizeInProgress stays while they differ.

// resizeState is one pod's allocation and actuation.
type resizeState struct {
	// alloc is the allocated resources by container name (nil until the
	// worker's first sync).
	alloc map[string]corev1.ResourceRequirements
	// applied is what each container (by ID) runs with.
	applied map[string]corev1.ResourceRequirements
	// startedWith is the allocation a container being created got, until
	// its record is seen.
	startedWith map[string]corev1.ResourceRequirements
	pending     *corev1.PodCondition // PodResizePending
	actuateErr  string               // last actuation failure
}

// resizable are the containers whose resources can change in place:
// regular and init containers (upstream's InPlacePodVerticalScaling).
func resizable(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// initAllocation starts from what the containers run with: the resources
// a previous agent reported for them (a restart in the middle of a resize
// actuates it again), else the spec.
func (w *podWorker) initAllocation(pod *corev1.Pod) {
	if w.resize.alloc != nil {
		return
	}
	reported := map[string]*corev1.ResourceRequirements{}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Resources != nil {
				reported[list[i].Name] = list[i].Resources
			}
		}
	}
	alloc := map[string]corev1.ResourceRequirements{}
	for _, c := range resizable(pod) {
		alloc[c.Name] = *c.Resources.DeepCopy()
		if r, ok := reported[c.Name]; ok && len(w.ctrs[c.Name]) > 0 {
			alloc[c.Name] = *r.DeepCopy()
		}
	}
	w.setField(func() {
		w.resize.alloc = alloc
		w.resize.applied = map[string]corev1.ResourceRequirements{}
		w.resize.startedWith = map[string]corev1.ResourceRequirements{}
	})
}

// syncResize allocates a changed spec when it fits and brings the running
// containers to the allocation.
func (w *podWorker) syncResize(ctx context.Context, pod *corev1.Pod) {
	w.initAllocation(pod)
	want := map[string]corev1.ResourceRequirements{}
	for _, c := range resizable(pod) {
		want[c.Name] = c.Resources
	}
	if !equality.Semantic.DeepEqual(want, w.resize.alloc) {
		if cond := w.k.resizeFit(ctx, w, pod, want); cond != nil {
			w.setField(func() { w.resize.pending = cond })
		} else {
			alloc := map[string]corev1.ResourceRequirements{}
			for name, r := range want {
				alloc[name] = *r.DeepCopy()
			}
			w.setField(func() { w.resize.alloc, w.resize.pending = alloc, nil })
		}
	} else if w.resize.pending != nil {
		w.setField(func() { w.resize.pending = nil })
	}
	w.actuate(ctx, pod)
}

// actuate updates every running container whose cgroups differ from its
// allocation.
func (w *podWorker) actuate(ctx context.Context, pod *corev1.Pod) {
	live := map[string]bool{}
	failed := ""
	for _, c := range resizable(pod) {
		r := w.last(c.Name)
		if r == nil {
			continue
		}
		live[r.id] = true
		alloc := w.resize.alloc[c.Name]
		applied, known := w.resize.applied[r.id]
		if !known {
			applied = alloc
			if s, ok := w.resize.startedWith[c.Name]; ok {
				applied = s
			}
			w.setField(func() { w.resize.applied[r.id] = applied; delete(w.resize.startedWith, c.Name) })
		}
		if !r.running() || equality.Semantic.DeepEqual(applied, alloc) {
			continue
		}
		next := c.DeepCopy()
		next.Resources = *alloc.DeepCopy()
		if needsRestart(c, applied, alloc) {
			w.restartForResize(ctx, pod, next, r)
			continue
		}
		if err := w.k.cfg.Runtime.UpdateResources(ctx, r.id, w.k.cfg.QoS.ContainerResources(pod, next)); err != nil {
			failed = fmt.Sprintf("failed to resize container %s: %v", c.Name, err)
			w.k.log.Warn("resize container", "pod", podKey(pod), "container", c.Name, "err", err)
			continue
		}
		w.setField(func() { w.resize.applied[r.id] = *alloc.DeepCopy() })
	}
	w.setField(func() {
		for id := range w.resize.applied {
			if !live[id] {
				delete(w.resize.applied, id)
			}
		}
		w.resize.actuateErr = failed
	})
	if failed != "" {
		w.wakeIn(w.k.cfg.ResyncInterval)
	}
}

// needsRestart: a changed resource whose resizePolicy is RestartContainer.
func needsRestart(c *corev1.Container, from, to corev1.ResourceRequirements) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy != corev1.RestartContainer {
			continue
		}
		if !quantityEqual(from.Requests, to.Requests, p.ResourceName) || !quantityEqual(from.Limits, to.Limits, p.ResourceName) {
			return true
		}
	}
	return false
}

func quantityEqual(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, oka := a[name]
	qb, okb := b[name]
	return oka == okb && qa.Cmp(qb) == 0
}

// restartForResize stops the container and starts its next attempt with
// the allocation, whatever the pod's restartPolicy (upstream restarts for
// a resize as it does for a changed spec).
func (w *podWorker) restartForResize(ctx context.Context, pod *corev1.Pod, c *corev1.Container, r *ctrRecord) {
	w.k.event(pod, corev1.EventTypeNormal, "Killing", "Container %s resize requires restart", c.Name)
	w.stopProbes(r.id)
	if err := w.k.cfg.Runtime.Stop(ctx, r.id, podGrace(pod)); err != nil {
		w.k.log.Warn("stop container for resize", "pod", podKey(pod), "container", c.Name, "err", err)
		return
	}
	w.refreshOne(ctx, r)
	w.startContainer(ctx, pod, c)
}

// allocatedContainer is c with its allocated resources (what a new attempt
// starts with while a resize is pending).
func (w *podWorker) allocatedContainer(c *corev1.Container) *corev1.Container {
	w.mu.Lock()
	defer w.mu.Unlock()
	alloc, ok := w.resize.alloc[c.Name]
	if !ok {
		return c
	}
	if w.resize.startedWith != nil {
		w.resize.startedWith[c.Name] = *alloc.DeepCopy()
	}
	out := c.DeepCopy()
	out.Resources = *alloc.DeepCopy()
	return out
}

// resizeFit decides whether want can be allocated: Infeasible when the
// pod's requests exceed what the node can ever give, Deferred when the
// other pods' allocations leave no room now. nil means it fits.
func (k *Kubelet) resizeFit(ctx context.Context, self *podWorker, pod *corev1.Pod, want map[string]corev1.ResourceRequirements) *corev1.PodCondition {
	node, err := k.cfg.Client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred,
			Message: fmt.Sprintf("node status unknown: %v", err)}
	}
	mine := podRequests(pod, want)
	used := corev1.ResourceList{}
	for _, w := range k.allWorkers() {
		if w == self {
			continue
		}
		w.mu.Lock()
		p, alloc := w.pod, w.resize.alloc
		done := w.terminal || w.removed
		w.mu.Unlock()
		if done || p == nil {
			continue
		}
		if alloc == nil {
			alloc = map[string]corev1.ResourceRequirements{}
			for _, c := range resizable(p) {
				alloc[c.Name] = c.Resources
			}
		}
		addList(used, podRequests(p, alloc))
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		capacity, ok := node.Status.Allocatable[name]
		if !ok {
			continue
		}
		req, u := mine[name], used[name]
		value := func(q resource.Quantity) int64 {
			if name == corev1.ResourceCPU {
				return q.MilliValue()
			}
			return q.Value()
		}
		if value(req) > value(capacity) {
			return &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible,
				Message: fmt.Sprintf("Node didn't have enough capacity: %s, requested: %d, capacity: %d", name, value(req), value(capacity))}
		}
		if value(req)+value(u) > value(capacity) {
			return &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred,
				Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, value(req), value(u), value(capacity))}
		}
	}
	return nil
}

// podRequests is upstream's effective pod request: the larger of the app
// containers (with sidecars) together and any init container in turn,
// plus the overhead.
func podRequests(pod *corev1.Pod, res map[string]corev1.ResourceRequirements) corev1.ResourceList {
	apps := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		addList(apps, res[c.Name].Requests)
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if isSidecar(c) {
			addList(sidecars, res[c.Name].Requests)
			continue
		}
		step := sidecars.DeepCopy()
		addList(step, res[c.Name].Requests)
		for name, q := range step {
			if cur, ok := initMax[name]; !ok || q.Cmp(cur) > 0 {
				initMax[name] = q
			}
		}
	}
	addList(apps, sidecars)
	for name, q := range initMax {
		if cur, ok := apps[name]; !ok || q.Cmp(cur) > 0 {
			apps[name] = q
		}
	}
	addList(apps, pod.Spec.Overhead)
	return apps
}

func addList(dst, src corev1.ResourceList) {
	for name, q := range src {
		sum := q.DeepCopy()
		if cur, ok := dst[name]; ok {
			sum.Add(cur)
		}
		dst[name] = sum
	}
}

// resizeStatus fills each container's allocatedResources and resources
// (for those that exist, as upstream) and adds the resize conditions.
func (w *podWorker) resizeStatus(pod *corev1.Pod, st *corev1.PodStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resize.alloc == nil {
		return
	}
	inProgress := false
	fill := func(list []corev1.ContainerStatus) {
		for i := range list {
			cs := &list[i]
			alloc, ok := w.resize.alloc[cs.Name]
			rs := w.ctrs[cs.Name]
			if !ok || len(rs) == 0 {
				continue
			}
			r := rs[len(rs)-1]
			cs.AllocatedResources = alloc.Requests.DeepCopy()
			actual := alloc
			if applied, known := w.resize.applied[r.id]; known && r.running() {
				actual = applied
				if !equality.Semantic.DeepEqual(applied, alloc) {
					inProgress = true
				}
			}
			cs.Resources = actual.DeepCopy()
		}
	}
	fill(st.InitContainerStatuses)
	fill(st.ContainerStatuses)
	if w.resize.pending != nil {
		c := *w.resize.pending
		c.ObservedGeneration = pod.Generation
		st.Conditions = append(st.Conditions, c)
	}
	if inProgress || w.resize.actuateErr != "" {
		c := corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, ObservedGeneration: pod.Generation}
		if w.resize.actuateErr != "" {
			c.Reason, c.Message = corev1.PodReasonError, w.resize.actuateErr
		}
		st.Conditions = append(st.Conditions, c)
	}
}
