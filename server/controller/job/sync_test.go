package job

import (
	"context"
	"log/slog"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"skiff/server/controller/controllertest"
	"skiff/server/controller/worker"
)

// fakeEnv runs syncJob against a fake clientset with caches the test
// fills by hand, so that it can make them lag the writes.
type fakeEnv struct {
	t      *testing.T
	client *fake.Clientset
	jobs   cache.Indexer
	pods   cache.Indexer
	c      *controller
	events *controllertest.Recorder
}

func newFakeEnv(t *testing.T, job *batchv1.Job, pods ...*corev1.Pod) *fakeEnv {
	t.Helper()
	objs := []runtime.Object{job}
	for _, p := range pods {
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	e := &fakeEnv{t: t, client: client, jobs: idx(), pods: idx(), events: &controllertest.Recorder{}}
	e.setJob(job)
	for _, p := range pods {
		e.setPod(p)
	}
	cfg := Config{Client: client, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Clock: testingclock.NewFakeClock(time.Now())}
	cfg.setDefaults()
	q := func() *worker.Queue { return worker.New(worker.Config{}) }
	e.c = &controller{cfg: cfg, log: cfg.Logger, client: client, recorder: e.events, clock: cfg.Clock,
		jobs: batchlisters.NewJobLister(e.jobs), pods: corelisters.NewPodLister(e.pods),
		queue: q(), orphans: q(), exp: newExpectations(cfg.Clock.Now), backoff: newBackoffStore()}
	t.Cleanup(e.c.queue.ShutDown)
	t.Cleanup(e.c.orphans.ShutDown)
	return e
}

func (e *fakeEnv) setJob(j *batchv1.Job) {
	if err := e.jobs.Update(j); err != nil {
		e.t.Fatal(err)
	}
}

func (e *fakeEnv) setPod(p *corev1.Pod) {
	if err := e.pods.Update(p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *fakeEnv) sync() {
	e.t.Helper()
	e.client.ClearActions()
	if err := e.c.syncJob(context.Background(), "ns/j"); err != nil {
		e.t.Fatal(err)
	}
}

// stored is the job as the fake API server holds it.
func (e *fakeEnv) stored() *batchv1.Job {
	e.t.Helper()
	j, err := e.client.BatchV1().Jobs("ns").Get(context.Background(), "j", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// writes lists the writing actions of the last sync, "verb resource[/sub]".
func (e *fakeEnv) writes() []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range e.client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a)
		}
	}
	return out
}

func fakeJob(mutate func(*batchv1.Job)) *batchv1.Job {
	now := metav1.Now()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "job-uid"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](1), Parallelism: ptr.To[int32](1), BackoffLimit: ptr.To[int32](6),
			CompletionMode: ptr.To(batchv1.NonIndexedCompletion),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "job-uid"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{batchv1.ControllerUidLabel: "job-uid"}},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
			},
		},
		Status: batchv1.JobStatus{StartTime: &now, Active: 1, Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0), UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{}},
	}
	if mutate != nil {
		mutate(j)
	}
	return j
}

func fakePod(name string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID(name + "-uid"),
			Labels:          map[string]string{batchv1.ControllerUidLabel: "job-uid"},
			Finalizers:      []string{batchv1.JobTrackingFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "job-uid", Controller: ptr.To(true)}},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func TestSyncJob_FailedPastLimit_FailureTargetWrittenBeforeFinalizerGoesThenFailed(t *testing.T) {
	e := newFakeEnv(t, fakeJob(func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](0) }), fakePod("a", corev1.PodFailed))
	e.sync()
	w := e.writes()
	if len(w) != 3 {
		t.Fatalf("writes %v, want status, pod patch, status", w)
	}
	first, ok := w[0].(clienttesting.UpdateAction)
	if !ok || w[0].GetSubresource() != "status" {
		t.Fatalf("first write %v, want the job status", w[0])
	}
	st := first.GetObject().(*batchv1.Job).Status
	if !hasTrueCondition(&batchv1.Job{Status: st}, batchv1.JobFailureTarget) || len(st.UncountedTerminatedPods.Failed) != 1 || st.Failed != 0 {
		t.Errorf("first status %+v: want FailureTarget and the pod uncounted", st)
	}
	if w[1].GetVerb() != "patch" || w[1].GetResource().Resource != "pods" {
		t.Errorf("second write %v, want the finalizer removal", w[1])
	}
	final := e.stored()
	if final.Status.Failed != 1 || len(final.Status.UncountedTerminatedPods.Failed) != 0 || !isFinished(final) {
		t.Errorf("final status %+v, want failed 1, nothing uncounted, Failed", final.Status)
	}
	if c := findCondition(final.Status.Conditions, batchv1.JobFailed); c == nil || c.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Errorf("Failed condition %+v", c)
	}
	if len(e.events.WithReason("BackoffLimitExceeded")) != 1 {
		t.Errorf("events %s", e.events)
	}
}

func TestSyncJob_PodCacheLagsFinalizerRemoval_SuccessNotCountedTwice(t *testing.T) {
	a := fakePod("a", corev1.PodSucceeded)
	e := newFakeEnv(t, fakeJob(func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](2) }), a)
	e.sync()
	if s := e.stored().Status.Succeeded; s != 1 {
		t.Fatalf("succeeded = %d after the first sync, want 1", s)
	}
	// The job cache catches up; the pod cache still shows the finalizer.
	e.setJob(e.stored())
	e.sync()
	e.sync()
	if got := e.stored(); got.Status.Succeeded != 1 || len(got.Status.UncountedTerminatedPods.Succeeded) != 0 {
		t.Errorf("status %+v: the success was counted again", got.Status)
	}
	pods, err := e.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Errorf("%d pods, want 2: the replacement must be created once while the cache lags", len(pods.Items))
	}
}

func TestSyncJob_CrashAfterStatusBeforeRelease_PodCountedOnce(t *testing.T) {
	// A previous run wrote the pod's UID to status and stopped before
	// removing its finalizer.
	job := fakeJob(func(j *batchv1.Job) {
		j.Spec.Completions = ptr.To[int32](2)
		j.Status.UncountedTerminatedPods.Succeeded = []types.UID{"a-uid"}
	})
	e := newFakeEnv(t, job, fakePod("a", corev1.PodSucceeded), fakePod("b", corev1.PodRunning))
	e.sync()
	got := e.stored()
	if got.Status.Succeeded != 1 || len(got.Status.UncountedTerminatedPods.Succeeded) != 0 {
		t.Errorf("status %+v %+v, want succeeded 1 and nothing uncounted", got.Status, got.Status.UncountedTerminatedPods)
	}
	a, err := e.client.CoreV1().Pods("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasTrackingFinalizer(a) {
		t.Error("finalizer not removed")
	}
}

func TestSyncJob_Complete_SuccessCriteriaMetFirstAndCompletionTime(t *testing.T) {
	e := newFakeEnv(t, fakeJob(nil), fakePod("a", corev1.PodSucceeded))
	e.sync()
	got := e.stored()
	sc, done := findCondition(got.Status.Conditions, batchv1.JobSuccessCriteriaMet), findCondition(got.Status.Conditions, batchv1.JobComplete)
	if sc == nil || done == nil || sc.Reason != batchv1.JobReasonCompletionsReached || done.Reason != batchv1.JobReasonCompletionsReached {
		t.Fatalf("conditions %+v", got.Status.Conditions)
	}
	if got.Status.CompletionTime == nil || !got.Status.CompletionTime.Equal(&done.LastTransitionTime) {
		t.Errorf("completionTime %v, want the Complete transition time %v", got.Status.CompletionTime, done.LastTransitionTime)
	}
	if got.Status.Active != 0 || got.Status.Succeeded != 1 {
		t.Errorf("active/succeeded %d/%d", got.Status.Active, got.Status.Succeeded)
	}
}

func TestSyncJob_FinishedJob_Untouched(t *testing.T) {
	job := fakeJob(func(j *batchv1.Job) {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	})
	e := newFakeEnv(t, job, fakePod("a", corev1.PodRunning))
	e.sync()
	if w := e.writes(); len(w) != 0 {
		t.Errorf("writes %v to a finished job", w)
	}
}

func TestSyncJob_ManagedByAnotherController_Untouched(t *testing.T) {
	e := newFakeEnv(t, fakeJob(func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("example.com/queue") }))
	e.sync()
	if w := e.writes(); len(w) != 0 {
		t.Errorf("writes %v to a job managed elsewhere", w)
	}
}
