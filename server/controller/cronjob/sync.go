package cronjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// pendingEvents describe status changes. They are recorded only once the
// status is written: a write lost to a conflict is redone by the retry,
// which would tell them a second time.
type pendingEvents []corev1.Event

func (p *pendingEvents) add(typ, reason, message string) {
	*p = append(*p, corev1.Event{Type: typ, Reason: reason, Message: message})
}

func (p pendingEvents) emit(r record.EventRecorder, cj *batchv1.CronJob) {
	for _, e := range p {
		r.Event(cj, e.Type, e.Reason, e.Message)
	}
}

// errStaleCache asks for a retry once the informer has caught up.
var errStaleCache = errors.New("cronjob cache is older than its last status update")

// sync reconciles one CronJob and returns when to look at it again (nil:
// only on the next change, e.g. while suspended).
func (c *controller) sync(ctx context.Context, key string) (*time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, nil
	}
	shared, err := c.cronJobs.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	all, err := c.jobs.Jobs(ns).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	// Jobs are found by owner, not by label: the template's labels may
	// have changed since they were created.
	var jobs []*batchv1.Job
	for _, j := range all {
		if metav1.IsControlledBy(j, shared) {
			jobs = append(jobs, j)
		}
	}
	cj := shared.DeepCopy()
	cleaned := c.cleanupFinished(ctx, cj, jobs)
	var later pendingEvents
	requeue, changed, syncErr := c.syncCronJob(ctx, cj, jobs, &later)
	if cleaned || changed {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("update status: %w", err)
		}
	}
	later.emit(c.recorder, cj)
	if requeue != nil {
		return requeue, nil
	}
	return nil, syncErr
}

// syncCronJob updates the active list from the jobs, then starts the job
// of the most recent unmet schedule time if the policy allows. It returns
// the requeue delay and whether status changed.
func (c *controller) syncCronJob(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, later *pendingEvents) (*time.Duration, bool, error) {
	now := c.clock.Now()
	changed, err := c.reconcileActive(ctx, cj, jobs, later)
	if err != nil {
		return nil, changed, err
	}
	if cj.DeletionTimestamp != nil {
		return nil, changed, nil
	}
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil {
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return nil, changed, nil
		}
	}
	if deref(cj.Spec.Suspend) {
		return nil, changed, nil
	}
	if hasTZPrefix(cj.Spec.Schedule) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnsupportedSchedule", "CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule)
	}
	sched, err := parseSchedule(cj)
	if err != nil {
		// A user error: nothing to retry until the spec changes.
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return nil, changed, nil
	}
	scheduled, m, err := nextScheduleTime(cj, now, sched)
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return nil, changed, nil
	}
	if m == manyMissed {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	next := untilNext(cj, now, sched)
	if scheduled == nil {
		return &next, changed, nil
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(now) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return &next, changed, nil
	}
	name := jobName(cj, *scheduled)
	if slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.Name == name }) ||
		(cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(*scheduled)) {
		return &next, changed, nil
	}
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(cj.Status.Active) > 0 {
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
			return &next, changed, nil
		}
	case batchv1.ReplaceConcurrent:
		for _, ref := range slices.Clone(cj.Status.Active) {
			if err := c.deleteJob(ctx, cj, ref.Namespace, ref.Name, ref.UID); err != nil {
				return nil, changed, fmt.Errorf("replace job %s: %w", ref.Name, err)
			}
			changed = true
		}
	}
	created, err := c.createJob(ctx, cj, *scheduled)
	if err != nil || created == nil {
		return nil, changed, err
	}
	if !slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == created.UID }) {
		cj.Status.Active = append(cj.Status.Active, jobRef(created))
	}
	cj.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
	return &next, true, nil
}

// reconcileActive drops finished and vanished jobs from status.active and
// keeps lastSuccessfulTime current.
func (c *controller) reconcileActive(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, later *pendingEvents) (bool, error) {
	changed := false
	children := map[types.UID]bool{}
	for _, j := range jobs {
		children[j.UID] = true
		active := slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == j.UID })
		cond, finished := finishedCondition(j)
		switch {
		case !active && !finished:
			// Created before a status update that was lost, or by hand.
			fresh, err := c.client.BatchV1().CronJobs(cj.Namespace).Get(ctx, cj.Name, metav1.GetOptions{})
			if err != nil {
				return changed, fmt.Errorf("recheck cronjob: %w", err)
			}
			if slices.ContainsFunc(fresh.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == j.UID }) {
				// Our cache lags our own status update: acting on it
				// would redo that run. Retry once it has caught up.
				return changed, errStaleCache
			}
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case active && finished:
			cj.Status.Active = slices.DeleteFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == j.UID })
			later.add(corev1.EventTypeNormal, "SawCompletedJob", fmt.Sprintf("Saw completed job: %s, condition: %v", j.Name, cond))
			changed = true
		}
		if cond == batchv1.JobComplete && j.Status.CompletionTime != nil &&
			(cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time)) {
			cj.Status.LastSuccessfulTime = j.Status.CompletionTime.DeepCopy()
			changed = true
		}
	}
	for _, ref := range slices.Clone(cj.Status.Active) {
		if children[ref.UID] {
			continue
		}
		// The cache may just lag; only the API server can say it is gone.
		_, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			later.add(corev1.EventTypeNormal, "MissingJob", fmt.Sprintf("Active job went missing: %v", ref.Name))
			cj.Status.Active = slices.DeleteFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == ref.UID })
			changed = true
		case err != nil:
			return changed, fmt.Errorf("get active job %s: %w", ref.Name, err)
		}
	}
	return changed, nil
}

// createJob creates the job of a schedule time. A job of that name that
// exists already is ours when we own it (a previous status update was
// lost) and someone else's otherwise: then nil is returned and nothing done.
func (c *controller) createJob(ctx context.Context, cj *batchv1.CronJob, scheduled time.Time) (*batchv1.Job, error) {
	req, err := jobFromTemplate(cj, scheduled)
	if err != nil {
		return nil, err
	}
	job, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, req, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err
	case apierrors.IsAlreadyExists(err):
		existing, err := c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get existing job: %w", err)
		}
		if !metav1.IsControlledBy(existing, cj) {
			return nil, nil
		}
		return existing, nil
	case err != nil:
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return nil, fmt.Errorf("create job: %w", err)
	}
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", job.Name)
	return job, nil
}

// deleteJob deletes a job of the CronJob (its pods go with it, in the
// background) and drops it from the active list.
func (c *controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, namespace, name string, uid types.UID) error {
	background := metav1.DeletePropagationBackground
	err := c.client.BatchV1().Jobs(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		return err
	}
	cj.Status.Active = slices.DeleteFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == uid })
	if err == nil {
		c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", name)
	}
	return nil
}

// cleanupFinished deletes the oldest finished jobs beyond the history
// limits, and reports whether status changed.
func (c *controller) cleanupFinished(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) bool {
	var ok, failed []*batchv1.Job
	for _, j := range jobs {
		switch cond, _ := finishedCondition(j); cond {
		case batchv1.JobComplete:
			ok = append(ok, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	changed := false
	for _, group := range []struct {
		jobs  []*batchv1.Job
		limit *int32
	}{{ok, cj.Spec.SuccessfulJobsHistoryLimit}, {failed, cj.Spec.FailedJobsHistoryLimit}} {
		if group.limit == nil {
			continue
		}
		for _, j := range oldestBeyond(group.jobs, int(*group.limit)) {
			if j.DeletionTimestamp != nil {
				continue
			}
			if err := c.deleteJob(ctx, cj, j.Namespace, j.Name, j.UID); err != nil {
				c.log.Warn("delete old job", "cronjob", cj.Namespace+"/"+cj.Name, "job", j.Name, "err", err)
				continue
			}
			changed = true
		}
	}
	return changed
}

// oldestBeyond returns the jobs to delete so that limit remain: the
// oldest by start time; jobs that never started count as the newest.
func oldestBeyond(jobs []*batchv1.Job, limit int) []*batchv1.Job {
	n := len(jobs) - max(limit, 0)
	if n <= 0 {
		return nil
	}
	sorted := slices.Clone(jobs)
	slices.SortStableFunc(sorted, func(a, b *batchv1.Job) int {
		sa, sb := a.Status.StartTime, b.Status.StartTime
		switch {
		case sa == nil && sb != nil:
			return 1
		case sa != nil && sb == nil:
			return -1
		case sa != nil && !sa.Equal(sb):
			return sa.Compare(sb.Time)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return sorted[:n]
}

// finishedCondition is Complete or Failed for a finished job.
func finishedCondition(j *batchv1.Job) (batchv1.JobConditionType, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type, true
		}
	}
	return "", false
}

func jobRef(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{
		Kind: "Job", APIVersion: "batch/v1", Namespace: j.Namespace, Name: j.Name,
		UID: j.UID, ResourceVersion: j.ResourceVersion,
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
