package ttlafterfinished

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"skiff/server/controller/controllertest"
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

type cluster struct {
	t         *testing.T
	ctx       context.Context
	client    kubernetes.Interface
	informers informers.SharedInformerFactory
	clock     *testingclock.FakeClock
	events    *controllertest.Recorder
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: 45 * time.Second})
	return &cluster{t: t, ctx: ce.Ctx, client: ce.Client, informers: ce.Informers, clock: testingclock.NewFakeClock(time.Now().Truncate(time.Second)), events: ce.Events}
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
	controllertest.Run(t, c.ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: c.client, Informers: c.informers, Recorder: c.events, Clock: c.clock, Logger: controllertest.Logger(t, slog.LevelWarn)})
	})
	c.finishedJob("short", 30)
	c.clock.Step(31 * time.Second)
	controllertest.Eventually(t, c.ctx, 20*time.Second, func(context.Context) (bool, error) {
		c.clock.Step(time.Millisecond) // lets a rate-limited retry run
		return c.deleting("short"), nil
	}, "the job deleted after its TTL")
	// The event follows the deletion: wait for it too.
	controllertest.Eventually(t, c.ctx, 10*time.Second, func(context.Context) (bool, error) {
		return len(c.events.WithReason("TTLExpired")) > 0, nil
	}, "a TTLExpired event; events: %s", c.events)
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
