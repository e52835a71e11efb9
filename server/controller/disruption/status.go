package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DeletionTimeout is how long a pod the eviction subresource let go is
// counted as gone before it is: the eviction records it in
// status.disruptedPods so that concurrent evictions cannot all spend the
// same budget, and if the pod is still not being deleted after this long
// the eviction is assumed to have failed and the pod counts again.
const DeletionTimeout = 2 * time.Minute

// scale is a controller's identity and desired replica count.
type scale struct {
	uid      types.UID
	replicas int32
}

// scaleFinder looks up the controller a pod's controller reference names;
// ok is false when no known controller matches it.
type scaleFinder func(ref *metav1.OwnerReference, namespace string) (s scale, ok bool)

// expectedAndDesired works out how many pods the budget covers and how
// many of them must stay healthy. An integer minAvailable needs nothing
// but the pods; a percentage, or maxUnavailable, is relative to what the
// pods' controllers want running, since pods missing right now are
// exactly what the budget is about. Pods without a controller are
// reported: their number cannot be known, so the result is a best effort.
func expectedAndDesired(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, find scaleFinder) (expected, desired int32, unmanaged []string, err error) {
	spec := &pdb.Spec
	switch {
	case spec.MaxUnavailable != nil:
		expected, unmanaged, err = expectedScale(pods, find)
		if err != nil {
			return 0, 0, nil, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("maxUnavailable: %w", err)
		}
		return expected, max(expected-int32(maxUnavailable), 0), unmanaged, nil
	case spec.MinAvailable != nil && spec.MinAvailable.Type == intstr.Int:
		return int32(len(pods)), spec.MinAvailable.IntVal, nil, nil
	case spec.MinAvailable != nil:
		expected, unmanaged, err = expectedScale(pods, find)
		if err != nil {
			return 0, 0, nil, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("minAvailable: %w", err)
		}
		return expected, int32(minAvailable), unmanaged, nil
	}
	return 0, 0, nil, nil
}

// expectedScale sums the desired replicas of the controllers of the pods,
// each controller once.
func expectedScale(pods []*corev1.Pod, find scaleFinder) (int32, []string, error) {
	byController := map[types.UID]int32{}
	seenRef := map[types.UID]bool{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if seenRef[ref.UID] {
			continue
		}
		s, ok := find(ref, pod.Namespace)
		if !ok {
			return 0, nil, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
		seenRef[ref.UID] = true
		byController[s.uid] = s.replicas
	}
	var total int32
	for _, n := range byController {
		total += n
	}
	return total, unmanaged, nil
}

// liveDisruptions keeps the disruptedPods entries that still hold: the pod
// exists, is not being deleted yet, and its eviction is recent. It
// returns the pods whose eviction evidently failed, and when the next
// entry expires so the budget can be looked at again then.
func liveDisruptions(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, now time.Time) (live map[string]metav1.Time, expired []*corev1.Pod, recheck *time.Time) {
	live = map[string]metav1.Time{}
	if len(pdb.Status.DisruptedPods) == 0 {
		return live, nil, nil
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		at, ok := pdb.Status.DisruptedPods[pod.Name]
		if !ok {
			continue
		}
		deadline := at.Add(DeletionTimeout)
		if deadline.Before(now) {
			expired = append(expired, pod)
			continue
		}
		live[pod.Name] = at
		if recheck == nil || deadline.Before(*recheck) {
			recheck = &deadline
		}
	}
	return live, expired, recheck
}

// countHealthy counts the Ready pods that are neither being deleted nor
// just evicted.
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if _, ok := disrupted[pod.Name]; ok {
			continue
		}
		if isPodReady(pod) {
			n++
		}
	}
	return n
}

func isPodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// newStatus is the status the budget should have. No disruption is
// allowed while the budget covers no pod: its first pods could otherwise
// be evicted before this controller counted them.
func newStatus(pdb *policyv1.PodDisruptionBudget, healthy, desired, expected int32, disrupted map[string]metav1.Time) policyv1.PodDisruptionBudgetStatus {
	allowed := healthy - desired
	if expected <= 0 || allowed < 0 {
		allowed = 0
	}
	st := policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptedPods:      disrupted,
		DisruptionsAllowed: allowed,
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		Conditions:         append([]metav1.Condition(nil), pdb.Status.Conditions...),
	}
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, ObservedGeneration: st.ObservedGeneration,
		Status: metav1.ConditionFalse, Reason: policyv1.InsufficientPodsReason}
	if allowed > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	apimeta.SetStatusCondition(&st.Conditions, cond)
	return st
}

// failedStatus is the fail-safe status after a sync error: no disruption
// allowed until the budget can be computed again.
func failedStatus(pdb *policyv1.PodDisruptionBudget, err error) policyv1.PodDisruptionBudgetStatus {
	st := *pdb.Status.DeepCopy()
	st.DisruptionsAllowed = 0
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition,
		ObservedGeneration: st.ObservedGeneration, Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason, Message: err.Error()})
	return st
}

// statusEqual compares what the controller computes; condition timestamps
// are the server's record of when, not part of the decision.
func statusEqual(a, b *policyv1.PodDisruptionBudgetStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.DisruptionsAllowed != b.DisruptionsAllowed ||
		a.CurrentHealthy != b.CurrentHealthy || a.DesiredHealthy != b.DesiredHealthy || a.ExpectedPods != b.ExpectedPods ||
		!apiequality.Semantic.DeepEqual(a.DisruptedPods, b.DisruptedPods) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}
