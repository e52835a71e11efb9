package job

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
)

const (
	// managedByUs is the spec.managedBy value (or its absence) that makes
	// a job ours; others belong to an external controller.
	managedByUs = "kubernetes.io/job-controller"
	// maxPodChangesPerSync bounds the pods created or deleted in one sync
	// so that one huge job does not starve the others.
	maxPodChangesPerSync = 500
	// maxUncounted bounds status.uncountedTerminatedPods, keeping the job
	// object small (upstream's 500 UIDs, about 20 KB).
	maxUncounted = 500
)

// state is what one sync of a job works from and builds up.
type state struct {
	key  string
	job  *batchv1.Job // a private copy, its status being rewritten
	pods []*corev1.Pod
	// active pods are neither finished nor being deleted.
	active []*corev1.Pod
	// uncountedOK and uncountedFailed are the UIDs status already lists as
	// finished but not yet in the counters.
	uncountedOK, uncountedFailed sets.Set[types.UID]
	// removed are pods whose finalizer this controller removed and the
	// cache may still show: they are already counted.
	removed     sets.Set[types.UID]
	succeeded   int32
	failed      int32
	ready       int32
	terminating int32
	// prevIndexes are the completed indexes in status, indexes those plus
	// the newly succeeded ones (Indexed jobs only).
	prevIndexes, indexes intervals
	// failedIndexes are those in status plus the newly failed ones, for
	// jobs with backoffLimitPerIndex only (nil otherwise); delayed holds
	// per index to retry the failed pod its replacement takes its failure
	// count from.
	failedIndexes *intervals
	delayed       map[int]*corev1.Pod
	// finished is the condition the job is heading for, if any.
	finished *batchv1.JobCondition
	backoff  backoffRecord
	// events wait for the status write that makes them true: a write lost
	// to a conflict is redone, and the event must not be told twice.
	events []pendingEvent
}

type pendingEvent struct{ typ, reason, message string }

func managedElsewhere(job *batchv1.Job) bool {
	return job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != managedByUs
}

func isIndexed(job *batchv1.Job) bool {
	return deref(job.Spec.CompletionMode) == batchv1.IndexedCompletion
}

// syncJob brings one job's pods and status in line with its spec.
func (c *controller) syncJob(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	shared, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.forget(key)
		c.backoff.remove(key)
		return nil
	}
	if err != nil {
		return err
	}
	if managedElsewhere(shared) {
		return nil
	}
	if isFinished(shared) {
		c.backoff.remove(key)
		return nil
	}
	job := shared.DeepCopy()
	if m := deref(job.Spec.CompletionMode); m != "" && m != batchv1.NonIndexedCompletion && m != batchv1.IndexedCompletion {
		c.recorder.Event(job, corev1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return nil
	}
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	// Asked before listing pods: a creation observed after the list would
	// otherwise pass for one the list includes.
	satisfied := c.exp.satisfied(key)
	pods, err := c.claimPods(ctx, job)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	s, newOK, newFailed := c.newState(key, job, pods)
	startChanged := false
	if job.Status.StartTime == nil && !isSuspended(job) {
		t := metav1.NewTime(now)
		job.Status.StartTime = &t
		startChanged = true
	}
	s.backoff = c.backoff.get(key).next(newOK, newFailed)
	c.decideFinished(s, now)

	active := int32(len(s.active))
	suspendChanged := false
	var manageErr error
	if s.finished != nil {
		ready, deleted, err := c.deleteActive(ctx, job, s.active)
		if deleted != active || !satisfied {
			// Pods may remain that the cache has not shown yet.
			s.finished = nil
		}
		active -= deleted
		s.terminating += deleted
		s.ready -= ready
		manageErr = err
	} else {
		managed := false
		if satisfied && job.DeletionTimestamp == nil {
			active, manageErr = c.manage(ctx, s, now)
			managed = true
		}
		if isComplete(job, active, s.succeeded) {
			s.finished = newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods", now)
		} else if managed {
			suspendChanged = c.updateSuspended(s, now)
		}
	}
	needsFlush := suspendChanged || startChanged || active != job.Status.Active ||
		job.Status.Ready == nil || *job.Status.Ready != s.ready ||
		job.Status.Terminating == nil || *job.Status.Terminating != s.terminating
	job.Status.Active = active
	job.Status.Ready = &s.ready
	job.Status.Terminating = &s.terminating
	if err := c.trackStatus(ctx, s, needsFlush, now); err != nil {
		return fmt.Errorf("tracking status: %w", err)
	}
	return manageErr
}

// newState counts the job's pods; it also returns the finished pods not
// yet recorded anywhere in status, for the back-off.
func (c *controller) newState(key string, job *batchv1.Job, pods []*corev1.Pod) (s *state, newOK, newFailed []*corev1.Pod) {
	u := job.Status.UncountedTerminatedPods
	s = &state{
		key: key, job: job, pods: pods,
		uncountedOK:     sets.New(u.Succeeded...),
		uncountedFailed: sets.New(u.Failed...),
		removed:         c.exp.removedFinalizers(key),
	}
	completions := int(deref(job.Spec.Completions))
	for _, p := range pods {
		if isActive(p) {
			s.active = append(s.active, p)
			if isReady(p) {
				s.ready++
			}
		}
		if isTerminating(p) {
			s.terminating++
		}
		// A pod without the finalizer, or listed in status, is counted.
		if !hasTrackingFinalizer(p) || s.removed.Has(p.UID) {
			continue
		}
		if isIndexed(job) {
			if ix := completionIndex(p); ix == noIndex || ix >= completions {
				continue
			}
		}
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !s.uncountedOK.Has(p.UID):
			newOK = append(newOK, p)
		case isPodFailed(p, job) && !s.uncountedFailed.Has(p.UID):
			newFailed = append(newFailed, p)
		}
	}
	s.succeeded = job.Status.Succeeded + int32(len(newOK)+s.uncountedOK.Len())
	counted := 0
	for _, p := range newFailed {
		if matchFailurePolicy(job.Spec.PodFailurePolicy, p).count {
			counted++
		}
	}
	s.failed = job.Status.Failed + int32(counted+s.uncountedFailed.Len())
	return s, newOK, newFailed
}

// decideFinished sets s.finished when the job has met its success or
// failure criteria, and arms the active deadline otherwise.
func (c *controller) decideFinished(s *state, now time.Time) {
	job := s.job
	if cond := findCondition(job.Status.Conditions, batchv1.JobSuccessCriteriaMet); cond != nil && cond.Status == corev1.ConditionTrue {
		s.finished = cond.DeepCopy()
	}
	if s.finished == nil {
		if ft := findCondition(job.Status.Conditions, batchv1.JobFailureTarget); ft != nil && ft.Status == corev1.ConditionTrue {
			s.finished = newCondition(batchv1.JobFailed, ft.Reason, ft.Message, now)
		} else if msg := failJobMessage(job, s.pods); msg != nil {
			s.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, *msg, now)
		}
	}
	if s.finished == nil {
		left, deadline := deadlineLeft(job, now)
		switch {
		case s.failed > deref(job.Spec.BackoffLimit) || pastBackoffLimitOnFailure(job, s.pods):
			s.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now)
		case deadline && left <= 0:
			s.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", now)
		case deadline:
			c.queue.AddAfter(s.key, left)
		}
	}
	if isIndexed(job) {
		s.prevIndexes, s.indexes = succeededIndexes(job, s.pods)
		s.succeeded = int32(s.indexes.total())
		if hasBackoffLimitPerIndex(job) {
			c.decideFailedIndexes(s, now)
		}
		if s.finished == nil {
			if msg, ok := matchSuccessPolicy(job.Spec.SuccessPolicy, int(deref(job.Spec.Completions)), s.indexes); ok {
				s.finished = newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, msg, now)
			}
		}
	}
}

// decideFailedIndexes finds the indexes that failed for good and fails
// the job when too many did, or when every index is done and some failed.
func (c *controller) decideFailedIndexes(s *state, now time.Time) {
	job := s.job
	failed := failedIndexes(job, s.pods)
	s.failedIndexes = &failed
	if s.finished == nil {
		switch {
		case job.Spec.MaxFailedIndexes != nil && failed.total() > int(*job.Spec.MaxFailedIndexes):
			s.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes", now)
		case failed.total() > 0 && failed.total()+s.indexes.total() >= int(deref(job.Spec.Completions)):
			s.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, "Job has failed indexes", now)
		}
	}
	s.delayed = podsWithDelayedRemoval(job, s.pods, s.active, s.indexes, failed)
}

// updateSuspended keeps the Suspended condition in line with
// spec.suspend, reporting whether it changed.
func (c *controller) updateSuspended(s *state, now time.Time) bool {
	job := s.job
	var changed bool
	if isSuspended(job) {
		job.Status.Conditions, changed = setCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
		if changed {
			s.events = append(s.events, pendingEvent{corev1.EventTypeNormal, "Suspended", "Job suspended"})
		}
		return changed
	}
	job.Status.Conditions, changed = setCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
	if changed {
		s.events = append(s.events, pendingEvent{corev1.EventTypeNormal, "Resumed", "Job resumed"})
		// activeDeadlineSeconds counts continuous activity: a resumed job
		// starts afresh, as one created suspended does.
		t := metav1.NewTime(now)
		job.Status.StartTime = &t
	}
	return changed
}

// manage creates or deletes pods towards the wanted number of active
// ones, and returns the new active count. It either creates or deletes in
// one sync, never both.
func (c *controller) manage(ctx context.Context, s *state, now time.Time) (int32, error) {
	job := s.job
	active := int32(len(s.active))
	if isSuspended(job) {
		ready, removed, err := c.deletePods(ctx, s, s.active)
		s.terminating += removed
		s.ready -= ready
		return active - removed, err
	}
	want := wantActive(job, active, s.succeeded)
	rm := podsToRemove(job, s.active, int(max(0, active-want)))
	if len(rm) > maxPodChangesPerSync {
		rm = rm[:maxPodChangesPerSync]
	}
	if len(rm) > 0 {
		ready, removed, err := c.deletePods(ctx, s, rm)
		s.terminating += removed
		s.ready -= ready
		return active - removed, err
	}
	var terminating int32
	busy := s.active
	if onlyReplaceFailed(job) {
		// A pod still shutting down is not replaced before it has failed.
		terminating = s.terminating
		for _, p := range s.pods {
			if isTerminating(p) {
				busy = append(busy, p)
			}
		}
	}
	diff := want - terminating - active
	if diff <= 0 {
		return active, nil
	}
	perIndex := hasBackoffLimitPerIndex(job)
	// With per-index limits each index has its own back-off (below).
	if left := s.backoff.remaining(now, c.cfg.PodFailureBackoff, c.cfg.MaxPodFailureBackoff); left > 0 && !perIndex {
		c.queue.AddAfter(s.key, max(left, c.cfg.SyncBatchPeriod))
		return active, nil
	}
	diff = min(diff, maxPodChangesPerSync)
	var indexes []int
	if isIndexed(job) {
		done := s.indexes
		if s.failedIndexes != nil {
			for _, v := range *s.failedIndexes {
				done = done.add(v)
			}
		}
		indexes = pendingIndexes(done, busy, int(diff), int(deref(job.Spec.Completions)))
		if perIndex {
			var wait time.Duration
			if indexes, wait = readyIndexes(indexes, s.delayed, now, c.cfg.PodFailureBackoff, c.cfg.MaxPodFailureBackoff); wait > 0 {
				c.queue.AddAfter(s.key, max(wait, c.cfg.SyncBatchPeriod))
				return active, nil
			}
		}
		diff = int32(len(indexes))
	}
	created, err := c.createPods(ctx, s, int(diff), indexes)
	return active + created, err
}

// podsToRemove picks at least n active pods to delete, plus for an Indexed
// job the ones with a duplicate or invalid index, least advanced first.
func podsToRemove(job *batchv1.Job, active []*corev1.Pod, n int) []*corev1.Pod {
	var rm []*corev1.Pod
	left := active
	if isIndexed(job) {
		rm, left = surplusIndexedPods(active, int(deref(job.Spec.Completions)))
	}
	if len(rm) >= n {
		return rm
	}
	left = sortedForDeletion(left)
	return append(rm, left[:n-len(rm)]...)
}
