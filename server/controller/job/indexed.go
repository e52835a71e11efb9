package job

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// noIndex marks a pod whose completion index is missing or unreadable.
const noIndex = -1

// interval is a closed range of completion indexes.
type interval struct{ first, last int }

// intervals is a sorted, non-overlapping, non-adjacent list of ranges: the
// form status.completedIndexes takes, so that a job with a hundred thousand
// indexes still has a short status.
type intervals []interval

// parseIntervals reads a "0-3,5,7-9" string, dropping what is malformed or
// not below completions (completions may have been scaled down since).
func parseIntervals(s string, completions int) intervals {
	if s == "" {
		return nil
	}
	var out intervals
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 {
			continue
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil || last < first {
				continue
			}
		}
		if first >= completions {
			continue
		}
		last = min(last, completions-1)
		out = out.add(interval{first, last})
	}
	return out
}

// add merges one range into the list, keeping it normalised.
func (iv intervals) add(n interval) intervals {
	out := make(intervals, 0, len(iv)+1)
	placed := false
	for _, cur := range iv {
		switch {
		case cur.last+1 < n.first:
			out = append(out, cur)
		case n.last+1 < cur.first:
			if !placed {
				out = append(out, n)
				placed = true
			}
			out = append(out, cur)
		default:
			n = interval{min(cur.first, n.first), max(cur.last, n.last)}
		}
	}
	if !placed {
		out = append(out, n)
	}
	return out
}

// withIndexes returns the list with the given indexes added.
func (iv intervals) withIndexes(ixs []int) intervals {
	out := slices.Clone(iv)
	for _, ix := range ixs {
		out = out.add(interval{ix, ix})
	}
	return out
}

func (iv intervals) has(ix int) bool {
	_, found := slices.BinarySearchFunc(iv, ix, func(v interval, ix int) int {
		switch {
		case v.last < ix:
			return -1
		case v.first > ix:
			return 1
		}
		return 0
	})
	return found
}

func (iv intervals) total() int {
	n := 0
	for _, v := range iv {
		n += v.last - v.first + 1
	}
	return n
}

// String formats as upstream does: two neighbours are "4,5", longer runs
// "0-3", so that tools comparing completedIndexes agree with kube.
func (iv intervals) String() string {
	var b strings.Builder
	for _, v := range iv {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v.first))
		switch {
		case v.last == v.first+1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(v.last))
		case v.last > v.first:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(v.last))
		}
	}
	return b.String()
}

// completionIndex is the index of a pod of an Indexed job, from its
// annotation (or label, which newer pods also carry).
func completionIndex(p *corev1.Pod) int {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		v, ok = p.Labels[batchv1.JobCompletionIndexAnnotation]
	}
	if !ok {
		return noIndex
	}
	ix, err := strconv.Atoi(v)
	if err != nil || ix < 0 {
		return noIndex
	}
	return ix
}

// succeededIndexes returns the indexes already in status and those plus
// the indexes of succeeded pods not yet counted (they still carry the
// tracking finalizer).
func succeededIndexes(job *batchv1.Job, pods []*corev1.Pod) (prev, all intervals) {
	completions := int(deref(job.Spec.Completions))
	prev = parseIntervals(job.Status.CompletedIndexes, completions)
	found := sets.New[int]()
	for _, p := range pods {
		ix := completionIndex(p)
		if p.Status.Phase == corev1.PodSucceeded && ix != noIndex && ix < completions && hasTrackingFinalizer(p) {
			found.Insert(ix)
		}
	}
	return prev, prev.withIndexes(sets.List(found))
}

// pendingIndexes returns up to count indexes below completions that have
// neither succeeded nor a pod working on them, lowest first.
func pendingIndexes(succeeded intervals, busy []*corev1.Pod, count, completions int) []int {
	if count <= 0 {
		return nil
	}
	taken := succeeded
	for _, p := range busy {
		if ix := completionIndex(p); ix != noIndex {
			taken = taken.add(interval{ix, ix})
		}
	}
	var out []int
	candidate := 0
	for _, v := range taken {
		for ; candidate < completions && len(out) < count && candidate < v.first; candidate++ {
			out = append(out, candidate)
		}
		candidate = max(candidate, v.last+1)
	}
	for ; candidate < completions && len(out) < count; candidate++ {
		out = append(out, candidate)
	}
	return out
}

// surplusIndexedPods picks the active pods of an Indexed job that must go
// whatever the parallelism: pods without a valid index, with an index at
// or beyond completions, and all but the most advanced pod of an index
// that has several.
func surplusIndexedPods(active []*corev1.Pod, completions int) (rm, keep []*corev1.Pod) {
	byIndex := map[int][]*corev1.Pod{}
	for _, p := range active {
		ix := completionIndex(p)
		if ix == noIndex || ix >= completions {
			rm = append(rm, p)
			continue
		}
		byIndex[ix] = append(byIndex[ix], p)
	}
	for _, ix := range slices.Sorted(maps.Keys(byIndex)) {
		group := byIndex[ix]
		slices.SortStableFunc(group, deletionOrder)
		rm = append(rm, group[:len(group)-1]...)
		keep = append(keep, group[len(group)-1])
	}
	return rm, keep
}

// indexedGenerateName is "<job>-<index>-", with the job name cut so that
// the generated name stays a valid DNS label.
func indexedGenerateName(job string, ix int) string {
	suffix := fmt.Sprintf("-%d-", ix)
	const maxGenerated = 63 - 5 // the server appends five random characters
	if len(job)+len(suffix) > maxGenerated {
		job = job[:maxGenerated-len(suffix)]
	}
	return job + suffix
}

// addIndexEnv gives every container JOB_COMPLETION_INDEX from the pod's
// annotation, unless the user already set that variable.
func addIndexEnv(spec *corev1.PodSpec) {
	add := func(cs []corev1.Container) {
		for i := range cs {
			c := &cs[i]
			if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == indexEnvName }) {
				continue
			}
			c.Env = append(c.Env, corev1.EnvVar{Name: indexEnvName, ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.annotations['%s']", batchv1.JobCompletionIndexAnnotation)},
			}})
		}
	}
	add(spec.InitContainers)
	add(spec.Containers)
}

const indexEnvName = "JOB_COMPLETION_INDEX"
