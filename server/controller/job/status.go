package job

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// trackStatus records finished pods and the job's outcome, in the order
// that makes the counters exact across crashes and stale caches:
//
//  1. finished pods still holding the finalizer are added by UID to
//     status.uncountedTerminatedPods, and that status is written;
//  2. their finalizers are removed;
//  3. those whose removal succeeded move from the UID lists to the
//     succeeded/failed counters, and that is written;
//  4. once nothing is uncounted and no pod is terminating, the
//     SuccessCriteriaMet/FailureTarget condition becomes Complete/Failed.
//
// A pod is in exactly one place at any time: with its finalizer (not
// counted), in the UID list, or in a counter.
func (c *controller) trackStatus(ctx context.Context, s *state, needsFlush bool, now time.Time) error {
	job := s.job
	withFinalizer := sets.New[types.UID]()
	for _, p := range s.pods {
		if hasTrackingFinalizer(p) && !s.removed.Has(p.UID) {
			withFinalizer.Insert(p.UID)
		}
	}
	if moveUncountedToCounters(&job.Status, withFinalizer) {
		needsFlush = true
	}
	toRelease, newIndexes, full, recorded := c.recordFinishedPods(s, withFinalizer)
	needsFlush = needsFlush || recorded
	if isIndexed(job) {
		s.indexes = s.indexes.withIndexes(newIndexes)
		if str := s.indexes.String(); str != job.Status.CompletedIndexes {
			job.Status.CompletedIndexes = str
			needsFlush = true
		}
		job.Status.Succeeded = int32(s.indexes.total())
		var failedStr *string
		if s.failedIndexes != nil {
			failedStr = new(s.failedIndexes.String())
		}
		if deref(failedStr) != deref(job.Status.FailedIndexes) || (failedStr == nil) != (job.Status.FailedIndexes == nil) {
			job.Status.FailedIndexes = failedStr
			needsFlush = true
		}
	}
	if s.addInterimCondition(now) {
		needsFlush = true
	}
	needsFlush, err := c.flushAndRelease(ctx, s, toRelease, withFinalizer, needsFlush)
	if err != nil {
		return err
	}
	done := !full && c.enactFinished(s, now)
	if !needsFlush && !done {
		return nil
	}
	if s.job, err = c.updateStatus(ctx, s.job); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	c.emit(s)
	if done {
		c.recordFinished(s.job, s.finished)
	}
	return nil
}

// recordFinishedPods picks the pods whose finalizer can go and adds those
// that finished to status: by UID in uncountedTerminatedPods, or for a
// succeeded pod of an Indexed job as its index (returned, the index itself
// guarding against counting twice). full says the UID lists reached their
// bound and the rest waits for the next sync, which the updates trigger.
func (c *controller) recordFinishedPods(s *state, withFinalizer sets.Set[types.UID]) (toRelease []*corev1.Pod, newIndexes []int, full, changed bool) {
	job := s.job
	indexed := isIndexed(job)
	completions := int(deref(job.Spec.Completions))
	pods := s.pods
	if indexed {
		// Completed indexes are added lowest first.
		pods = slices.Clone(pods)
		slices.SortStableFunc(pods, func(a, b *corev1.Pod) int { return completionIndex(a) - completionIndex(b) })
	}
	uncounted := job.Status.UncountedTerminatedPods
	for _, p := range pods {
		if !withFinalizer.Has(p.UID) {
			continue
		}
		failed := isPodFailed(p, job)
		if !c.canRemoveFinalizer(s, p, failed) {
			continue
		}
		toRelease = append(toRelease, p)
		ix := completionIndex(p)
		validIx := !indexed || (ix != noIndex && ix < completions)
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !s.uncountedFailed.Has(p.UID):
			if indexed {
				if validIx && !s.prevIndexes.has(ix) {
					newIndexes = append(newIndexes, ix)
					changed = true
				}
			} else if !s.uncountedOK.Has(p.UID) {
				uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
				changed = true
			}
		case failed || (s.finished != nil && s.finished.Type != batchv1.JobSuccessCriteriaMet):
			// A failing job counts every pod it stops as failed.
			if !s.uncountedFailed.Has(p.UID) && validIx && matchFailurePolicy(job.Spec.PodFailurePolicy, p).count {
				uncounted.Failed = append(uncounted.Failed, p.UID)
				changed = true
			}
		}
		if len(newIndexes)+len(uncounted.Succeeded)+len(uncounted.Failed) >= maxUncounted {
			return toRelease, newIndexes, true, changed
		}
	}
	return toRelease, newIndexes, false, changed
}

// addInterimCondition records FailureTarget or SuccessCriteriaMet before
// any finalizer goes, so that the outcome survives a crash, and turns
// s.finished into the Failed or Complete condition that follows once all
// is counted. It reports whether status changed.
func (s *state) addInterimCondition(now time.Time) bool {
	job := s.job
	switch {
	case s.finished == nil:
		return false
	case s.finished.Type == batchv1.JobFailureTarget:
		job.Status.Conditions = append(job.Status.Conditions, *s.finished)
		s.finished = newCondition(batchv1.JobFailed, s.finished.Reason, s.finished.Message, now)
		return true
	case s.finished.Type == batchv1.JobSuccessCriteriaMet:
		added := false
		if !hasTrueCondition(job, batchv1.JobSuccessCriteriaMet) {
			job.Status.Conditions = append(job.Status.Conditions, *s.finished)
			added = true
		}
		s.finished = newCondition(batchv1.JobComplete, s.finished.Reason, s.finished.Message, now)
		return added
	}
	return false
}

// canRemoveFinalizer: a pod is released once its outcome is known, or as
// soon as the whole job is ending.
func (c *controller) canRemoveFinalizer(s *state, p *corev1.Pod, failed bool) bool {
	if s.job.DeletionTimestamp != nil || s.finished != nil || p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if !failed {
		return false
	}
	// The failed pod whose failure count its replacement must learn stays
	// until that replacement exists.
	if d, ok := s.delayed[completionIndex(p)]; ok && d.UID == p.UID {
		return false
	}
	return true
}

// flushAndRelease writes the status holding the new uncounted UIDs, then
// removes the finalizers of the pods they name, and moves those that lost
// it into the counters. It returns whether status has unwritten changes.
func (c *controller) flushAndRelease(ctx context.Context, s *state, pods []*corev1.Pod, withFinalizer sets.Set[types.UID], needsFlush bool) (bool, error) {
	if needsFlush {
		job, err := c.updateStatus(ctx, s.job)
		if err != nil {
			return needsFlush, fmt.Errorf("add uncounted pods to status: %w", err)
		}
		s.job = job
		c.emit(s)
		// Only once status holds the new pods is the back-off told of
		// them: a failed write leaves them new for the next sync.
		c.backoff.set(s.key, s.backoff)
		needsFlush = false
	}
	var rmErr error
	if len(pods) > 0 {
		var ok []bool
		ok, rmErr = c.removeFinalizers(ctx, s.key, pods)
		for i, p := range pods {
			if ok[i] {
				withFinalizer.Delete(p.UID)
			}
		}
	}
	if moveUncountedToCounters(&s.job.Status, withFinalizer) {
		needsFlush = true
	}
	if rmErr != nil && needsFlush {
		// Keep what was achieved before reporting the failure.
		if job, err := c.updateStatus(ctx, s.job); err == nil {
			s.job = job
			c.emit(s)
			needsFlush = false
		}
	}
	return needsFlush, rmErr
}

// moveUncountedToCounters moves the UIDs of pods that no longer hold the
// finalizer from status.uncountedTerminatedPods to the counters.
func moveUncountedToCounters(st *batchv1.JobStatus, withFinalizer sets.Set[types.UID]) bool {
	u := st.UncountedTerminatedPods
	keep := func(uids []types.UID) []types.UID {
		var out []types.UID
		for _, uid := range uids {
			if withFinalizer.Has(uid) {
				out = append(out, uid)
			}
		}
		return out
	}
	changed := false
	if k := keep(u.Succeeded); len(k) != len(u.Succeeded) {
		st.Succeeded += int32(len(u.Succeeded) - len(k))
		u.Succeeded = k
		changed = true
	}
	if k := keep(u.Failed); len(k) != len(u.Failed) {
		st.Failed += int32(len(u.Failed) - len(k))
		u.Failed = k
		changed = true
	}
	return changed
}

// enactFinished sets Complete or Failed once every pod is counted and
// none is still terminating, so that whoever waits for the condition
// finds the pods gone.
func (c *controller) enactFinished(s *state, now time.Time) bool {
	if s.finished == nil {
		return false
	}
	job := s.job
	if u := job.Status.UncountedTerminatedPods; len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if s.terminating > 0 {
		return false
	}
	f := s.finished
	job.Status.Conditions, _ = setCondition(job.Status.Conditions, f.Type, corev1.ConditionTrue, f.Reason, f.Message, now)
	if f.Type == batchv1.JobComplete {
		t := metav1.NewTime(now)
		if cond := findCondition(job.Status.Conditions, batchv1.JobComplete); cond != nil {
			t = cond.LastTransitionTime
		}
		job.Status.CompletionTime = &t
	}
	return true
}

// emit records the events of a status just written.
func (c *controller) emit(s *state) {
	for _, e := range s.events {
		c.recorder.Event(s.job, e.typ, e.reason, e.message)
	}
	s.events = nil
}

func (c *controller) recordFinished(job *batchv1.Job, cond *batchv1.JobCondition) {
	if cond.Type != batchv1.JobComplete {
		c.recorder.Event(job, corev1.EventTypeWarning, cond.Reason, cond.Message)
		return
	}
	if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
		c.recorder.Event(job, corev1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
	}
	c.recorder.Event(job, corev1.EventTypeNormal, "Completed", "Job completed")
}

func (c *controller) updateStatus(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	out, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err != nil {
		return job, err
	}
	if out.Status.UncountedTerminatedPods == nil {
		out.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	return out, nil
}
