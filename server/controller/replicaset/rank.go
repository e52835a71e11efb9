package replicaset

import (
	"math"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deletionCostAnnotation lets users say which pods of a ReplicaSet they
// would rather lose first on scale-down (lower cost goes first).
const deletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// podActive: pods that finished or are terminating no longer count
// towards the replicas, so their replacement is created right away.
func podActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// podTerminating: on its way out but still running somewhere.
func podTerminating(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	c := readyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// podAvailable: ready for at least minReadySeconds as of now.
func podAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(p)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).Before(now)
}

var phaseOrdinal = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// rankedPods sorts pods so that those cheapest to lose come first. rank
// is, per pod, how many pods of the same owner share its node: losing one
// of a crowded node spreads the rest. Ages are compared in log2 buckets
// (upstream's LogarithmicScaleDown), so that among pods of roughly the same
// age the choice is random-ish (by UID) rather than always the newest, which
// would keep deleting the pods of the last scale-up.
type rankedPods struct {
	pods []*corev1.Pod
	rank []int
	now  time.Time
}

func (s rankedPods) Len() int { return len(s.pods) }

func (s rankedPods) Swap(i, j int) {
	s.pods[i], s.pods[j] = s.pods[j], s.pods[i]
	s.rank[i], s.rank[j] = s.rank[j], s.rank[i]
}

func (s rankedPods) Less(i, j int) bool {
	pi, pj := s.pods[i], s.pods[j]
	if (pi.Spec.NodeName == "") != (pj.Spec.NodeName == "") {
		return pi.Spec.NodeName == ""
	}
	if phaseOrdinal[pi.Status.Phase] != phaseOrdinal[pj.Status.Phase] {
		return phaseOrdinal[pi.Status.Phase] < phaseOrdinal[pj.Status.Phase]
	}
	if podReady(pi) != podReady(pj) {
		return !podReady(pi)
	}
	if ci, cj := deletionCost(pi), deletionCost(pj); ci != cj {
		return ci < cj
	}
	if s.rank[i] != s.rank[j] {
		return s.rank[i] > s.rank[j]
	}
	if podReady(pi) && podReady(pj) {
		ti, tj := readyCondition(pi).LastTransitionTime, readyCondition(pj).LastTransitionTime
		if !ti.Equal(&tj) {
			return s.newerFirst(ti, tj, pi, pj)
		}
	}
	if ri, rj := maxRestarts(pi), maxRestarts(pj); ri != rj {
		return ri > rj
	}
	if !pi.CreationTimestamp.Equal(&pj.CreationTimestamp) {
		return s.newerFirst(pi.CreationTimestamp, pj.CreationTimestamp, pi, pj)
	}
	return false
}

// newerFirst orders by time, unknown (zero) first, then the newer, with
// times in the same log2 bucket of age tied and broken by UID.
func (s rankedPods) newerFirst(ti, tj metav1.Time, pi, pj *corev1.Pod) bool {
	if ti.IsZero() || tj.IsZero() {
		return ti.IsZero()
	}
	if s.now.IsZero() {
		return ti.After(tj.Time)
	}
	if d := logBucket(s.now.Sub(ti.Time)) - logBucket(s.now.Sub(tj.Time)); d != 0 {
		return d < 0
	}
	return pi.UID < pj.UID
}

func logBucket(age time.Duration) int {
	if age <= 0 {
		return -1
	}
	return int(math.Log2(float64(age)))
}

// maxRestarts is the highest restart count among the regular containers,
// then among the sidecars (restartable init containers), as a pair packed
// so that regular restarts weigh first.
func maxRestarts(p *corev1.Pod) int64 {
	var regular, sidecar int32
	for _, c := range p.Status.ContainerStatuses {
		regular = max(regular, c.RestartCount)
	}
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	for _, c := range p.Status.InitContainerStatuses {
		if sidecars[c.Name] {
			sidecar = max(sidecar, c.RestartCount)
		}
	}
	return int64(regular)<<32 | int64(sidecar)
}

// deletionCost reads the pod-deletion-cost annotation; a missing or
// malformed one costs 0, as upstream reads it.
func deletionCost(p *corev1.Pod) int32 {
	v, ok := p.Annotations[deletionCostAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// podsToDelete picks the n pods of candidates to delete. related are all
// the pods of the owner's family (sibling ReplicaSets of a Deployment
// included), used to find crowded nodes.
func podsToDelete(candidates, related []*corev1.Pod, n int, now time.Time) []*corev1.Pod {
	if n >= len(candidates) {
		return candidates
	}
	onNode := map[string]int{}
	for _, p := range related {
		if podActive(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	ranked := rankedPods{pods: append([]*corev1.Pod(nil), candidates...), rank: make([]int, len(candidates)), now: now}
	for i, p := range ranked.pods {
		ranked.rank[i] = onNode[p.Spec.NodeName]
	}
	sort.Sort(ranked)
	return ranked.pods[:n]
}
