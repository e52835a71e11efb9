package apiserver_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestEviction_RespectsDisruptionBudget(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pods := h.client.CoreV1().Pods("default")
	mkPod := func(name string, ready bool, app string) {
		t.Helper()
		p, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"web-0", "web-1"} {
		mkPod(n, true, "web")
	}
	mkPod("web-sick", false, "web")
	mkPod("other", true, "other")

	pdbs := h.client.PolicyV1().PodDisruptionBudgets("default")
	one := intstr.FromInt32(1)
	pdb, err := pdbs.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evict := func(name string, dryRun bool) error {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		if dryRun {
			ev.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
		}
		return pods.EvictV1(ctx, ev)
	}

	// The budget has not been processed by the disruption controller yet.
	if err := evict("web-0", false); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evict before the budget is processed: %v, want 429", err)
	}
	// Pods no budget covers go at once.
	if err := evict("other", false); err != nil {
		t.Fatalf("evict uncovered pod: %v", err)
	}

	// Play the disruption controller: 2 healthy, 1 needed, 1 allowed.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 3, DisruptionsAllowed: 1}
	if _, err := pdbs.UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := evict("web-0", true); err != nil {
		t.Fatalf("dry-run eviction: %v", err)
	}
	if err := evict("web-0", false); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	got, err := pdbs.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.DisruptionsAllowed != 0 || got.Status.DisruptedPods["web-0"].Time.IsZero() {
		t.Errorf("after one eviction: allowed %d, disrupted %v; want 0 and web-0 recorded", got.Status.DisruptionsAllowed, got.Status.DisruptedPods)
	}
	err = evict("web-1", false)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second eviction: %v, want 429", err)
	}
	if st, ok := err.(apierrors.APIStatus); !ok || len(st.Status().Details.Causes) == 0 || st.Status().Details.Causes[0].Type != policyv1.DisruptionBudgetCause {
		t.Errorf("429 without a DisruptionBudget cause: %#v", err)
	}
	if _, err := pods.Get(ctx, "web-1", metav1.GetOptions{}); err != nil {
		t.Errorf("refused eviction lost the pod: %v", err)
	}
	// An unready pod may go while the budget holds without it.
	if err := evict("web-sick", false); err != nil {
		t.Errorf("evict unready pod with the budget met: %v", err)
	}
}

func TestEviction_PodHeldByFinalizer_GetsDisruptionTarget(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pods := h.client.CoreV1().Pods("default")
	p, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dry := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "default"},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
	if err := pods.EvictV1(ctx, dry); err != nil {
		t.Fatalf("dry-run eviction: %v", err)
	}
	if got, _ := pods.Get(ctx, "held", metav1.GetOptions{}); podHasCondition(got, corev1.DisruptionTarget) {
		t.Fatal("a dry-run eviction wrote the DisruptionTarget condition")
	}
	// A resourceVersion precondition names the pod as the caller saw it;
	// the condition written on the way must not make the delete conflict.
	rv := p.ResourceVersion
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "default"},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}}
	if err := pods.EvictV1(ctx, ev); err != nil {
		t.Fatalf("evict: %v", err)
	}
	got, err := pods.Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.DeletionTimestamp == nil {
		t.Error("evicted pod is not terminating")
	}
	var cond *corev1.PodCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == corev1.DisruptionTarget {
			cond = &got.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "EvictionByEvictionAPI" {
		t.Fatalf("DisruptionTarget condition = %+v, want True/EvictionByEvictionAPI", cond)
	}

	stale := "1"
	ev.DeleteOptions.Preconditions.ResourceVersion = &stale
	ev.Name = "held"
	if err := pods.EvictV1(ctx, ev); !apierrors.IsConflict(err) {
		t.Fatalf("evict with a stale resourceVersion: %v, want 409", err)
	}
}

func podHasCondition(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}
