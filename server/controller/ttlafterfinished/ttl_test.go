package ttlafterfinished

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver/apitest"
)

func TestTimeLeft(t *testing.T) {
	finished := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	job := func(ttl *int32, conds []batchv1.JobCondition, completion *time.Time) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "default"}}
		j.Spec.TTLSecondsAfterFinished = ttl
		j.Status.Conditions = conds
		if completion != nil {
			j.Status.CompletionTime = &metav1.Time{Time: *completion}
		}
		return j
	}
	cond := func(t batchv1.JobConditionType, s corev1.ConditionStatus, at time.Time) []batchv1.JobCondition {
		return []batchv1.JobCondition{{Type: t, Status: s, LastTransitionTime: metav1.NewTime(at)}}
	}
	now := finished.Add(30 * time.Second)
	for _, tc := range []struct {
		name    string
		job     *batchv1.Job
		cleanup bool
		left    time.Duration
		err     bool
	}{
		{name: "complete, 30 s of 100 gone", job: job(ptr.To[int32](100), cond(batchv1.JobComplete, corev1.ConditionTrue, finished), nil), cleanup: true, left: 70 * time.Second},
		{name: "failed counts too", job: job(ptr.To[int32](10), cond(batchv1.JobFailed, corev1.ConditionTrue, finished), nil), cleanup: true, left: -20 * time.Second},
		{name: "ttl zero expires at once", job: job(ptr.To[int32](0), cond(batchv1.JobComplete, corev1.ConditionTrue, finished), nil), cleanup: true, left: -30 * time.Second},
		{name: "no transition time: completionTime", job: job(ptr.To[int32](60), cond(batchv1.JobComplete, corev1.ConditionTrue, time.Time{}), &finished), cleanup: true, left: 30 * time.Second},
		{name: "no time at all", job: job(ptr.To[int32](60), cond(batchv1.JobComplete, corev1.ConditionTrue, time.Time{}), nil), cleanup: true, err: true},
		{name: "no ttl", job: job(nil, cond(batchv1.JobComplete, corev1.ConditionTrue, finished), nil), err: true},
		{name: "still running", job: job(ptr.To[int32](60), cond(batchv1.JobSuspended, corev1.ConditionTrue, finished), nil), err: true},
		{name: "complete false", job: job(ptr.To[int32](60), cond(batchv1.JobComplete, corev1.ConditionFalse, finished), nil), err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := needsCleanup(tc.job); got != tc.cleanup {
				t.Errorf("needsCleanup = %v, want %v", got, tc.cleanup)
			}
			left, err := timeLeft(tc.job, now)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err == nil && left != tc.left {
				t.Errorf("left = %v, want %v", left, tc.left)
			}
		})
	}
}

type eventLog struct {
	mu      sync.Mutex
	reasons []string
}

func (r *eventLog) Event(_ runtime.Object, _, reason, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *eventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	r.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (r *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	r.Eventf(obj, typ, reason, format, args...)
}

func (r *eventLog) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reasons)
}

func (r *eventLog) has(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.reasons, reason)
}

type cluster struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	clock  *testingclock.FakeClock
	events *eventLog
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	srv := apitest.Start(t, apitest.Options{})
	client := kubernetes.NewForConfigOrDie(srv.Config(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return &cluster{t: t, ctx: ctx, client: client, clock: testingclock.NewFakeClock(time.Now().Truncate(time.Second)), events: &eventLog{}}
}

// finishedJob creates a Job that completed now (fake clock) with a TTL.
func (c *cluster) finishedJob(name string, ttl int32) *batchv1.Job {
	c.t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ptr.To(ttl), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
		}}},
	}
	got, err := c.client.BatchV1().Jobs("default").Create(c.ctx, job, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	now := metav1.NewTime(c.clock.Now())
	got.Status.StartTime = &now
	got.Status.CompletionTime = &now
	got.Status.Succeeded = 1
	got.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	got, err = c.client.BatchV1().Jobs("default").UpdateStatus(c.ctx, got, metav1.UpdateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

// deleting reports whether the Job is gone or on its way out, with the
// foreground finalizer that makes its pods go first.
func (c *cluster) deleting(name string) bool {
	c.t.Helper()
	j, err := c.client.BatchV1().Jobs("default").Get(c.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil {
		c.t.Fatal(err)
	}
	if j.DeletionTimestamp != nil && !slices.Contains(j.Finalizers, metav1.FinalizerDeleteDependents) {
		c.t.Fatalf("job %s deleted without foreground propagation: finalizers %v", name, j.Finalizers)
	}
	return j.DeletionTimestamp != nil
}

func TestTTL_FinishedJobDeletedForegroundOnceTTLPassed(t *testing.T) {
	c := newCluster(t)
	factory := informers.NewSharedInformerFactory(c.client, 0)
	runCtx, stop := context.WithCancel(c.ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, Config{Client: c.client, Informers: factory, Recorder: c.events, Clock: c.clock,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		factory.Shutdown()
	}()
	c.finishedJob("short", 30)
	c.clock.Step(31 * time.Second)
	err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		c.clock.Step(time.Millisecond) // lets a rate-limited retry run
		return c.deleting("short"), nil
	})
	if err != nil {
		t.Fatalf("job not deleted after its TTL: %v", err)
	}
	// The event follows the deletion: wait for it too.
	err = wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.events.has("TTLExpired"), nil
	})
	if err != nil {
		t.Errorf("no TTLExpired event: %v", c.events.list())
	}
}

// direct builds a controller whose job cache holds exactly the given
// jobs, so that a test can make it stale and call sync itself.
func (c *cluster) direct(cached ...*batchv1.Job) *controller {
	c.t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, j := range cached {
		if err := indexer.Add(j); err != nil {
			c.t.Fatal(err)
		}
	}
	ctl := newController(Config{Client: c.client, Informers: informers.NewSharedInformerFactory(c.client, 0), Recorder: c.events, Clock: c.clock})
	ctl.jobs = batchlisters.NewJobLister(indexer)
	c.t.Cleanup(ctl.queue.ShutDown)
	return ctl
}

func TestTTL_NotYetExpired_NotDeleted(t *testing.T) {
	c := newCluster(t)
	job := c.finishedJob("young", 60)
	ctl := c.direct(job)
	c.clock.Step(59 * time.Second)
	if err := ctl.sync(c.ctx, "default/young"); err != nil {
		t.Fatal(err)
	}
	if c.deleting("young") {
		t.Fatal("deleted a second before its TTL")
	}
	c.clock.Step(time.Second)
	if err := ctl.sync(c.ctx, "default/young"); err != nil {
		t.Fatal(err)
	}
	if !c.deleting("young") {
		t.Fatal("not deleted at its TTL")
	}
}

func TestTTL_TTLRaisedAfterCaching_FreshReadWins(t *testing.T) {
	c := newCluster(t)
	job := c.finishedJob("raised", 10)
	stale := job.DeepCopy()
	job.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600)
	if _, err := c.client.BatchV1().Jobs("default").Update(c.ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctl := c.direct(stale)
	c.clock.Step(time.Minute)
	if err := ctl.sync(c.ctx, "default/raised"); err != nil {
		t.Fatal(err)
	}
	if c.deleting("raised") {
		t.Fatal("deleted on the stale TTL")
	}
}

func TestTTL_UnfinishedJob_NotDeleted(t *testing.T) {
	c := newCluster(t)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "default"},
		Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
		}}},
	}
	got, err := c.client.BatchV1().Jobs("default").Create(c.ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctl := c.direct(got)
	c.clock.Step(time.Hour)
	if err := ctl.sync(c.ctx, "default/running"); err != nil {
		t.Fatal(err)
	}
	if c.deleting("running") {
		t.Fatal("deleted a job that has not finished")
	}
}
