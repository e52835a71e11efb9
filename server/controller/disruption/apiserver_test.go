package disruption

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"skiff/server/controller/controllertest"
)

type cluster struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: 50 * time.Second})
	cfg := Config{Client: ce.Client, Informers: ce.Informers, Logger: controllertest.Logger(t, slog.LevelWarn)}
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error { return Run(ctx, cfg) })
	return &cluster{t: t, ctx: ce.Ctx, client: ce.Client}
}

func (c *cluster) must(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

var template = corev1.PodTemplateSpec{
	ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
	Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
}

// deployment creates a Deployment of the given scale with one ReplicaSet
// and n pods, as the deployment and replica set controllers would have,
// the first ready of them Ready.
func (c *cluster) deployment(replicas int32, n, ready int) []*corev1.Pod {
	c.t.Helper()
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	d, err := c.client.AppsV1().Deployments("default").Create(c.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: sel, Template: template},
	}, metav1.CreateOptions{})
	c.must(err)
	rs, err := c.client.AppsV1().ReplicaSets("default").Create(c.ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec:       appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: sel, Template: template},
	}, metav1.CreateOptions{})
	c.must(err)
	var out []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-1-%d", i), Labels: map[string]string{"app": "web"},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: *template.Spec.DeepCopy(),
		}
		p.Spec.NodeName = "node-1"
		got, err := c.client.CoreV1().Pods("default").Create(c.ctx, p, metav1.CreateOptions{})
		c.must(err)
		out = append(out, c.setReady(got, i < ready))
	}
	return out
}

func (c *cluster) setReady(pod *corev1.Pod, ready bool) *corev1.Pod {
	c.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod = pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	got, err := c.client.CoreV1().Pods("default").UpdateStatus(c.ctx, pod, metav1.UpdateOptions{})
	c.must(err)
	return got
}

func (c *cluster) budget(name string, minAvailable, maxUnavailable *intstr.IntOrString) {
	c.t.Helper()
	_, err := c.client.PolicyV1().PodDisruptionBudgets("default").Create(c.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	c.must(err)
}

func (c *cluster) get(name string) *policyv1.PodDisruptionBudget {
	c.t.Helper()
	pdb, err := c.client.PolicyV1().PodDisruptionBudgets("default").Get(c.ctx, name, metav1.GetOptions{})
	c.must(err)
	return pdb
}

// eventuallyStatus waits for expected/desired/healthy/allowed.
func (c *cluster) eventuallyStatus(name string, expected, desired, healthy, allowed int32) *policyv1.PodDisruptionBudget {
	c.t.Helper()
	var pdb *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		pdb = c.get(name)
		s := pdb.Status
		return s.ObservedGeneration == pdb.Generation && s.ExpectedPods == expected && s.DesiredHealthy == desired &&
			s.CurrentHealthy == healthy && s.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		s := pdb.Status
		c.t.Fatalf("%s: expected/desired/healthy/allowed = %d/%d/%d/%d, want %d/%d/%d/%d", name,
			s.ExpectedPods, s.DesiredHealthy, s.CurrentHealthy, s.DisruptionsAllowed, expected, desired, healthy, allowed)
	}
	return pdb
}

func TestDisruption_BudgetStatusFollowsPodsAndScale(t *testing.T) {
	c := startCluster(t)
	// The Deployment wants 4; 3 pods exist, all ready.
	pods := c.deployment(4, 3, 3)
	c.budget("min-int", intOrStr("2"), nil)
	c.budget("max-pct", nil, intOrStr("25%"))
	c.budget("min-pct", intOrStr("50%"), nil)

	pdb := c.eventuallyStatus("min-int", 3, 2, 3, 1)
	cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != policyv1.SufficientPodsReason {
		t.Errorf("condition = %+v, want True/SufficientPods", cond)
	}
	// Percentages are of the Deployment's 4, not of the 3 pods.
	c.eventuallyStatus("max-pct", 4, 3, 3, 0)
	c.eventuallyStatus("min-pct", 4, 2, 3, 1)

	c.setReady(pods[0], false)
	pdb = c.eventuallyStatus("min-int", 3, 2, 2, 0)
	cond = apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != policyv1.InsufficientPodsReason {
		t.Errorf("condition = %+v, want False/InsufficientPods", cond)
	}

	// Scaling the Deployment moves the percentage budgets.
	d, err := c.client.AppsV1().Deployments("default").Get(c.ctx, "web", metav1.GetOptions{})
	c.must(err)
	d.Spec.Replicas = new(int32(8))
	_, err = c.client.AppsV1().Deployments("default").Update(c.ctx, d, metav1.UpdateOptions{})
	c.must(err)
	c.eventuallyStatus("min-pct", 8, 4, 2, 0)
}

func TestDisruption_StaleDisruptedPodsDropped(t *testing.T) {
	c := startCluster(t)
	pods := c.deployment(3, 3, 3)
	c.budget("pdb", intOrStr("1"), nil)
	pdb := c.eventuallyStatus("pdb", 3, 1, 3, 2)

	// As the eviction subresource would: one pod evicted a moment ago,
	// one whose eviction evidently failed long ago.
	pdb.Status.DisruptedPods = map[string]metav1.Time{
		pods[0].Name: metav1.NewTime(time.Now().Add(-10 * time.Second)),
		pods[1].Name: metav1.NewTime(time.Now().Add(-3 * time.Minute)),
	}
	_, err := c.client.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(c.ctx, pdb, metav1.UpdateOptions{})
	c.must(err)
	// The recent one is not counted healthy; the stale entry goes.
	pdb = c.eventuallyStatus("pdb", 3, 1, 2, 1)
	if _, ok := pdb.Status.DisruptedPods[pods[1].Name]; ok || len(pdb.Status.DisruptedPods) != 1 {
		t.Errorf("disruptedPods = %v, want only %s", pdb.Status.DisruptedPods, pods[0].Name)
	}
}

func TestDisruption_UnknownController_FailsSafe(t *testing.T) {
	c := startCluster(t)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "missing", UID: "no-such-uid", Controller: new(true)}}},
		Spec: *template.Spec.DeepCopy(),
	}
	got, err := c.client.CoreV1().Pods("default").Create(c.ctx, p, metav1.CreateOptions{})
	c.must(err)
	c.setReady(got, true)
	c.budget("pdb", nil, intOrStr("1"))
	controllertest.Eventually(t, c.ctx, 10*time.Second, func(context.Context) (bool, error) {
		cond := apimeta.FindStatusCondition(c.get("pdb").Status.Conditions, policyv1.DisruptionAllowedCondition)
		return cond != nil && cond.Reason == policyv1.SyncFailedReason && cond.Status == metav1.ConditionFalse, nil
	}, "a SyncFailed condition")
	if got := c.get("pdb").Status.DisruptionsAllowed; got != 0 {
		t.Errorf("disruptionsAllowed = %d, want 0", got)
	}
}
