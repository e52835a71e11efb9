package statefulset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// updateStatefulSet takes one step towards set's spec for its pods and
// returns the status it wrote (nil when it got no further than history).
func (c *controller) updateStatefulSet(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod) (*appsv1.StatefulSetStatus, error) {
	set = set.DeepCopy()
	revs, err := c.listRevisions(ctx, set)
	if err != nil {
		return nil, err
	}
	current, update, collisions, err := c.revisionsOf(ctx, set, revs)
	if err != nil {
		return nil, err
	}
	status, err := c.reconcile(ctx, set, current, update, collisions, pods)
	if status != nil {
		err = errors.Join(err, c.writeStatus(ctx, set, status))
	}
	return status, errors.Join(err, c.truncateHistory(ctx, set, pods, revs, current, update))
}

// step is one reconciliation of a set against its pods.
type step struct {
	c               *controller
	set             *appsv1.StatefulSet
	currentSet      *appsv1.StatefulSet // set with the current revision's template
	updateSet       *appsv1.StatefulSet // set with the update revision's template
	current, update *appsv1.ControllerRevision
	replicas        []*corev1.Pod // by ordinal-start; pods not yet created have no phase
	condemned       []*corev1.Pod // beyond the range, highest ordinal first
	firstUnhealthy  *corev1.Pod
	monotonic       bool
	now             time.Time
	status          *appsv1.StatefulSetStatus
}

func (c *controller) reconcile(ctx context.Context, set *appsv1.StatefulSet, current, update *appsv1.ControllerRevision, collisions int32, pods []*corev1.Pod) (*appsv1.StatefulSetStatus, error) {
	currentSet, err := applyRevision(set, current)
	if err != nil {
		return nil, err
	}
	updateSet, err := applyRevision(set, update)
	if err != nil {
		return nil, err
	}
	s := &step{
		c: c, set: set, currentSet: currentSet, updateSet: updateSet, current: current, update: update,
		monotonic: set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement,
		now:       time.Now(),
		status:    &appsv1.StatefulSetStatus{ObservedGeneration: set.Generation, CurrentRevision: current.Name, UpdateRevision: update.Name, CollisionCount: &collisions},
	}
	s.replicas, s.condemned = partitionPods(set, pods)
	for i, p := range s.replicas {
		if p == nil {
			s.replicas[i] = versionedPod(currentSet, updateSet, current.Name, update.Name, startOrdinal(set)+i)
		}
	}
	s.firstUnhealthy = firstUnhealthy(s.replicas, s.condemned)
	s.count()
	// A set being deleted only reports: its pods are the garbage
	// collector's now.
	if set.DeletionTimestamp != nil {
		return s.status, nil
	}
	for _, phase := range []struct {
		pods []*corev1.Pod
		fn   func(context.Context, int) (bool, error)
	}{{s.replicas, s.processReplica}, {s.condemned, s.fixCondemnedClaims}, {s.condemned, s.processCondemned}} {
		if stop, err := runForAll(ctx, phase.pods, phase.fn, s.monotonic); stop || err != nil {
			s.count()
			return s.status, err
		}
	}
	s.count()
	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		// Pods are updated as users delete them.
		return s.status, nil
	}
	return s.status, s.rollingUpdate(ctx)
}

// partitionPods sorts pods into the replicas the set wants (indexed by
// ordinal from the start ordinal, nil where missing) and the condemned
// ones beyond that range, highest ordinal first.
func partitionPods(set *appsv1.StatefulSet, pods []*corev1.Pod) (replicasList, condemned []*corev1.Pod) {
	replicasList = make([]*corev1.Pod, replicas(set))
	for _, p := range pods {
		switch o := ordinalOf(p); {
		case inRange(set, p):
			replicasList[o-startOrdinal(set)] = p
		case o >= 0:
			condemned = append(condemned, p)
		}
	}
	slices.SortFunc(condemned, func(a, b *corev1.Pod) int { return ordinalOf(b) - ordinalOf(a) })
	return replicasList, condemned
}

// firstUnhealthy is the lowest-ordinal unhealthy replica, else the
// lowest-ordinal unhealthy condemned pod: the one pod a scale down may
// delete while it is unhealthy, since waiting for it could take forever.
func firstUnhealthy(replicasList, condemned []*corev1.Pod) *corev1.Pod {
	for _, p := range replicasList {
		if !isHealthy(p) {
			return p
		}
	}
	for i := len(condemned) - 1; i >= 0; i-- {
		if !isHealthy(condemned[i]) {
			return condemned[i]
		}
	}
	return nil
}

// versionedPod is the pod for ordinal at the revision it should run:
// below the partition (or, for a rolling update without parameters, below
// the count already current) the current revision, else the update one.
func versionedPod(currentSet, updateSet *appsv1.StatefulSet, currentRev, updateRev string, ordinal int) *corev1.Pod {
	us := currentSet.Spec.UpdateStrategy
	start := startOrdinal(currentSet)
	if (us.Type == appsv1.RollingUpdateStatefulSetStrategyType && us.RollingUpdate == nil && ordinal < start+int(currentSet.Status.CurrentReplicas)) ||
		(us.RollingUpdate != nil && us.RollingUpdate.Partition != nil && ordinal < start+int(*us.RollingUpdate.Partition)) {
		return newPod(currentSet, ordinal, currentRev)
	}
	return newPod(updateSet, ordinal, updateRev)
}

// runForAll applies fn to each pod: in order, stopping at the first that
// says so, for OrderedReady; all at once (in doubling batches) for
// Parallel.
func runForAll(ctx context.Context, pods []*corev1.Pod, fn func(context.Context, int) (bool, error), monotonic bool) (bool, error) {
	if monotonic {
		for i := range pods {
			if stop, err := fn(ctx, i); stop || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	for pos, batch := 0, 1; pos < len(pods); pos, batch = pos+batch, min(2*batch, 500) {
		batch = min(batch, len(pods)-pos)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for k := range batch {
			wg.Go(func() { _, errs[k] = fn(ctx, pos+k) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return true, err
		}
	}
	return false, nil
}

// processReplica brings one wanted pod into being and into shape. For
// OrderedReady it reports stop while the pod is not yet running, ready and
// available, so that no later ordinal is touched before it is.
func (s *step) processReplica(ctx context.Context, i int) (bool, error) {
	set, pod := s.set, s.replicas[i]
	if isFailed(pod) || isSucceeded(pod) {
		// A pod's phase is final; only a new pod can run again.
		if isFailed(pod) {
			s.c.recorder.Eventf(set, corev1.EventTypeWarning, "RecreatingFailedPod", "StatefulSet %s/%s is recreating failed Pod %s", set.Namespace, set.Name, pod.Name)
		} else {
			s.c.recorder.Eventf(set, corev1.EventTypeNormal, "RecreatingTerminatedPod", "StatefulSet %s/%s is recreating terminated Pod %s", set.Namespace, set.Name, pod.Name)
		}
		if err := s.c.deletePod(ctx, set, pod); err != nil {
			return true, err
		}
		pod = versionedPod(s.currentSet, s.updateSet, s.current.Name, s.update.Name, startOrdinal(set)+i)
		s.replicas[i] = pod
	}
	if !isCreated(pod) {
		if stale, err := s.c.claimIsStale(set, pod); err != nil || stale {
			// The claim still belongs to the pod's predecessor and is about
			// to be collected; the new pod must not mount it.
			return true, err
		}
		if err := s.c.createPod(ctx, set, pod); err != nil {
			return true, err
		}
		if s.monotonic {
			return true, nil
		}
	}
	if isPending(pod) {
		if err := s.c.createClaims(ctx, set, pod); err != nil {
			return true, err
		}
	}
	if s.monotonic && (isTerminating(pod) || !isRunningAndReady(pod) || !isRunningAndAvailable(pod, set.Spec.MinReadySeconds, s.now)) {
		return true, nil
	}
	if !isCreated(pod) {
		return false, nil
	}
	if identityMatches(set, pod) && storageMatches(set, pod) && s.c.claimsMatchPolicy(s.updateSet, pod) {
		return false, nil
	}
	if err := s.c.fixPod(ctx, s.updateSet, pod.DeepCopy()); err != nil {
		return true, err
	}
	return false, nil
}

// fixCondemnedClaims hands the claims of pods about to go to whoever the
// retention policy says (the pod, for whenScaled: Delete) before they go.
func (s *step) fixCondemnedClaims(ctx context.Context, i int) (bool, error) {
	pod := s.condemned[i]
	if s.c.claimsMatchPolicy(s.updateSet, pod) {
		return false, nil
	}
	if err := s.c.fixClaims(ctx, s.updateSet, pod); err != nil {
		return true, err
	}
	return false, nil
}

// processCondemned deletes one pod beyond the wanted range. OrderedReady
// deletes only once every lower pod is healthy, one pod at a time, from
// the highest ordinal down.
func (s *step) processCondemned(ctx context.Context, i int) (bool, error) {
	pod := s.condemned[i]
	if isTerminating(pod) {
		return s.monotonic, nil
	}
	if s.monotonic && pod != s.firstUnhealthy &&
		(!isRunningAndReady(pod) || !isRunningAndAvailable(pod, s.set.Spec.MinReadySeconds, s.now)) {
		return true, nil
	}
	return true, s.c.deletePod(ctx, s.set, pod)
}

// count recomputes the replica counts over the pods as they now stand.
func (s *step) count() {
	st := s.status
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.CurrentReplicas, st.UpdatedReplicas = 0, 0, 0, 0, 0
	for _, list := range [][]*corev1.Pod{s.replicas, s.condemned} {
		for _, p := range list {
			if !isCreated(p) {
				continue
			}
			st.Replicas++
			if isRunningAndReady(p) {
				st.ReadyReplicas++
				if isRunningAndAvailable(p, s.set.Spec.MinReadySeconds, s.now) {
					st.AvailableReplicas++
				}
			}
			if isTerminating(p) {
				continue
			}
			if podRevision(p) == s.current.Name {
				st.CurrentReplicas++
			}
			if podRevision(p) == s.update.Name {
				st.UpdatedReplicas++
			}
		}
	}
}

// rollingUpdate deletes the pods to update next; they come back at the
// update revision on a later sync.
func (s *step) rollingUpdate(ctx context.Context) error {
	partition, maxUnavailable := 0, 1
	if ru := s.set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.Partition != nil {
			partition = int(*ru.Partition)
		}
		var err error
		if maxUnavailable, err = maxUnavailableOf(ru.MaxUnavailable, replicas(s.set)); err != nil {
			return fmt.Errorf("maxUnavailable: %w", err)
		}
	}
	for _, i := range updateTargets(s.replicas, s.update.Name, partition, maxUnavailable) {
		if err := s.c.deletePod(ctx, s.set, s.replicas[i]); err != nil {
			return err
		}
		s.status.CurrentReplicas--
	}
	return nil
}

// maxUnavailableOf is the pods a rolling update may take down at once:
// one by default, a percentage rounding down but never below one.
func maxUnavailableOf(v *intstr.IntOrString, replicaCount int) (int, error) {
	if v == nil {
		return 1, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, replicaCount, false)
	if err != nil {
		return 0, err
	}
	return max(n, 1), nil
}

// updateTargets picks the pods (by index, ordinal minus start) that a
// rolling update deletes now: old-revision pods from the highest ordinal
// down to the partition, as many as maxUnavailable leaves room for once
// the unhealthy pods are counted.
func updateTargets(replicasList []*corev1.Pod, updateRevision string, partition, maxUnavailable int) []int {
	unavailable := 0
	for _, p := range replicasList {
		if !isHealthy(p) {
			unavailable++
		}
	}
	var out []int
	for i := len(replicasList) - 1; i >= partition && len(out) < maxUnavailable-unavailable; i-- {
		if p := replicasList[i]; podRevision(p) != updateRevision && !isTerminating(p) {
			out = append(out, i)
		}
	}
	return out
}
