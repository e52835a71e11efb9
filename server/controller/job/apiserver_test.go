package job

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// maxActive watches the namespace's pods and reports the most that were
// active at once.
func (c *cluster) maxActive() func() int {
	c.t.Helper()
	w, err := c.client.CoreV1().Pods("default").Watch(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(w.Stop)
	var mu sync.Mutex
	most := 0
	go func() {
		active := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted || !isActive(p) {
				delete(active, p.Name)
			} else {
				active[p.Name] = true
			}
			mu.Lock()
			most = max(most, len(active))
			mu.Unlock()
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

// finishNext finishes the first active pod of the job, once there is one.
func (c *cluster) finishNext(job *batchv1.Job, code int32) string {
	c.t.Helper()
	var name string
	c.eventually("an active pod", func() bool {
		act := activePods(c.pods(job))
		if len(act) > 0 {
			name = act[0].Name
		}
		return name != ""
	})
	c.finish(name, code)
	return name
}

// noFinalizers checks that every pod left of the job was released.
func (c *cluster) noFinalizers(job *batchv1.Job) {
	c.t.Helper()
	for _, p := range c.pods(job) {
		if hasTrackingFinalizer(&p) {
			c.t.Errorf("pod %s still has the tracking finalizer", p.Name)
		}
	}
}

func TestJob_CompletionsThreeParallelismTwo_NeverMoreThanTwoActiveAndCompletes(t *testing.T) {
	c := startCluster(t, nil)
	most := c.maxActive()
	job := c.createJob("three", func(j *batchv1.Job) {
		j.Spec.Completions = ptr.To[int32](3)
		j.Spec.Parallelism = ptr.To[int32](2)
	})
	c.eventually("two active pods", func() bool { return len(activePods(c.pods(job))) == 2 })
	for range 3 {
		c.finishNext(job, 0)
	}
	c.eventually("Complete", func() bool { return hasCondition(c.job("three"), batchv1.JobComplete) })

	got := c.job("three")
	if got.Status.Succeeded != 3 || got.Status.Active != 0 || got.Status.Failed != 0 {
		t.Errorf("status succeeded/active/failed = %d/%d/%d, want 3/0/0", got.Status.Succeeded, got.Status.Active, got.Status.Failed)
	}
	if !hasCondition(got, batchv1.JobSuccessCriteriaMet) {
		t.Errorf("no SuccessCriteriaMet condition before Complete: %+v", got.Status.Conditions)
	}
	if got.Status.CompletionTime == nil || got.Status.StartTime == nil {
		t.Errorf("startTime %v completionTime %v, want both", got.Status.StartTime, got.Status.CompletionTime)
	}
	if u := got.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		t.Errorf("uncounted pods left: %+v", u)
	}
	pods := c.pods(job)
	if len(pods) != 3 {
		t.Errorf("%d pods created, want 3", len(pods))
	}
	c.noFinalizers(job)
	if m := most(); m != 2 {
		t.Errorf("at most %d pods were active at once, want 2", m)
	}
	c.wantEvents("SuccessfulCreate", 3)
	c.wantEvents("Completed", 1)
}

func TestJob_PodsCarryJobLabelsOwnerAndFinalizer(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("labelled", nil)
	c.eventually("a pod", func() bool { return len(c.pods(job)) == 1 })
	p := c.pods(job)[0]
	for k, v := range map[string]string{
		batchv1.ControllerUidLabel: string(job.UID), "controller-uid": string(job.UID),
		batchv1.JobNameLabel: "labelled", "job-name": "labelled",
	} {
		if p.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, p.Labels[k], v)
		}
	}
	if !strings.HasPrefix(p.Name, "labelled-") {
		t.Errorf("pod name %q does not start with the job name", p.Name)
	}
	ref := metav1.GetControllerOf(&p)
	if ref == nil || ref.UID != job.UID || ref.Kind != "Job" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference %+v, want the job", ref)
	}
	if !hasTrackingFinalizer(&p) {
		t.Errorf("finalizers %v lack %s", p.Finalizers, batchv1.JobTrackingFinalizer)
	}
}

func TestJob_BackoffLimitOne_FailsWithBackoffLimitExceededAfterTwoFailures(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("flaky", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](1) })
	first := c.finishNext(job, 1)
	c.eventually("a replacement pod", func() bool {
		act := activePods(c.pods(job))
		return len(act) == 1 && act[0].Name != first
	})
	c.finishNext(job, 1)
	c.eventually("Failed", func() bool { return hasCondition(c.job("flaky"), batchv1.JobFailed) })

	got := c.job("flaky")
	failed := condition(got, batchv1.JobFailed)
	if failed.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Errorf("Failed reason %q, want %s", failed.Reason, batchv1.JobReasonBackoffLimitExceeded)
	}
	if ft := condition(got, batchv1.JobFailureTarget); ft == nil || ft.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Errorf("FailureTarget condition %+v, want one with reason BackoffLimitExceeded", ft)
	}
	if got.Status.Failed != 2 || got.Status.Succeeded != 0 || got.Status.Active != 0 {
		t.Errorf("failed/succeeded/active = %d/%d/%d, want 2/0/0", got.Status.Failed, got.Status.Succeeded, got.Status.Active)
	}
	if got.Status.CompletionTime != nil {
		t.Errorf("a failed job has completionTime %v", got.Status.CompletionTime)
	}
	c.noFinalizers(job)
	c.wantEvents("BackoffLimitExceeded", 1)
}

func TestJob_ActiveDeadlineSeconds_FailsAndDeletesActivePods(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("slow", func(j *batchv1.Job) {
		j.Spec.Parallelism = ptr.To[int32](2)
		j.Spec.Completions = ptr.To[int32](4)
		j.Spec.ActiveDeadlineSeconds = ptr.To[int64](1)
	})
	c.eventually("two active pods", func() bool { return len(activePods(c.pods(job))) == 2 })
	// On a loaded machine the deadline may pass before the pods start.
	for _, p := range c.pods(job) {
		c.runIfPresent(p.Name)
	}
	c.eventually("Failed", func() bool { return hasCondition(c.job("slow"), batchv1.JobFailed) })

	got := c.job("slow")
	if r := condition(got, batchv1.JobFailed).Reason; r != batchv1.JobReasonDeadlineExceeded {
		t.Errorf("Failed reason %q, want DeadlineExceeded", r)
	}
	if got.Status.Active != 0 || got.Status.Failed != 2 || ptr.Deref(got.Status.Terminating, -1) != 0 {
		t.Errorf("active/failed/terminating = %d/%d/%v, want 0/2/0", got.Status.Active, got.Status.Failed, got.Status.Terminating)
	}
	// Without a kubelet the deleted pods go as soon as they are released.
	if left := c.pods(job); len(left) != 0 {
		t.Errorf("%d pods left after the deadline", len(left))
	}
	c.wantEvents("DeadlineExceeded", 1)
}

func TestJob_Indexed_EachIndexOnceAndCompletedIndexesCompressed(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("idx", func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.Completions = ptr.To[int32](4)
		j.Spec.Parallelism = ptr.To[int32](4)
	})
	byIndex := func() map[int]corev1.Pod {
		out := map[int]corev1.Pod{}
		for _, p := range activePods(c.pods(job)) {
			out[completionIndex(&p)] = p
		}
		return out
	}
	c.eventually("four active pods", func() bool { return len(activePods(c.pods(job))) == 4 })
	pods := byIndex()
	for ix := range 4 {
		p, ok := pods[ix]
		if !ok {
			t.Fatalf("no pod for index %d: %v", ix, pods)
		}
		want := "idx-" + strconv.Itoa(ix)
		if p.Spec.Hostname != want || !strings.HasPrefix(p.Name, want+"-") {
			t.Errorf("index %d: hostname %q name %q, want %q", ix, p.Spec.Hostname, p.Name, want)
		}
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != strconv.Itoa(ix) {
			t.Errorf("index %d: label %q", ix, p.Labels[batchv1.JobCompletionIndexAnnotation])
		}
		env := p.Spec.Containers[0].Env
		if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool {
			return e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
				e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
		}) {
			t.Errorf("index %d: env %+v lacks JOB_COMPLETION_INDEX", ix, env)
		}
	}
	completed := func(want string) {
		t.Helper()
		c.eventually("completedIndexes "+want, func() bool { return c.job("idx").Status.CompletedIndexes == want })
	}
	c.finish(pods[0].Name, 0)
	c.finish(pods[2].Name, 0)
	completed("0,2")
	c.finish(pods[1].Name, 1)
	c.eventually("a new pod for index 1", func() bool {
		p, ok := byIndex()[1]
		return ok && p.Name != pods[1].Name
	})
	c.finish(pods[3].Name, 0)
	completed("0,2,3")
	c.finish(byIndex()[1].Name, 0)
	completed("0-3")
	c.eventually("Complete", func() bool { return hasCondition(c.job("idx"), batchv1.JobComplete) })
	got := c.job("idx")
	if got.Status.Succeeded != 4 || got.Status.Failed != 1 {
		t.Errorf("succeeded/failed = %d/%d, want 4/1", got.Status.Succeeded, got.Status.Failed)
	}
	c.noFinalizers(job)
}

func TestJob_Suspend_DeletesActivePodsUncountedAndResumeRecreates(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("pause", func(j *batchv1.Job) {
		j.Spec.Parallelism = ptr.To[int32](2)
		j.Spec.Completions = ptr.To[int32](2)
	})
	c.eventually("two active pods", func() bool { return len(activePods(c.pods(job))) == 2 })
	setSuspend := func(v bool) {
		t.Helper()
		patch := []byte(`{"spec":{"suspend":` + map[bool]string{true: "true", false: "false"}[v] + `}}`)
		if _, err := c.client.BatchV1().Jobs("default").Patch(c.ctx, "pause", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setSuspend(true)
	c.eventually("pods gone and Suspended", func() bool {
		j := c.job("pause")
		return len(c.pods(job)) == 0 && hasCondition(j, batchv1.JobSuspended) && j.Status.Active == 0
	})
	if f := c.job("pause").Status.Failed; f != 0 {
		t.Errorf("suspending counted %d failures", f)
	}
	setSuspend(false)
	c.eventually("two active pods again", func() bool { return len(activePods(c.pods(job))) == 2 })
	c.eventually("Suspended False", func() bool {
		s := condition(c.job("pause"), batchv1.JobSuspended)
		return s != nil && s.Status == corev1.ConditionFalse && s.Reason == "JobResumed"
	})
	c.wantEvents("Suspended", 1)
	c.wantEvents("Resumed", 1)
}

func TestJob_NoCompletions_NoNewPodsAfterASuccessAndCompleteWhenNoneActive(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("queue", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](2) })
	c.eventually("two active pods", func() bool { return len(activePods(c.pods(job))) == 2 })
	c.finishNext(job, 0)
	c.eventually("the success counted", func() bool {
		j := c.job("queue")
		return j.Status.Succeeded == 1 && j.Status.Active == 1
	})
	if n := len(c.pods(job)); n != 2 {
		t.Errorf("%d pods after a success, want 2: a work queue starts nothing once one pod succeeded", n)
	}
	if hasCondition(c.job("queue"), batchv1.JobComplete) {
		t.Error("Complete while a pod is still active")
	}
	c.finishNext(job, 0)
	c.eventually("Complete", func() bool { return hasCondition(c.job("queue"), batchv1.JobComplete) })
	if s := c.job("queue").Status.Succeeded; s != 2 {
		t.Errorf("succeeded = %d, want 2", s)
	}
}

func TestJob_PodFailurePolicy_IgnoreNotCountedFailJobFailsAtOnce(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("policy", func(j *batchv1.Job) {
		j.Spec.BackoffLimit = ptr.To[int32](0)
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}}},
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
		}}
	})
	first := c.finishNext(job, 1)
	c.eventually("a replacement for the ignored failure", func() bool {
		act := activePods(c.pods(job))
		return len(act) == 1 && act[0].Name != first
	})
	if j := c.job("policy"); j.Status.Failed != 0 || isFinished(j) {
		t.Fatalf("ignored failure counted: failed=%d conditions=%+v", j.Status.Failed, j.Status.Conditions)
	}
	c.finishNext(job, 42)
	c.eventually("Failed", func() bool { return hasCondition(c.job("policy"), batchv1.JobFailed) })
	cond := condition(c.job("policy"), batchv1.JobFailed)
	if cond.Reason != batchv1.JobReasonPodFailurePolicy || !strings.Contains(cond.Message, "exit code 42") {
		t.Errorf("Failed %q: %q, want PodFailurePolicy naming exit code 42", cond.Reason, cond.Message)
	}
}

func TestJob_PodDeletedWhileRunning_CountedAsFailedAndReplaced(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("victim", nil)
	var first string
	c.eventually("a pod", func() bool {
		if act := activePods(c.pods(job)); len(act) == 1 {
			first = act[0].Name
		}
		return first != ""
	})
	if err := c.client.CoreV1().Pods("default").Delete(c.ctx, first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually("the deleted pod gone and counted", func() bool {
		_, err := c.client.CoreV1().Pods("default").Get(c.ctx, first, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && c.job("victim").Status.Failed == 1
	})
	c.eventually("a replacement", func() bool { return len(activePods(c.pods(job))) == 1 })
}

func TestJob_DeletedJob_PodFinalizersRemoved(t *testing.T) {
	c := startCluster(t, nil)
	job := c.createJob("gone", nil)
	c.eventually("a pod", func() bool { return len(c.pods(job)) == 1 })
	background := metav1.DeletePropagationBackground
	if err := c.client.BatchV1().Jobs("default").Delete(c.ctx, "gone", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	c.eventually("the pod released", func() bool {
		pods := c.pods(job)
		return len(pods) == 1 && !hasTrackingFinalizer(&pods[0])
	})
}

func TestJob_DefaultRecorder_WritesCoreV1Events(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.Recorder = nil })
	c.createJob("evented", nil)
	c.eventually("a SuccessfulCreate event in the API", func() bool {
		list, err := c.client.CoreV1().Events("default").List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.Reason == "SuccessfulCreate" && e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == "evented" &&
				e.Source.Component == "job-controller"
		})
	})
}
