package podgc

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"skiff/server/controller/controllertest"
)

type cluster struct {
	client kubernetes.Interface
	ctx    context.Context
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	return &cluster{client: controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}}).Client, ctx: t.Context()}
}

// start runs the controller until the test ends.
func (c *cluster) start(t *testing.T, cfg Config) {
	t.Helper()
	cfg.Client, cfg.Informers, cfg.Logger = c.client, controllertest.Informers(t, c.client), controllertest.Logger(t, slog.LevelInfo)
	cfg.Recorder = controllertest.APIRecorder(t, c.client, "pod-garbage-collector")
	if cfg.Period == 0 {
		cfg.Period = 50 * time.Millisecond
	}
	controllertest.Run(t, context.Background(), func(ctx context.Context) error { return Run(ctx, cfg) })
}

func (c *cluster) node(t *testing.T, name string) {
	t.Helper()
	if _, err := c.client.CoreV1().Nodes().Create(c.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pod creates a pod and, playing the kubelet, writes its phase.
func (c *cluster) pod(t *testing.T, name, node string, ph corev1.PodPhase, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, m := range mutate {
		m(p)
	}
	got, err := c.client.CoreV1().Pods("default").Create(c.ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ph == corev1.PodPending {
		return got
	}
	got.Status.Phase = ph
	if ph == corev1.PodFailed && name == "evicted" {
		got.Status.Reason = "Evicted"
	}
	got, err = c.client.CoreV1().Pods("default").UpdateStatus(c.ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (c *cluster) waitGone(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		poll(t, "pod "+n+" deleted", func(ctx context.Context) (bool, error) {
			_, err := c.client.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	}
}

func (c *cluster) exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := c.client.CoreV1().Pods("default").Get(c.ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func poll(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	controllertest.Eventually(t, t.Context(), 20*time.Second, cond, "%s", what)
}

func TestPodGC_NodeDeleted_PodsMarkedFailedThenDeleted(t *testing.T) {
	c := newCluster(t)
	c.node(t, "doomed")
	c.node(t, "live")
	running := c.pod(t, "running", "doomed", corev1.PodRunning)
	c.pod(t, "done", "doomed", corev1.PodSucceeded)
	c.pod(t, "terminating", "doomed", corev1.PodRunning, func(p *corev1.Pod) { p.Finalizers = nil })
	if err := c.client.CoreV1().Pods("default").Delete(c.ctx, "terminating", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.pod(t, "safe", "live", corev1.PodRunning)
	wctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	w, err := c.client.CoreV1().Pods("default").Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=running", ResourceVersion: running.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	c.start(t, Config{Quarantine: 200 * time.Millisecond})
	if err := c.client.CoreV1().Nodes().Delete(c.ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitGone(t, "running", "done", "terminating")
	if !c.exists(t, "safe") {
		t.Error("the pod on a live node was deleted")
	}
	// Before it went, the running pod was marked Failed with the reason.
	var failed *corev1.Pod
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			break
		}
		if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodFailed {
			failed = p
		}
	}
	if failed == nil {
		t.Fatal("the running pod was deleted without being marked Failed first")
	}
	var cond *corev1.PodCondition
	for i := range failed.Status.Conditions {
		if failed.Status.Conditions[i].Type == corev1.DisruptionTarget {
			cond = &failed.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != ReasonDeletionByPodGC {
		t.Errorf("DisruptionTarget condition = %+v", cond)
	}
	poll(t, "event about the orphaned pod", func(ctx context.Context) (bool, error) {
		evs, err := c.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=running,reason=" + ReasonDeletionByPodGC})
		return err == nil && len(evs.Items) == 1 && evs.Items[0].Message == "Deleting pod: node doomed no longer exists", err
	})
}

func TestPodGC_NodeMissingWithinQuarantine_PodKept(t *testing.T) {
	c := newCluster(t)
	// Bound to a node the cache has never seen: maybe it is registering.
	c.pod(t, "early", "registering", corev1.PodRunning)
	c.pod(t, "orphan", "gone", corev1.PodRunning)
	c.start(t, Config{Quarantine: time.Hour})
	c.node(t, "registering")
	// Another rule deleting something shows passes have run.
	c.pod(t, "stuck", "", corev1.PodPending, func(p *corev1.Pod) { p.Finalizers = []string{"example.com/hold"} })
	if err := c.client.CoreV1().Pods("default").Delete(c.ctx, "stuck", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the unscheduled terminating pod marked Failed", func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods("default").Get(ctx, "stuck", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodFailed, err
	})
	for _, n := range []string{"early", "orphan"} {
		if !c.exists(t, n) {
			t.Errorf("pod %s deleted within the node quarantine", n)
		}
	}
	// Its finalizer gone, the pod goes: it was deleted with no grace.
	p, err := c.client.CoreV1().Pods("default").Get(c.ctx, "stuck", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g := p.DeletionGracePeriodSeconds; g == nil || *g != 0 {
		t.Errorf("deletionGracePeriodSeconds = %v, want 0", g)
	}
	p.Finalizers = nil
	if _, err := c.client.CoreV1().Pods("default").Update(c.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitGone(t, "stuck")
}

func TestPodGC_TerminatedOverThreshold_OldestAndEvictedDeleted(t *testing.T) {
	c := newCluster(t)
	c.node(t, "n")
	// Created within the same second, so the name breaks the tie.
	for _, n := range []string{"t1", "t2", "t3", "t4"} {
		c.pod(t, n, "n", corev1.PodSucceeded)
	}
	c.pod(t, "evicted", "n", corev1.PodFailed)
	c.pod(t, "running", "n", corev1.PodRunning)
	c.start(t, Config{TerminatedPodThreshold: 2})
	c.waitGone(t, "evicted", "t1", "t2")
	for _, n := range []string{"t3", "t4", "running"} {
		if !c.exists(t, n) {
			t.Errorf("pod %s deleted; only 3 of the 5 terminated pods should go", n)
		}
	}
}
