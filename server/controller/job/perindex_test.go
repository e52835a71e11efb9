package job

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// playKubelet finishes every active pod of the job with the exit code
// code gives for it, until the job is finished; it returns the job.
func (c *cluster) playKubelet(job *batchv1.Job, code func(p *corev1.Pod) int32) *batchv1.Job {
	c.t.Helper()
	var last *batchv1.Job
	c.eventually("the job finished", func() bool {
		for _, p := range activePods(c.pods(job)) {
			if err := c.trySetStatus(p.Name, func(cur *corev1.Pod) { finishWith(cur, code(cur)) }); err != nil && !apierrors.IsNotFound(err) {
				c.t.Fatalf("pod %s status: %v", p.Name, err)
			}
		}
		last = c.job(job.Name)
		return isFinished(last)
	})
	return last
}

// finishWith is the kubelet's report of a pod whose container exited.
func finishWith(p *corev1.Pod, code int32) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodSucceeded
	reason := "Completed"
	if code != 0 {
		p.Status.Phase = corev1.PodFailed
		reason = "Error"
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "main", Image: "busybox", ImageID: "docker.io/library/busybox@sha256:1",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now}},
	}}
}

func failOdd(p *corev1.Pod) int32 { return int32(completionIndex(p) % 2) }

// conditionOrder lists the types of the job's true conditions in order.
func conditionOrder(job *batchv1.Job) []batchv1.JobConditionType {
	var out []batchv1.JobConditionType
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			out = append(out, c.Type)
		}
	}
	return out
}

// failureCounts maps each index to the failure-count annotations of its
// pods, sorted (creation times tie within a second).
func (c *cluster) failureCounts(job *batchv1.Job) map[int][]string {
	out := map[int][]string{}
	for _, p := range c.pods(job) {
		ix := completionIndex(&p)
		out[ix] = append(out[ix], p.Annotations[batchv1.JobIndexFailureCountAnnotation])
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

func TestJob_BackoffLimitPerIndex_OddIndexesFail_AllIndexesRunThenFailed(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("per-index", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](4), ptr.To[int32](2)
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	})
	got := c.playKubelet(job, failOdd)
	if got.Status.FailedIndexes == nil || *got.Status.FailedIndexes != "1,3" {
		t.Errorf("failedIndexes = %v, want 1,3", ptr.Deref(got.Status.FailedIndexes, "<nil>"))
	}
	if got.Status.CompletedIndexes != "0,2" || got.Status.Failed != 4 || got.Status.Succeeded != 2 {
		t.Errorf("completedIndexes %q failed %d succeeded %d, want 0,2 / 4 / 2", got.Status.CompletedIndexes, got.Status.Failed, got.Status.Succeeded)
	}
	cond := condition(got, batchv1.JobFailed)
	if cond == nil || cond.Reason != batchv1.JobReasonFailedIndexes {
		t.Errorf("Failed condition %+v, want reason FailedIndexes", cond)
	}
	if order := conditionOrder(got); !slices.Equal(order, []batchv1.JobConditionType{batchv1.JobFailureTarget, batchv1.JobFailed}) {
		t.Errorf("conditions %v, want FailureTarget then Failed", order)
	}
	counts := c.failureCounts(job)
	for ix, want := range map[int][]string{0: {"0"}, 1: {"0", "1"}, 2: {"0"}, 3: {"0", "1"}} {
		if !slices.Equal(counts[ix], want) {
			t.Errorf("index %d failure counts %v, want %v", ix, counts[ix], want)
		}
	}
	c.noFinalizers(job)
}

func TestJob_MaxFailedIndexesExceeded_FailsWithoutRunningOtherIndexes(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("max-failed", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](4), ptr.To[int32](1)
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.BackoffLimitPerIndex = ptr.To[int32](0)
		j.Spec.MaxFailedIndexes = ptr.To[int32](0)
	})
	got := c.playKubelet(job, func(*corev1.Pod) int32 { return 1 })
	if ptr.Deref(got.Status.FailedIndexes, "<nil>") != "0" || got.Status.Failed != 1 {
		t.Errorf("failedIndexes %v failed %d, want 0 / 1", ptr.Deref(got.Status.FailedIndexes, "<nil>"), got.Status.Failed)
	}
	if cond := condition(got, batchv1.JobFailed); cond == nil || cond.Reason != batchv1.JobReasonMaxFailedIndexesExceeded {
		t.Errorf("Failed condition %+v, want MaxFailedIndexesExceeded", cond)
	}
	if n := len(c.pods(job)); n != 1 {
		t.Errorf("%d pods, want 1: the job ends at the first failed index", n)
	}
}

func TestJob_FailIndexRule_IndexFailsWithoutRetry(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("fail-index", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](2), ptr.To[int32](2)
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionFailIndex,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}},
		}}}
	})
	got := c.playKubelet(job, failOdd)
	if ptr.Deref(got.Status.FailedIndexes, "<nil>") != "1" || got.Status.CompletedIndexes != "0" ||
		got.Status.Failed != 1 || got.Status.Succeeded != 1 {
		t.Errorf("failedIndexes %v completed %q failed %d succeeded %d, want 1 / 0 / 1 / 1",
			ptr.Deref(got.Status.FailedIndexes, "<nil>"), got.Status.CompletedIndexes, got.Status.Failed, got.Status.Succeeded)
	}
	if n := len(c.pods(job)); n != 2 {
		t.Errorf("%d pods, want 2: a FailIndex match is not retried", n)
	}
}

func TestJob_EvictedPods_IgnoredByDisruptionTargetRule_JobCompletes(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("evicted", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](2), ptr.To[int32](2)
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.BackoffLimit = ptr.To[int32](0)
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		}}}
	})
	var first []string
	c.eventually("two running pods", func() bool {
		act := activePods(c.pods(job))
		for _, p := range act {
			c.run(p.Name)
		}
		first = nil
		for _, p := range act {
			first = append(first, p.Name)
		}
		return len(first) == 2
	})
	for _, name := range first {
		if err := c.client.CoreV1().Pods("default").EvictV1(c.ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}); err != nil {
			t.Fatalf("evict %s: %v", name, err)
		}
		// The kubelet stops the evicted pod: its container is killed.
		c.setStatus(name, func(p *corev1.Pod) { finishWith(p, 137) })
	}
	got := c.playKubelet(job, func(p *corev1.Pod) int32 {
		if slices.Contains(first, p.Name) {
			return 137
		}
		return 0
	})
	if !hasCondition(got, batchv1.JobComplete) || got.Status.Failed != 0 || got.Status.Succeeded != 2 {
		t.Errorf("conditions %v failed %d succeeded %d, want Complete with the evictions not counted", conditionOrder(got), got.Status.Failed, got.Status.Succeeded)
	}
	if order := conditionOrder(got); !slices.Equal(order, []batchv1.JobConditionType{batchv1.JobSuccessCriteriaMet, batchv1.JobComplete}) {
		t.Errorf("conditions %v, want SuccessCriteriaMet then Complete", order)
	}
}

func TestNewIndexFailureCounts_IgnoredFailuresCountedApart(t *testing.T) {
	ignore137 := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:      batchv1.PodFailurePolicyActionIgnore,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{137}},
	}}}
	failed := func(code int32, failures, ignored string) *corev1.Pod {
		p := fakePod("p", corev1.PodFailed)
		p.Annotations = map[string]string{batchv1.JobIndexFailureCountAnnotation: failures, batchv1.JobIndexIgnoredFailureCountAnnotation: ignored}
		finishWith(p, code)
		return p
	}
	cases := []struct {
		name                      string
		replaced                  *corev1.Pod
		wantFailures, wantIgnored int32
	}{
		{"first pod of the index", nil, 0, 0},
		{"counted failure", failed(1, "1", "0"), 2, 0},
		{"ignored failure", failed(137, "1", "2"), 1, 3},
		{"malformed annotations read as zero", failed(1, "x", "-1"), 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := fakeJob(func(j *batchv1.Job) { j.Spec.PodFailurePolicy = ignore137 })
			f, i := newIndexFailureCounts(job, tc.replaced)
			if f != tc.wantFailures || i != tc.wantIgnored {
				t.Errorf("counts %d/%d, want %d/%d", f, i, tc.wantFailures, tc.wantIgnored)
			}
		})
	}
}
