package job

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"skiff/server/controller/controllertest"
)

// cluster is a real API server with the job controller running on it.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	events *controllertest.Recorder
}

// startCluster starts the server and the controller; adjust may change
// the controller's config (the recorder, knobs).
func startCluster(t *testing.T, adjust func(*Config)) *cluster {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: 45 * time.Second})
	cfg := Config{
		Client: ce.Client, Informers: ce.Informers, Recorder: ce.Events,
		Logger:            controllertest.Logger(t, slog.LevelWarn),
		PodFailureBackoff: 10 * time.Millisecond, MaxPodFailureBackoff: 50 * time.Millisecond,
		SyncBatchPeriod: 10 * time.Millisecond,
	}
	if adjust != nil {
		adjust(&cfg)
	}
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error { return Run(ctx, cfg) })
	return &cluster{t: t, ctx: ce.Ctx, client: ce.Client, events: ce.Events}
}

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
	}}
}

func (c *cluster) createJob(name string, mutate func(*batchv1.Job)) *batchv1.Job {
	c.t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: batchv1.JobSpec{Template: template()}}
	if mutate != nil {
		mutate(job)
	}
	got, err := c.client.BatchV1().Jobs("default").Create(c.ctx, job, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

func (c *cluster) job(name string) *batchv1.Job {
	c.t.Helper()
	j, err := c.client.BatchV1().Jobs("default").Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return j
}

// pods lists the job's pods, including those being deleted.
func (c *cluster) pods(job *batchv1.Job) []corev1.Pod {
	c.t.Helper()
	list, err := c.client.CoreV1().Pods("default").List(c.ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
	if err != nil {
		c.t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return list.Items
}

func activePods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for i := range pods {
		if isActive(&pods[i]) {
			out = append(out, pods[i])
		}
	}
	return out
}

// eventually polls cond until it holds, failing the test at the deadline.
func (c *cluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	controllertest.Eventually(c.t, c.ctx, 20*time.Second, func(context.Context) (bool, error) { return cond(), nil }, "%s; events: %s", what, c.events)
}

// finish plays the kubelet: the pod's container exits with code and the
// pod reaches the matching terminal phase.
func (c *cluster) finish(name string, code int32) {
	c.t.Helper()
	c.setStatus(name, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		reason := "Completed"
		if code != 0 {
			p.Status.Phase = corev1.PodFailed
			reason = "Error"
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "main", Image: "busybox", ImageID: "docker.io/library/busybox@sha256:1",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now}},
		}}
	})
}

// run plays the kubelet starting the pod.
func (c *cluster) run(name string) {
	c.t.Helper()
	c.setStatus(name, running)
}

// runIfPresent is run for a pod the controller may delete at any moment
// (a job past its deadline): a pod already gone is no failure.
func (c *cluster) runIfPresent(name string) {
	c.t.Helper()
	if err := c.trySetStatus(name, running); err != nil && !apierrors.IsNotFound(err) {
		c.t.Fatalf("pod %s status: %v", name, err)
	}
}

// running is what a kubelet reports for a started pod.
func running(p *corev1.Pod) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "main", Image: "busybox", ImageID: "docker.io/library/busybox@sha256:1", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}}
}

func (c *cluster) setStatus(name string, f func(*corev1.Pod)) {
	c.t.Helper()
	if err := c.trySetStatus(name, f); err != nil {
		c.t.Fatalf("pod %s status: %v", name, err)
	}
}

func (c *cluster) trySetStatus(name string, f func(*corev1.Pod)) error {
	pods := c.client.CoreV1().Pods("default")
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		f(p)
		_, err = pods.UpdateStatus(c.ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// wantEvents waits for n events of the reason, then checks there are no
// more: an event follows the status write that a test may see first.
func (c *cluster) wantEvents(reason string, n int) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("%d %s events", n, reason), func() bool { return len(c.events.WithReason(reason)) >= n })
	if got := len(c.events.WithReason(reason)); got != n {
		c.t.Errorf("%d %s events, want %d: %s", got, reason, n, c.events)
	}
}

func condition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	return findCondition(job.Status.Conditions, t)
}

func hasCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return hasTrueCondition(job, t)
}
