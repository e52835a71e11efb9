package cronjob

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"skiff/server/controller/controllertest"
)

// cluster is a real API server with the CronJob controller on a fake
// clock. No job controller runs: tests finish jobs by writing their status.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	events *controllertest.Recorder
	clock  *testingclock.FakeClock
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: 45 * time.Second})
	// The clock starts before any CronJob exists, so that nothing is due
	// until a test moves it.
	c := &cluster{t: t, ctx: ce.Ctx, client: ce.Client, events: ce.Events, clock: testingclock.NewFakeClock(time.Now().Add(-time.Hour))}
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: ce.Client, Informers: ce.Informers, Recorder: ce.Events, Clock: c.clock, Logger: controllertest.Logger(t, slog.LevelWarn)})
	})
	return c
}

// createCronJob creates a CronJob in UTC and returns it with the first
// schedule minute tests move the clock to: the next full hour, after its
// creation and less than a hundred minutes after it.
func (c *cluster) createCronJob(name, schedule string, mutate func(*batchv1.CronJob)) (*batchv1.CronJob, time.Time) {
	c.t.Helper()
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.CronJobSpec{Schedule: schedule, TimeZone: ptr.To("Etc/UTC"), JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}}},
		}},
	}
	if mutate != nil {
		mutate(cj)
	}
	got, err := c.client.BatchV1().CronJobs("default").Create(c.ctx, cj, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return got, got.CreationTimestamp.Truncate(time.Hour).Add(time.Hour)
}

// syncBarrier returns once the controller has synced the CronJob at the
// current fake time: it lists a job that does not exist as active, which
// only a sync removes (with a MissingJob event). It makes "nothing
// happened" observable without sleeping.
func (c *cluster) syncBarrier(name string) {
	c.t.Helper()
	cjs := c.client.BatchV1().CronJobs("default")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cj, err := cjs.Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: "default", Name: "ghost", UID: "ghost-uid"})
		_, err = cjs.UpdateStatus(c.ctx, cj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.eventually("a sync of "+name, func() bool {
		return !slices.ContainsFunc(c.cronJob(name).Status.Active, func(r corev1.ObjectReference) bool { return r.Name == "ghost" })
	})
}

// setTime moves the fake clock; the controller's pending requeues fire.
func (c *cluster) setTime(t time.Time) { c.clock.SetTime(t) }

// eventually polls until cond holds. Each poll nudges the fake clock by
// a few milliseconds so that rate-limited retries (after a conflict) run;
// tests keep the clock seconds away from the next schedule time.
func (c *cluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	controllertest.Eventually(c.t, c.ctx, 20*time.Second, func(context.Context) (bool, error) {
		c.clock.Step(5 * time.Millisecond)
		return cond(), nil
	}, "%s; events: %s", what, c.events)
}

// wantEvents waits for n events of the reason, then checks there are no
// more.
func (c *cluster) wantEvents(reason string, n int) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("%d %s events", n, reason), func() bool { return len(c.events.WithReason(reason)) >= n })
	if got := len(c.events.WithReason(reason)); got != n {
		c.t.Errorf("%d %s events, want %d: %s", got, reason, n, c.events)
	}
}

func (c *cluster) cronJob(name string) *batchv1.CronJob {
	c.t.Helper()
	cj, err := c.client.BatchV1().CronJobs("default").Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return cj
}

// jobNames lists the namespace's jobs, sorted.
func (c *cluster) jobNames() []string {
	c.t.Helper()
	list, err := c.client.BatchV1().Jobs("default").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, j := range list.Items {
		out = append(out, j.Name)
	}
	slices.Sort(out)
	return out
}

func (c *cluster) waitJobs(want ...string) {
	c.t.Helper()
	slices.Sort(want)
	c.eventually(fmt.Sprintf("jobs %v", want), func() bool { return slices.Equal(c.jobNames(), want) })
}

func activeNames(cj *batchv1.CronJob) []string {
	var out []string
	for _, r := range cj.Status.Active {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}

// finishJob plays the job controller: the job ends Complete or Failed.
func (c *cluster) finishJob(name string, cond batchv1.JobConditionType, start time.Time) {
	c.t.Helper()
	jobs := c.client.BatchV1().Jobs("default")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j, err := jobs.Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewTime(c.clock.Now())
		j.Status.StartTime = &metav1.Time{Time: start}
		interim := batchv1.JobSuccessCriteriaMet
		if cond == batchv1.JobFailed {
			interim = batchv1.JobFailureTarget
			j.Status.Failed = 1
		} else {
			j.Status.Succeeded = 1
			j.Status.CompletionTime = &now
		}
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: interim, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		_, err = jobs.UpdateStatus(c.ctx, j, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		c.t.Fatalf("finish job %s: %v", name, err)
	}
}

func TestCronJob_FakeClock_CreatesJobPerScheduleMinute(t *testing.T) {
	c := startCluster(t)
	cj, m := c.createCronJob("tick", "* * * * *", nil)
	first, second := jobName(cj, m), jobName(cj, m.Add(time.Minute))
	c.setTime(m.Add(5 * time.Second))
	c.waitJobs(first)
	j, err := c.client.BatchV1().Jobs("default").Get(c.ctx, first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != m.UTC().Format(time.RFC3339) {
		t.Errorf("scheduled timestamp %q, want %s", got, m.UTC().Format(time.RFC3339))
	}
	if !metav1.IsControlledBy(j, cj) {
		t.Errorf("job owners %+v, want the CronJob as controller", j.OwnerReferences)
	}
	c.eventually("status to list the job", func() bool {
		got := c.cronJob("tick")
		return slices.Equal(activeNames(got), []string{first}) && got.Status.LastScheduleTime != nil && got.Status.LastScheduleTime.Time.Equal(m)
	})

	c.setTime(m.Add(time.Minute + 5*time.Second))
	c.waitJobs(first, second)
	c.eventually("both active (Allow)", func() bool { return len(c.cronJob("tick").Status.Active) == 2 })
	c.wantEvents("SuccessfulCreate", 2)
}

func TestCronJob_Forbid_SkipsWhileActiveThenStartsLateRun(t *testing.T) {
	c := startCluster(t)
	cj, m := c.createCronJob("forbid", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent })
	c.setTime(m.Add(5 * time.Second))
	c.waitJobs(jobName(cj, m))
	c.eventually("the job active", func() bool { return len(c.cronJob("forbid").Status.Active) == 1 })

	c.setTime(m.Add(time.Minute + 5*time.Second))
	c.eventually("JobAlreadyActive", func() bool { return len(c.events.WithReason("JobAlreadyActive")) > 0 })
	if got := c.jobNames(); len(got) != 1 {
		t.Fatalf("jobs %v while the first is active under Forbid", got)
	}

	// The missed run starts late once the first one is done, as upstream.
	c.finishJob(jobName(cj, m), batchv1.JobComplete, m)
	c.waitJobs(jobName(cj, m), jobName(cj, m.Add(time.Minute)))
	c.eventually("status updated", func() bool {
		got := c.cronJob("forbid")
		return slices.Equal(activeNames(got), []string{jobName(cj, m.Add(time.Minute))}) && got.Status.LastSuccessfulTime != nil
	})
	c.wantEvents("SawCompletedJob", 1)
}

func TestCronJob_Replace_DeletesActiveJobAndStartsNew(t *testing.T) {
	c := startCluster(t)
	cj, m := c.createCronJob("replace", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent })
	c.setTime(m.Add(5 * time.Second))
	c.waitJobs(jobName(cj, m))
	c.eventually("the job active", func() bool { return len(c.cronJob("replace").Status.Active) == 1 })

	c.setTime(m.Add(time.Minute + 5*time.Second))
	second := jobName(cj, m.Add(time.Minute))
	c.waitJobs(second)
	c.eventually("only the new job active", func() bool { return slices.Equal(activeNames(c.cronJob("replace")), []string{second}) })
	c.wantEvents("SuccessfulDelete", 1)
}

func TestCronJob_HistoryLimits_PruneOldestFinishedJobs(t *testing.T) {
	c := startCluster(t)
	cj, m := c.createCronJob("history", "* * * * *", func(cj *batchv1.CronJob) {
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](2)
		cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
	})
	var names []string
	outcomes := []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobComplete, batchv1.JobComplete, batchv1.JobFailed, batchv1.JobFailed}
	for i, outcome := range outcomes {
		at := m.Add(time.Duration(i) * time.Minute)
		c.setTime(at.Add(5 * time.Second))
		name := jobName(cj, at)
		c.eventually("job "+name, func() bool { return slices.Contains(c.jobNames(), name) })
		c.eventually(name+" active", func() bool { return slices.Contains(activeNames(c.cronJob("history")), name) })
		c.finishJob(name, outcome, at)
		names = append(names, name)
	}
	// Kept: the two newest successes and the newest failure.
	c.waitJobs(names[1], names[2], names[4])
	c.eventually("no active jobs", func() bool { return len(c.cronJob("history").Status.Active) == 0 })
	c.wantEvents("SuccessfulDelete", 2)
}

func TestCronJob_Suspended_CreatesNothingUntilResumed(t *testing.T) {
	c := startCluster(t)
	cj, m := c.createCronJob("paused", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) })
	c.setTime(m.Add(5 * time.Second))
	c.syncBarrier("paused")
	if got := c.jobNames(); len(got) != 0 {
		t.Fatalf("jobs %v created while suspended", got)
	}
	// Resuming is a spec change, synced at once: the run of the current
	// minute starts then.
	patch := []byte(`{"spec":{"suspend":false}}`)
	if _, err := c.client.BatchV1().CronJobs("default").Patch(c.ctx, "paused", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitJobs(jobName(cj, m))
}

func TestCronJob_StartingDeadline_SkipsRunsMissedByMoreThanIt(t *testing.T) {
	c := startCluster(t)
	cj, m := c.createCronJob("deadline", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr.To[int64](10) })
	// 30 s after the tick: that run is 20 s past its deadline.
	c.setTime(m.Add(30 * time.Second))
	c.syncBarrier("deadline")
	if got := c.jobNames(); len(got) != 0 {
		t.Fatalf("jobs %v: a run past its starting deadline was started", got)
	}
	next := m.Add(time.Minute)
	c.setTime(next.Add(2 * time.Second))
	c.waitJobs(jobName(cj, next))
	c.eventually("lastScheduleTime "+next.String(), func() bool {
		got := c.cronJob("deadline").Status.LastScheduleTime
		return got != nil && got.Time.Equal(next)
	})
}

func TestCronJob_TooManyMissed_WarnsAndStartsLatest(t *testing.T) {
	c := startCluster(t)
	cj, m := c.createCronJob("late", "* * * * *", nil)
	later := m.Add(5 * time.Hour)
	c.setTime(later.Add(5 * time.Second))
	c.waitJobs(jobName(cj, later))
	c.eventually("a TooManyMissedTimes event", func() bool { return len(c.events.WithReason("TooManyMissedTimes")) > 0 })
}

func TestCronJob_ActiveJobDeletedByHand_DroppedFromActive(t *testing.T) {
	c := startCluster(t)
	cj, m := c.createCronJob("missing", "0 * * * *", nil)
	c.setTime(m.Add(5 * time.Second))
	name := jobName(cj, m)
	c.waitJobs(name)
	c.eventually("the job active", func() bool { return len(c.cronJob("missing").Status.Active) == 1 })
	if err := c.client.BatchV1().Jobs("default").Delete(c.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually("active emptied", func() bool { return len(c.cronJob("missing").Status.Active) == 0 })
	if got := c.jobNames(); len(got) != 0 {
		t.Errorf("jobs %v: the deleted run was started again", got)
	}
}
