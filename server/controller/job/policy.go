package job

import (
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// failurePolicyMatch is what a job's pod failure policy says about one
// failed pod: whether it counts towards backoffLimit, and the message to
// fail the job with when a FailJob rule matched.
type failurePolicyMatch struct {
	count   bool
	failJob *string
	// failIndex: a FailIndex rule matched; the index fails at once
	// (validation allows the action only with backoffLimitPerIndex).
	failIndex bool
}

// matchFailurePolicy applies the first matching rule, as upstream does.
func matchFailurePolicy(policy *batchv1.PodFailurePolicy, p *corev1.Pod) failurePolicyMatch {
	if policy == nil {
		return failurePolicyMatch{count: true}
	}
	for i, rule := range policy.Rules {
		var msg string
		switch {
		case rule.OnExitCodes != nil:
			c := matchExitCodes(p, rule.OnExitCodes)
			if c == nil {
				continue
			}
			msg = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				c.Name, p.Namespace, p.Name, c.State.Terminated.ExitCode, rule.Action, i)
		case len(rule.OnPodConditions) > 0:
			c := matchPodConditions(p, rule.OnPodConditions)
			if c == nil {
				continue
			}
			msg = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d", p.Namespace, p.Name, c.Type, rule.Action, i)
		default:
			continue
		}
		switch rule.Action {
		case batchv1.PodFailurePolicyActionIgnore:
			return failurePolicyMatch{}
		case batchv1.PodFailurePolicyActionFailJob:
			return failurePolicyMatch{count: true, failJob: &msg}
		case batchv1.PodFailurePolicyActionFailIndex:
			return failurePolicyMatch{count: true, failIndex: true}
		default:
			return failurePolicyMatch{count: true}
		}
	}
	return failurePolicyMatch{count: true}
}

// matchExitCodes finds a container (regular first, then init) that exited
// non-zero with a code the requirement selects.
func matchExitCodes(p *corev1.Pod, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range list {
			c := &list[i]
			t := c.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != c.Name) {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			if (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && in) || (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && !in) {
				return c
			}
		}
	}
	return nil
}

func matchPodConditions(p *corev1.Pod, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		for _, pat := range patterns {
			status := pat.Status
			if status == "" {
				status = corev1.ConditionTrue
			}
			if c.Type == pat.Type && c.Status == status {
				return c
			}
		}
	}
	return nil
}

// failJobMessage is the message of the first failed pod that a FailJob
// rule matches, if any.
func failJobMessage(job *batchv1.Job, pods []*corev1.Pod) *string {
	if job.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range pods {
		if isPodFailed(p, job) {
			if m := matchFailurePolicy(job.Spec.PodFailurePolicy, p); m.failJob != nil {
				return m.failJob
			}
		}
	}
	return nil
}

// matchSuccessPolicy reports whether the succeeded indexes satisfy a rule
// of an Indexed job's success policy, and which.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int, succeeded intervals) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		want, got := 0, 0
		if rule.SucceededIndexes != nil {
			ruleIx := parseIntervals(*rule.SucceededIndexes, completions)
			want = ruleIx.total()
			got = overlap(ruleIx, succeeded)
		} else {
			got = succeeded.total()
		}
		if rule.SucceededCount != nil {
			want = int(*rule.SucceededCount)
		}
		if want > 0 && got >= want {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// overlap counts the indexes in both lists.
func overlap(a, b intervals) int {
	n := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		if o := min(a[i].last, b[j].last) - max(a[i].first, b[j].first) + 1; o > 0 {
			n += o
		}
		if b[j].last < a[i].last {
			j++
		} else {
			i++
		}
	}
	return n
}

// pastBackoffLimitOnFailure counts container restarts of pods the kubelet
// restarts in place (restartPolicy OnFailure): those failures never show
// as failed pods.
func pastBackoffLimitOnFailure(job *batchv1.Job, pods []*corev1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, c := range p.Status.InitContainerStatuses {
			restarts += c.RestartCount
		}
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
	}
	limit := deref(job.Spec.BackoffLimit)
	if limit == 0 {
		return restarts > 0
	}
	return restarts >= limit
}

// deadlineLeft is the time left before activeDeadlineSeconds; ok is false
// when no deadline runs (none set, not started, or suspended).
func deadlineLeft(job *batchv1.Job, now time.Time) (left time.Duration, ok bool) {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || isSuspended(job) {
		return 0, false
	}
	return time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - now.Sub(job.Status.StartTime.Time), true
}

// wantActive is how many pods should run: parallelism, capped by the
// completions still missing; for a work queue (no completions) nothing new
// starts once one pod has succeeded.
func wantActive(job *batchv1.Job, active, succeeded int32) int32 {
	parallelism := deref(job.Spec.Parallelism)
	if job.Spec.Completions == nil {
		if succeeded > 0 {
			return active
		}
		return parallelism
	}
	return max(0, min(*job.Spec.Completions-succeeded, parallelism))
}

// isComplete: with completions, that many successes and nothing running;
// without, any success once every pod has stopped.
func isComplete(job *batchv1.Job, active, succeeded int32) bool {
	if active != 0 {
		return false
	}
	if job.Spec.Completions == nil {
		return succeeded > 0
	}
	return succeeded >= *job.Spec.Completions
}

func isSuspended(job *batchv1.Job) bool { return deref(job.Spec.Suspend) }

func findCondition(list []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

func hasTrueCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	c := findCondition(job.Status.Conditions, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// isFinished is a job with Complete or Failed true; nothing more is done
// to it.
func isFinished(job *batchv1.Job) bool {
	return hasTrueCondition(job, batchv1.JobComplete) || hasTrueCondition(job, batchv1.JobFailed)
}

func newCondition(t batchv1.JobConditionType, reason, message string, now time.Time) *batchv1.JobCondition {
	return &batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
}

// setCondition sets a condition's status, reason and message, reporting
// whether anything changed. A condition never set is not added as False:
// going from nothing to False says nothing.
func setCondition(list []batchv1.JobCondition, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) ([]batchv1.JobCondition, bool) {
	if c := findCondition(list, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return list, false
		}
		n := newCondition(t, reason, message, now)
		n.Status = status
		*c = *n
		return list, true
	}
	if status == corev1.ConditionFalse {
		return list, false
	}
	n := newCondition(t, reason, message, now)
	n.Status = status
	return append(list, *n), true
}
