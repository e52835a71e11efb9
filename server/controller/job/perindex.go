package job

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Indexed jobs with spec.backoffLimitPerIndex count failures per index
// instead of for the whole job: each pod carries in an annotation how many
// earlier pods of its index failed, an index whose failures pass the limit
// (or whose pod matched a FailIndex rule) is listed in status.failedIndexes
// and not run again, and the job fails once more indexes failed than
// maxFailedIndexes allows, or once every index has either succeeded or
// failed.

func hasBackoffLimitPerIndex(job *batchv1.Job) bool {
	return isIndexed(job) && job.Spec.BackoffLimitPerIndex != nil
}

// annotationCount reads a non-negative count annotation; what is missing
// or malformed counts as 0, as upstream.
func annotationCount(p *corev1.Pod, key string) int32 {
	v, ok := p.Annotations[key]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// indexFailureCount is how many earlier pods of the pod's index failed
// and counted.
func indexFailureCount(p *corev1.Pod) int32 {
	return annotationCount(p, batchv1.JobIndexFailureCountAnnotation)
}

// indexAbsoluteFailureCount adds the failures a policy ignored: they
// still lengthen the index's back-off.
func indexAbsoluteFailureCount(p *corev1.Pod) int32 {
	return indexFailureCount(p) + annotationCount(p, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

// isIndexFailed: the pod failed and either matched a FailIndex rule, or
// counted and its index has used up its back-off limit.
func isIndexFailed(job *batchv1.Job, p *corev1.Pod) bool {
	if !isPodFailed(p, job) {
		return false
	}
	m := matchFailurePolicy(job.Spec.PodFailurePolicy, p)
	if m.failIndex {
		return true
	}
	return m.count && indexFailureCount(p) >= deref(job.Spec.BackoffLimitPerIndex)
}

// failedIndexes are the indexes in status.failedIndexes plus those of
// failed pods not yet counted (still holding the finalizer).
func failedIndexes(job *batchv1.Job, pods []*corev1.Pod) intervals {
	completions := int(deref(job.Spec.Completions))
	var prev intervals
	if job.Status.FailedIndexes != nil {
		prev = parseIntervals(*job.Status.FailedIndexes, completions)
	}
	found := sets.New[int]()
	for _, p := range pods {
		ix := completionIndex(p)
		if ix != noIndex && ix < completions && hasTrackingFinalizer(p) && isIndexFailed(job, p) {
			found.Insert(ix)
		}
	}
	return prev.withIndexes(sets.List(found))
}

// podsWithDelayedRemoval picks, per index still to be retried, the failed
// pod its replacement learns its failure count from: that pod keeps its
// finalizer (and so stays readable) until the replacement exists.
func podsWithDelayedRemoval(job *batchv1.Job, pods, active []*corev1.Pod, succeeded, failed intervals) map[int]*corev1.Pod {
	completions := int(deref(job.Spec.Completions))
	busy := sets.New[int]()
	for _, p := range active {
		busy.Insert(completionIndex(p))
	}
	out := map[int]*corev1.Pod{}
	for _, p := range pods {
		if !hasTrackingFinalizer(p) || !isPodFailed(p, job) {
			continue
		}
		ix := completionIndex(p)
		if ix == noIndex || ix >= completions || succeeded.has(ix) || failed.has(ix) || busy.Has(ix) {
			continue
		}
		last, ok := out[ix]
		if !ok || (indexAbsoluteFailureCount(last) <= indexAbsoluteFailureCount(p) && !finishedTime(p).Before(finishedTime(last))) {
			out[ix] = p
		}
	}
	return out
}

// newIndexFailureCounts are the annotations of a pod replacing the failed
// pod replaced (nil for an index's first pod).
func newIndexFailureCounts(job *batchv1.Job, replaced *corev1.Pod) (failures, ignored int32) {
	if replaced == nil {
		return 0, 0
	}
	failures, ignored = indexFailureCount(replaced), annotationCount(replaced, batchv1.JobIndexIgnoredFailureCountAnnotation)
	if matchFailurePolicy(job.Spec.PodFailurePolicy, replaced).count {
		failures++
	} else {
		ignored++
	}
	return failures, ignored
}

// annotateIndexFailures writes the failure counts on a new pod of a job
// with per-index back-off.
func annotateIndexFailures(pod *corev1.Pod, job *batchv1.Job, replaced *corev1.Pod) {
	failures, ignored := newIndexFailureCounts(job, replaced)
	pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failures))
	if ignored > 0 {
		pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
	}
}

// readyIndexes keeps the indexes whose back-off has passed; when none has,
// it returns the shortest wait left.
func readyIndexes(indexes []int, delayed map[int]*corev1.Pod, now time.Time, base, limit time.Duration) ([]int, time.Duration) {
	var out []int
	var wait time.Duration
	for _, ix := range indexes {
		left := time.Duration(0)
		if p := delayed[ix]; p != nil {
			r := backoffRecord{failuresAfterSuccess: indexAbsoluteFailureCount(p) + 1, lastFailure: finishedTime(p)}
			left = r.remaining(now, base, limit)
		}
		if left == 0 {
			out = append(out, ix)
		} else if wait == 0 || left < wait {
			wait = left
		}
	}
	if len(out) > 0 {
		return out, 0
	}
	return nil, wait
}
