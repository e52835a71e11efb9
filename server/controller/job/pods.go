package job

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// legacy label keys, which upstream still puts on job pods so that older
// tooling selecting on them keeps working.
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

var jobKind = batchv1.SchemeGroupVersion.WithKind("Job")

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func hasTrackingFinalizer(p *corev1.Pod) bool {
	return slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer)
}

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// isActive is upstream's notion: running or about to, and not going away.
func isActive(p *corev1.Pod) bool {
	return !isTerminal(p) && p.DeletionTimestamp == nil
}

// isTerminating is a deleted pod whose containers may still be running.
func isTerminating(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && !isTerminal(p)
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// onlyReplaceFailed says whether a terminating pod waits for its terminal
// phase before counting as failed and being replaced. A pod failure
// policy implies it: the policy needs the final exit codes.
func onlyReplaceFailed(job *batchv1.Job) bool {
	return deref(job.Spec.PodReplacementPolicy) == batchv1.Failed || job.Spec.PodFailurePolicy != nil
}

// isPodFailed counts a deleted, unfinished pod as failed unless the job
// only replaces truly failed pods: an orphaned pod (its node gone) may
// never reach the Failed phase.
func isPodFailed(p *corev1.Pod, job *batchv1.Job) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if onlyReplaceFailed(job) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

var phaseOrder = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// deletionOrder sorts the pods least worth keeping first, as upstream's
// ActivePods does: unscheduled, then earlier phases, not ready, most
// restarted, and newest.
func deletionOrder(a, b *corev1.Pod) int {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		if a.Spec.NodeName == "" {
			return -1
		}
		return 1
	}
	if pa, pb := phaseOrder[a.Status.Phase], phaseOrder[b.Status.Phase]; pa != pb {
		return pa - pb
	}
	if ra, rb := isReady(a), isReady(b); ra != rb {
		if !ra {
			return -1
		}
		return 1
	}
	if ra, rb := maxRestarts(a), maxRestarts(b); ra != rb {
		if ra > rb {
			return -1
		}
		return 1
	}
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	switch {
	case ta.Equal(tb):
		return 0
	case ta.IsZero() || ta.After(tb):
		return -1
	}
	return 1
}

// sortedForDeletion is a sorted copy, least worth keeping first.
func sortedForDeletion(pods []*corev1.Pod) []*corev1.Pod {
	out := slices.Clone(pods)
	slices.SortStableFunc(out, deletionOrder)
	return out
}

func maxRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}

// finishedTime estimates when a pod ended, for the failure back-off: the
// last container exit, else when it stopped being ready, else its deletion,
// else (no kubelet ever reported) its creation.
func finishedTime(p *corev1.Pod) time.Time {
	var last time.Time
	complete := len(p.Status.ContainerStatuses) > 0
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Terminated == nil || c.State.Terminated.FinishedAt.IsZero() {
			complete = false
			break
		}
		if t := c.State.Terminated.FinishedAt.Time; t.After(last) {
			last = t
		}
	}
	if complete {
		return last
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.DeletionTimestamp != nil {
		return p.DeletionTimestamp.Add(-time.Duration(deref(p.DeletionGracePeriodSeconds)) * time.Second)
	}
	return p.CreationTimestamp.Time
}

// newPod builds a pod of the job from its template; ix is the completion
// index for Indexed jobs, noIndex otherwise.
func newPod(job *batchv1.Job, ix int) *corev1.Pod {
	t := job.Spec.Template.DeepCopy()
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range map[string]string{
		batchv1.ControllerUidLabel: string(job.UID), legacyControllerUIDLabel: string(job.UID),
		batchv1.JobNameLabel: job.Name, legacyJobNameLabel: job.Name,
	} {
		if _, ok := labels[k]; !ok && len(v) <= 63 {
			labels[k] = v
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Namespace:       job.Namespace,
			Labels:          labels,
			Annotations:     maps.Clone(t.Annotations),
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, jobKind)},
		},
		Spec: t.Spec,
	}
	if !slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer) {
		pod.Finalizers = append(pod.Finalizers, batchv1.JobTrackingFinalizer)
	}
	if ix == noIndex {
		return pod
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	v := strconv.Itoa(ix)
	pod.Annotations[batchv1.JobCompletionIndexAnnotation] = v
	pod.Labels[batchv1.JobCompletionIndexAnnotation] = v
	pod.Spec.Hostname = job.Name + "-" + v
	pod.GenerateName = indexedGenerateName(job.Name, ix)
	addIndexEnv(&pod.Spec)
	return pod
}

// removeFinalizerPatch is a strategic merge patch dropping only the
// tracking finalizer, so that finalizers others add meanwhile survive.
func removeFinalizerPatch() []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"$deleteFromPrimitiveList/finalizers": []string{batchv1.JobTrackingFinalizer},
	}})
	return b
}
