package job

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

func TestBackoffRemaining_DoublesFromBaseUpToCap(t *testing.T) {
	last := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		failures int32
		elapsed  time.Duration
		want     time.Duration
	}{
		{0, 0, 0},
		{1, 0, 10 * time.Second},
		{1, 4 * time.Second, 6 * time.Second},
		{1, 10 * time.Second, 0},
		{2, 0, 20 * time.Second},
		{3, 0, 40 * time.Second},
		{4, 0, 80 * time.Second},
		{5, 0, 160 * time.Second},
		{6, 0, 320 * time.Second},
		{7, 0, 6 * time.Minute},
		{50, 0, 6 * time.Minute},
		{50, 7 * time.Minute, 0},
	} {
		r := backoffRecord{failuresAfterSuccess: tc.failures, lastFailure: last}
		if got := r.remaining(last.Add(tc.elapsed), DefaultPodFailureBackoff, DefaultMaxPodFailureBackoff); got != tc.want {
			t.Errorf("%d failures, %v elapsed: wait %v, want %v", tc.failures, tc.elapsed, got, tc.want)
		}
	}
}

func finishedPod(name string, phase corev1.PodPhase, at time.Time) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(at)},
	}}}
	return p
}

func TestBackoffRecordNext(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	prev := backoffRecord{failuresAfterSuccess: 2, lastFailure: at(0)}
	for _, tc := range []struct {
		name     string
		ok, fail []*corev1.Pod
		want     backoffRecord
	}{
		{name: "nothing new", want: prev},
		{name: "failures add up", fail: []*corev1.Pod{finishedPod("f2", corev1.PodFailed, at(20)), finishedPod("f1", corev1.PodFailed, at(10))},
			want: backoffRecord{failuresAfterSuccess: 4, lastFailure: at(20)}},
		{name: "a success resets", ok: []*corev1.Pod{finishedPod("s", corev1.PodSucceeded, at(5))}, want: backoffRecord{}},
		{name: "only failures after the last success count", ok: []*corev1.Pod{finishedPod("s", corev1.PodSucceeded, at(15))},
			fail: []*corev1.Pod{finishedPod("f1", corev1.PodFailed, at(10)), finishedPod("f2", corev1.PodFailed, at(20)), finishedPod("f3", corev1.PodFailed, at(30))},
			want: backoffRecord{failuresAfterSuccess: 2, lastFailure: at(30)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := prev.next(tc.ok, tc.fail); got != tc.want {
				t.Errorf("next = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFinishedTime_Fallbacks(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	containers := finishedPod("c", corev1.PodFailed, t0)
	ready := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(time.Second))}}}}
	deleted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: t0.Add(40 * time.Second)}, DeletionGracePeriodSeconds: ptr.To[int64](30)}}
	created := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))}}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want time.Time
	}{
		"container exit":    {containers, t0},
		"ready false":       {ready, t0.Add(time.Second)},
		"deletion":          {deleted, t0.Add(10 * time.Second)},
		"creation at worst": {created, t0.Add(-time.Minute)},
	} {
		if got := finishedTime(tc.pod); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestWantActiveAndComplete(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		completions, parallelism *int32
		active, succeeded        int32
		want                     int32
		complete                 bool
	}{
		{name: "start", completions: ptr.To[int32](3), parallelism: ptr.To[int32](2), want: 2},
		{name: "one left", completions: ptr.To[int32](3), parallelism: ptr.To[int32](2), active: 2, succeeded: 2, want: 1},
		{name: "done", completions: ptr.To[int32](3), parallelism: ptr.To[int32](2), succeeded: 3, want: 0, complete: true},
		{name: "done but one running", completions: ptr.To[int32](3), parallelism: ptr.To[int32](2), active: 1, succeeded: 3, want: 0},
		{name: "over-succeeded", completions: ptr.To[int32](1), parallelism: ptr.To[int32](1), succeeded: 2, want: 0, complete: true},
		{name: "zero parallelism", completions: ptr.To[int32](3), parallelism: ptr.To[int32](0), want: 0},
		{name: "work queue", parallelism: ptr.To[int32](3), want: 3},
		{name: "work queue after a success keeps the rest", parallelism: ptr.To[int32](3), active: 2, succeeded: 1, want: 2},
		{name: "work queue done", parallelism: ptr.To[int32](3), succeeded: 1, want: 0, complete: true},
		{name: "work queue nothing yet", parallelism: ptr.To[int32](3), want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &batchv1.Job{Spec: batchv1.JobSpec{Completions: tc.completions, Parallelism: tc.parallelism}}
			if got := wantActive(job, tc.active, tc.succeeded); got != tc.want {
				t.Errorf("wantActive = %d, want %d", got, tc.want)
			}
			if got := isComplete(job, tc.active, tc.succeeded); got != tc.complete {
				t.Errorf("isComplete = %v, want %v", got, tc.complete)
			}
		})
	}
}

func exitedPod(code int32, conds ...corev1.PodConditionType) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
	for _, c := range conds {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return p
}

func TestMatchFailurePolicy(t *testing.T) {
	policy := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}},
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr.To("main"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
		{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{1, 2}}},
		{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}}},
	}}
	for _, tc := range []struct {
		name    string
		policy  *batchv1.PodFailurePolicy
		pod     *corev1.Pod
		count   bool
		failJob string
	}{
		{name: "no policy counts", pod: exitedPod(1), count: true},
		{name: "disruption ignored first", policy: policy, pod: exitedPod(42, corev1.DisruptionTarget), count: false},
		{name: "fail job on 42", policy: policy, pod: exitedPod(42), count: true, failJob: "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1"},
		{name: "count on 7 (NotIn)", policy: policy, pod: exitedPod(7), count: true},
		{name: "ignore on 1", policy: policy, pod: exitedPod(1), count: false},
		{name: "no rule matches 2", policy: policy, pod: exitedPod(2), count: true},
		{name: "exit 0 never matches", policy: policy, pod: exitedPod(0), count: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := matchFailurePolicy(tc.policy, tc.pod)
			if m.count != tc.count || ptr.Deref(m.failJob, "") != tc.failJob {
				t.Errorf("match = {count %v failJob %q}, want {%v %q}", m.count, ptr.Deref(m.failJob, ""), tc.count, tc.failJob)
			}
		})
	}
}

func TestMatchSuccessPolicy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rules     []batchv1.SuccessPolicyRule
		succeeded string
		want      bool
	}{
		{name: "leader index done", rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}, succeeded: "0,3", want: true},
		{name: "leader not done", rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}, succeeded: "1-4", want: false},
		{name: "all of a range", rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("2-4")}}, succeeded: "0,2-4", want: true},
		{name: "count within a range", rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0-5"), SucceededCount: ptr.To[int32](2)}}, succeeded: "1,5,7", want: true},
		{name: "count anywhere", rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](3)}}, succeeded: "1,5", want: false},
		{name: "second rule", rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("9")}, {SucceededCount: ptr.To[int32](2)}}, succeeded: "1,5", want: true},
		{name: "nothing succeeded", rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](1)}}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := matchSuccessPolicy(&batchv1.SuccessPolicy{Rules: tc.rules}, 10, parseIntervals(tc.succeeded, 10))
			if got != tc.want {
				t.Errorf("met = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPastBackoffLimitOnFailure_CountsRestarts(t *testing.T) {
	running := func(restarts int32) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{RestartCount: restarts}}}}
	}
	for _, tc := range []struct {
		policy  corev1.RestartPolicy
		limit   int32
		pods    []*corev1.Pod
		exceeds bool
	}{
		{corev1.RestartPolicyOnFailure, 3, []*corev1.Pod{running(1), running(1)}, false},
		{corev1.RestartPolicyOnFailure, 3, []*corev1.Pod{running(2), running(1)}, true},
		{corev1.RestartPolicyOnFailure, 0, []*corev1.Pod{running(1)}, true},
		{corev1.RestartPolicyOnFailure, 0, []*corev1.Pod{running(0)}, false},
		{corev1.RestartPolicyNever, 0, []*corev1.Pod{running(5)}, false},
	} {
		job := &batchv1.Job{Spec: batchv1.JobSpec{BackoffLimit: ptr.To(tc.limit), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: tc.policy}}}}
		if got := pastBackoffLimitOnFailure(job, tc.pods); got != tc.exceeds {
			t.Errorf("%s limit %d: exceeds = %v, want %v", tc.policy, tc.limit, got, tc.exceeds)
		}
	}
}

func TestIsPodFailed_DeletedPodsDependOnReplacementPolicy(t *testing.T) {
	deleted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: time.Now()}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	deletedDone := deleted.DeepCopy()
	deletedDone.Status.Phase = corev1.PodSucceeded
	for _, tc := range []struct {
		name   string
		job    batchv1.JobSpec
		pod    *corev1.Pod
		failed bool
	}{
		{name: "deleted counts by default", pod: deleted, failed: true},
		{name: "a deleted success is a success", pod: deletedDone, failed: false},
		{name: "replace only failed", job: batchv1.JobSpec{PodReplacementPolicy: ptr.To(batchv1.Failed)}, pod: deleted, failed: false},
		{name: "failure policy waits for the phase", job: batchv1.JobSpec{PodFailurePolicy: &batchv1.PodFailurePolicy{}}, pod: deleted, failed: false},
		{name: "failed phase always", job: batchv1.JobSpec{PodReplacementPolicy: ptr.To(batchv1.Failed)}, pod: exitedPod(1), failed: true},
	} {
		if got := isPodFailed(tc.pod, &batchv1.Job{Spec: tc.job}); got != tc.failed {
			t.Errorf("%s: failed = %v, want %v", tc.name, got, tc.failed)
		}
	}
}

func TestMoveUncountedToCounters_OnlyReleasedPods(t *testing.T) {
	st := batchv1.JobStatus{Succeeded: 1, Failed: 2, UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{
		Succeeded: []types.UID{"a", "b"}, Failed: []types.UID{"c"},
	}}
	if !moveUncountedToCounters(&st, sets.New[types.UID]("b")) {
		t.Fatal("reported no change")
	}
	if st.Succeeded != 2 || st.Failed != 3 || !slices.Equal(st.UncountedTerminatedPods.Succeeded, []types.UID{"b"}) || len(st.UncountedTerminatedPods.Failed) != 0 {
		t.Errorf("status %+v %+v", st, st.UncountedTerminatedPods)
	}
	if moveUncountedToCounters(&st, sets.New[types.UID]("b")) {
		t.Error("second call changed something")
	}
}

func TestDeletionOrder_LeastAdvancedFirst(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	pod := func(name, node string, phase corev1.PodPhase, ready bool, restarts int32, created time.Time) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
		p.Spec.NodeName = node
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: restarts}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	pods := []*corev1.Pod{
		pod("ready-old", "n", corev1.PodRunning, true, 0, t0),
		pod("ready-new", "n", corev1.PodRunning, true, 0, t0.Add(time.Minute)),
		pod("running-restarted", "n", corev1.PodRunning, false, 3, t0),
		pod("running", "n", corev1.PodRunning, false, 0, t0),
		pod("pending", "n", corev1.PodPending, false, 0, t0),
		pod("unscheduled", "", corev1.PodPending, false, 0, t0),
	}
	var got []string
	for _, p := range sortedForDeletion(pods) {
		got = append(got, p.Name)
	}
	want := []string{"unscheduled", "pending", "running-restarted", "running", "ready-new", "ready-old"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestNewPod_FromTemplate(t *testing.T) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "work", Namespace: "ns", UID: "job-uid"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "b"}, Finalizers: []string{"other"}},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init"}},
				Containers:     []corev1.Container{{Name: "main", Env: []corev1.EnvVar{{Name: indexEnvName, Value: "mine"}}}, {Name: "side"}},
			},
		}},
	}
	p := newPod(job, noIndex)
	if p.GenerateName != "work-" || p.Namespace != "ns" || p.Labels["app"] != "x" || p.Annotations["a"] != "b" {
		t.Errorf("metadata %+v", p.ObjectMeta)
	}
	if !slices.Equal(p.Finalizers, []string{"other", batchv1.JobTrackingFinalizer}) {
		t.Errorf("finalizers %v", p.Finalizers)
	}
	if p.Labels[batchv1.JobNameLabel] != "work" || p.Labels[batchv1.ControllerUidLabel] != "job-uid" || p.Labels["job-name"] != "work" || p.Labels["controller-uid"] != "job-uid" {
		t.Errorf("labels %v lack the job labels", p.Labels)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "job-uid" || ref.APIVersion != "batch/v1" {
		t.Errorf("owner %+v", ref)
	}
	if p.Spec.Hostname != "" || len(p.Spec.Containers[1].Env) != 0 {
		t.Error("a NonIndexed pod got index settings")
	}

	p = newPod(job, 3)
	if p.GenerateName != "work-3-" || p.Spec.Hostname != "work-3" || p.Annotations[batchv1.JobCompletionIndexAnnotation] != "3" || p.Labels[batchv1.JobCompletionIndexAnnotation] != "3" {
		t.Errorf("indexed pod %+v %+v", p.ObjectMeta, p.Spec.Hostname)
	}
	if env := p.Spec.Containers[0].Env; len(env) != 1 || env[0].Value != "mine" {
		t.Errorf("the user's own %s was replaced: %+v", indexEnvName, env)
	}
	for _, c := range []corev1.Container{p.Spec.Containers[1], p.Spec.InitContainers[0]} {
		if len(c.Env) != 1 || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("container %s env %+v", c.Name, c.Env)
		}
	}
	if _, ok := job.Spec.Template.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
		t.Error("newPod changed the job's template")
	}
}

func TestSetCondition(t *testing.T) {
	now := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	list, changed := setCondition(nil, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
	if changed || len(list) != 0 {
		t.Errorf("a False condition was added from nothing: %+v", list)
	}
	list, changed = setCondition(list, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
	if !changed || len(list) != 1 {
		t.Fatalf("not added: %+v", list)
	}
	if _, changed = setCondition(list, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now.Add(time.Hour)); changed {
		t.Error("an unchanged condition was rewritten")
	}
	list, changed = setCondition(list, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now.Add(time.Hour))
	if !changed || list[0].Status != corev1.ConditionFalse || !list[0].LastTransitionTime.Time.Equal(now.Add(time.Hour)) {
		t.Errorf("not flipped: %+v", list)
	}
}

func TestDeadlineLeft(t *testing.T) {
	start := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		ads     *int64
		started bool
		suspend bool
		left    time.Duration
		ok      bool
	}{
		{name: "none set", started: true},
		{name: "not started", ads: ptr.To[int64](60)},
		{name: "running", ads: ptr.To[int64](60), started: true, left: 30 * time.Second, ok: true},
		{name: "suspended stops the clock", ads: ptr.To[int64](60), started: true, suspend: true},
	} {
		job := &batchv1.Job{Spec: batchv1.JobSpec{ActiveDeadlineSeconds: tc.ads, Suspend: ptr.To(tc.suspend)}}
		if tc.started {
			job.Status.StartTime = &metav1.Time{Time: start}
		}
		left, ok := deadlineLeft(job, start.Add(30*time.Second))
		if left != tc.left || ok != tc.ok {
			t.Errorf("%s: left %v ok %v, want %v %v", tc.name, left, ok, tc.left, tc.ok)
		}
	}
}
