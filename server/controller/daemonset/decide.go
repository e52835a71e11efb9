package daemonset

import (
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// nodePlan is what one node needs for a daemon set.
type nodePlan struct {
	run    bool          // the set should run on the node
	stay   bool          // pods there may keep running
	create bool          // a pod must be created for the node
	delete []*corev1.Pod // pods to delete now
	failed []*corev1.Pod // failed pods to delete, subject to back-off

	ds   *appsv1.DaemonSet
	hash string
}

// planNode decides what node needs, given the set's pods for it. With a
// surge allowed a node may hold one old and one new pod during a rolling
// update; otherwise the oldest pod is kept and any others deleted.
func planNode(ds *appsv1.DaemonSet, node *corev1.Node, pods []*corev1.Pod, hash string, now time.Time) nodePlan {
	run, stay := nodeShouldRunDaemonPod(node, ds)
	p := nodePlan{run: run, stay: stay, hash: hash, ds: ds}
	switch {
	case run && len(pods) == 0:
		p.create = true
	case !stay:
		for _, pod := range pods {
			if pod.DeletionTimestamp == nil {
				p.delete = append(p.delete, pod)
			}
		}
	case stay:
		var live []*corev1.Pod
		for _, pod := range pods {
			switch {
			case pod.DeletionTimestamp != nil:
			case pod.Status.Phase == corev1.PodFailed:
				p.failed = append(p.failed, pod)
			case pod.Status.Phase == corev1.PodSucceeded:
				// A daemon is not meant to finish; it is started again.
				p.delete = append(p.delete, pod)
			default:
				live = append(live, pod)
			}
		}
		slices.SortFunc(live, olderFirst)
		p.planLive(live, now)
	}
	return p
}

func (p *nodePlan) planLive(live []*corev1.Pod, now time.Time) {
	if !allowsSurge(p.ds) {
		if len(live) > 1 {
			p.delete = append(p.delete, live[1:]...)
		}
		return
	}
	if len(live) <= 1 {
		// While surging, a node with only dead or dying pods gets a new one
		// at once rather than after they are gone.
		p.create = len(live) == 0 && p.run
		return
	}
	// Keep the oldest new pod and the oldest old one; the old one goes
	// once the new one is available, or at once if it is not ready itself.
	var oldestNew, oldestOld *corev1.Pod
	for _, pod := range live {
		switch {
		case podUpdated(p.ds, pod, p.hash) && oldestNew == nil:
			oldestNew = pod
		case !podUpdated(p.ds, pod, p.hash) && oldestOld == nil:
			oldestOld = pod
		default:
			p.delete = append(p.delete, pod)
		}
	}
	if oldestNew != nil && oldestOld != nil &&
		(!podReady(oldestOld) || podAvailable(oldestNew, p.ds.Spec.MinReadySeconds, now)) {
		p.delete = append(p.delete, oldestOld)
	}
}

func allowsSurge(ds *appsv1.DaemonSet) bool {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxSurge == nil {
		return false
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, 1, true)
	return err == nil && n > 0
}

// rolloutLimits are the surge and unavailability a rolling update may use
// over desired nodes; percentages round up, as upstream. A set allowing
// neither (which validation should prevent) is let have one unavailable
// node rather than never update.
func rolloutLimits(ds *appsv1.DaemonSet, desired int) (surge, unavailable int, err error) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru != nil && ru.MaxUnavailable != nil {
		if unavailable, err = intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, true); err != nil {
			return 0, 0, fmt.Errorf("maxUnavailable: %w", err)
		}
	}
	if ru != nil && ru.MaxSurge != nil {
		if surge, err = intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, desired, true); err != nil {
			return 0, 0, fmt.Errorf("maxSurge: %w", err)
		}
	}
	if desired > 0 && surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable, nil
}

// splitPods returns the one new and one old live pod on a node; ok is
// false when there are more, which the manage step must prune first.
func splitPods(ds *appsv1.DaemonSet, pods []*corev1.Pod, hash string) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if podUpdated(ds, pod, hash) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = pod
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = pod
		}
	}
	return newPod, oldPod, true
}

// rollout is the input of a rolling update step.
type rollout struct {
	ds             *appsv1.DaemonSet
	hash           string
	now            time.Time
	nodes          map[string][]*corev1.Pod // every desired node, and any node with pods
	shouldRun      func(node string) bool
	desired        int
	surge, unavail int
}

// planRollingUpdate picks the old pods to delete (and, when surging, the
// nodes to start a new pod on) for one step of a rolling update. Nodes go
// in name order so a rollout is predictable.
func planRollingUpdate(r rollout) (deletePods, createOn []string) {
	names := make([]string, 0, len(r.nodes))
	for n := range r.nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	available := func(p *corev1.Pod) bool { return podAvailable(p, r.ds.Spec.MinReadySeconds, r.now) }
	if r.surge == 0 {
		return planWithoutSurge(r, names, available), nil
	}
	return planWithSurge(r, names, available)
}

// planWithoutSurge deletes old pods while fewer than maxUnavailable nodes
// are without an available pod; the manage step then creates the new ones.
// Old pods that are not available anyway are replaced at once.
func planWithoutSurge(r rollout, names []string, available func(*corev1.Pod) bool) []string {
	unavailable := 0
	var replace, candidates []string
	for _, node := range names {
		newPod, oldPod, ok := splitPods(r.ds, r.nodes[node], r.hash)
		switch {
		case !ok, newPod == nil && oldPod == nil, newPod != nil && oldPod != nil:
			unavailable++
		case newPod != nil:
			if !available(newPod) {
				unavailable++
			}
		case !available(oldPod):
			replace = append(replace, oldPod.Name)
			unavailable++
		default:
			candidates = append(candidates, oldPod.Name)
		}
	}
	room := min(max(r.unavail-unavailable, 0), len(candidates))
	return append(replace, candidates[:room]...)
}

// planWithSurge starts new pods next to old ones, up to maxSurge at a time
// (at once where the old pod is unavailable), and deletes each old pod once
// its replacement is available. Pods on nodes the set left are only
// deleted while more pods are available than desired.
func planWithSurge(r rollout, names []string, available func(*corev1.Pod) bool) (deletePods, createOn []string) {
	surging, availableCount := 0, 0
	var leaving, candidates, allowed []string
	for _, node := range names {
		newPod, oldPod, ok := splitPods(r.ds, r.nodes[node], r.hash)
		if !ok {
			surging++
			continue
		}
		if oldPod != nil && available(oldPod) || oldPod == nil && newPod != nil && available(newPod) {
			availableCount++
		}
		switch {
		case oldPod == nil:
		case newPod == nil:
			run := r.shouldRun(node)
			switch {
			case !available(oldPod) && !run:
				deletePods = append(deletePods, oldPod.Name)
			case !available(oldPod):
				allowed = append(allowed, node)
			case !run:
				leaving = append(leaving, oldPod.Name)
			case surging < r.surge:
				candidates = append(candidates, node)
			}
		case !available(newPod):
			surging++
		default:
			deletePods = append(deletePods, oldPod.Name)
		}
	}
	if extra := min(availableCount-r.desired, len(leaving)); extra > 0 {
		deletePods = append(deletePods, leaving[:extra]...)
	}
	room := min(max(r.surge-surging, 0), len(candidates))
	return deletePods, append(allowed, candidates[:room]...)
}
