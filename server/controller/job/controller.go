// Package job runs batch/v1 Jobs to completion (upstream's job
// controller): it creates pods from the template up to the parallelism
// until enough have succeeded, re-creates failed ones with an exponential
// back-off until backoffLimit, honours activeDeadlineSeconds, suspend,
// Indexed completion, and pod failure and success policies, and reports
// all of it in the job's status.
//
// Pods are tracked with the batch.kubernetes.io/job-tracking finalizer: a
// finished pod keeps it until its outcome is recorded in the job status
// (first by UID in status.uncountedTerminatedPods, then in the counters
// once the finalizer is gone), so a pod deleted right after it finished is
// still counted, and counted once.
package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"skiff/server/controller/worker"
)

// Defaults of the Config knobs, upstream's values.
const (
	DefaultWorkers              = 5
	DefaultPodFailureBackoff    = 10 * time.Second
	DefaultMaxPodFailureBackoff = 6 * time.Minute
	DefaultSyncBatchPeriod      = time.Second
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; the pod and job
	// informers are taken from it.
	Informers informers.SharedInformerFactory
	// Recorder records the events on jobs. When nil, events are sent to
	// the API server as from "job-controller".
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many jobs are synced at once (default 5).
	Workers int
	// PodFailureBackoff is the delay before a failed pod is replaced after
	// the first failure, doubling with each consecutive one (default 10s).
	PodFailureBackoff time.Duration
	// MaxPodFailureBackoff caps that delay (default 6m).
	MaxPodFailureBackoff time.Duration
	// SyncBatchPeriod gathers the pod events of a job into one sync
	// (default 1s); spec changes are synced at once.
	SyncBatchPeriod time.Duration
	// Clock is the time source (real by default).
	Clock clock.WithTicker
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.PodFailureBackoff <= 0 {
		c.PodFailureBackoff = DefaultPodFailureBackoff
	}
	if c.MaxPodFailureBackoff <= 0 {
		c.MaxPodFailureBackoff = DefaultMaxPodFailureBackoff
	}
	if c.SyncBatchPeriod <= 0 {
		c.SyncBatchPeriod = DefaultSyncBatchPeriod
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
}

type controller struct {
	cfg      Config
	log      *slog.Logger
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	jobs     batchlisters.JobLister
	pods     corelisters.PodLister
	queue    *worker.Queue
	// orphans are pods (namespace/name) whose tracking finalizer no job
	// will remove: their job is gone, finished, or no longer theirs.
	orphans *worker.Queue
	exp     *expectations
	backoff *backoffStore
}

// Run syncs jobs until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("job controller: Client and Informers are required")
	}
	cfg.setDefaults()
	c := &controller{
		cfg: cfg, log: cfg.Logger, client: cfg.Client, clock: cfg.Clock,
		jobs: cfg.Informers.Batch().V1().Jobs().Lister(),
		pods: cfg.Informers.Core().V1().Pods().Lister(),
		queue: worker.New(worker.Config{Name: "job", Clock: cfg.Clock, Log: cfg.Logger, Message: "job sync", Noun: "job",
			// The cache lagged our own last write; the retry sees it.
			Quiet: apierrors.IsConflict, QuietMessage: "job sync"}),
		orphans: worker.New(worker.Config{Name: "job_orphan_pod", Clock: cfg.Clock, Log: cfg.Logger, Message: "orphan pod finalizer", Noun: "pod"}),
		exp:     newExpectations(cfg.Clock.Now),
		backoff: newBackoffStore(),
	}
	defer c.queue.ShutDown()
	defer c.orphans.ShutDown()
	c.recorder = cfg.Recorder
	if c.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		defer b.Shutdown()
		c.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "job-controller"})
	}
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: cfg.Informers.Batch().V1().Jobs().Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addJob, UpdateFunc: c.updateJob, DeleteFunc: c.deleteJob}},
		worker.Subscription{Informer: cfg.Informers.Core().V1().Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addPod,
			UpdateFunc: c.updatePod,
			DeleteFunc: func(obj any) { c.deletePod(obj, true) },
		}},
	)
	if err != nil {
		return fmt.Errorf("job controller: add event handler: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.queue.Run(ctx, cfg.Workers, c.syncJob) })
	wg.Go(func() { c.orphans.Run(ctx, 1, c.syncOrphan) })
	wg.Wait()
	return nil
}

func jobKey(namespace, name string) string { return namespace + "/" + name }

func (c *controller) enqueue(job *batchv1.Job, after time.Duration) {
	c.queue.AddAfter(jobKey(job.Namespace, job.Name), after)
}

// resolve finds the job a controller reference points to, if it is
// still the same job.
func (c *controller) resolve(namespace string, ref *metav1.OwnerReference) *batchv1.Job {
	if ref == nil || ref.Kind != jobKind.Kind || ref.APIVersion != jobKind.GroupVersion().String() {
		return nil
	}
	job, err := c.jobs.Jobs(namespace).Get(ref.Name)
	if err != nil || job.UID != ref.UID {
		return nil
	}
	return job
}

func (c *controller) addJob(obj any) {
	if job, ok := obj.(*batchv1.Job); ok {
		c.enqueue(job, 0)
	}
}

func (c *controller) updateJob(oldObj, newObj any) {
	old, ok1 := oldObj.(*batchv1.Job)
	cur, ok2 := newObj.(*batchv1.Job)
	if !ok1 || !ok2 {
		return
	}
	// A spec change is acted on at once; status updates (mostly our own)
	// are batched like pod events.
	if cur.Generation != old.Generation {
		c.enqueue(cur, 0)
	} else {
		c.enqueue(cur, c.cfg.SyncBatchPeriod)
	}
	if isFinished(cur) {
		c.orphanFinalizedPods(cur)
	}
	if cur.Status.StartTime != nil && cur.Spec.ActiveDeadlineSeconds != nil &&
		(old.Spec.ActiveDeadlineSeconds == nil || *old.Spec.ActiveDeadlineSeconds != *cur.Spec.ActiveDeadlineSeconds) {
		if left, ok := deadlineLeft(cur, c.clock.Now()); ok {
			c.enqueue(cur, left)
		}
	}
}

func (c *controller) deleteJob(obj any) {
	job, ok := worker.Unwrap[*batchv1.Job](obj)
	if !ok {
		return
	}
	c.enqueue(job, 0)
	c.orphanFinalizedPods(job)
}

// orphanFinalizedPods hands the pods of a finished or deleted job that
// still hold the tracking finalizer to the orphan worker, since syncJob
// no longer looks at that job.
func (c *controller) orphanFinalizedPods(job *batchv1.Job) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return
	}
	pods, _ := c.pods.Pods(job.Namespace).List(sel)
	for _, p := range pods {
		if metav1.IsControlledBy(p, job) && hasTrackingFinalizer(p) {
			c.orphans.Add(jobKey(p.Namespace, p.Name))
		}
	}
}

// matchingJobs are the jobs whose selector matches an orphan pod: they
// may want to adopt it.
func (c *controller) matchingJobs(p *corev1.Pod) []*batchv1.Job {
	jobs, err := c.jobs.Jobs(p.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*batchv1.Job
	for _, j := range jobs {
		sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, j)
		}
	}
	return out
}

func (c *controller) addPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if p.DeletionTimestamp != nil {
		// Seen for the first time already deleted (a restart): not one of
		// our creations.
		c.deletePod(p, false)
		return
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		if job := c.resolve(p.Namespace, ref); job != nil {
			c.exp.creationObserved(jobKey(job.Namespace, job.Name))
			c.enqueue(job, c.cfg.SyncBatchPeriod)
		}
		return
	}
	if hasTrackingFinalizer(p) {
		c.orphans.Add(jobKey(p.Namespace, p.Name))
	}
	for _, j := range c.matchingJobs(p) {
		c.enqueue(j, c.cfg.SyncBatchPeriod)
	}
}

func (c *controller) updatePod(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || cur.ResourceVersion == old.ResourceVersion {
		return
	}
	if cur.DeletionTimestamp != nil {
		// The replacement should not wait for the end of the grace period.
		c.deletePod(cur, false)
		return
	}
	curRef, oldRef := metav1.GetControllerOf(cur), metav1.GetControllerOf(old)
	refChanged := (curRef == nil) != (oldRef == nil) || (curRef != nil && curRef.UID != oldRef.UID)
	if refChanged && oldRef != nil {
		c.podChanged(cur, oldRef)
	}
	if curRef != nil {
		c.podChanged(cur, curRef)
		return
	}
	if hasTrackingFinalizer(cur) {
		c.orphans.Add(jobKey(cur.Namespace, cur.Name))
	}
	if refChanged || !labels.Equals(cur.Labels, old.Labels) {
		for _, j := range c.matchingJobs(cur) {
			c.enqueue(j, c.cfg.SyncBatchPeriod)
		}
	}
}

// podChanged wakes the job a pod belongs (or belonged) to, noting that
// its finalizer is gone if it is.
func (c *controller) podChanged(p *corev1.Pod, ref *metav1.OwnerReference) {
	job := c.resolve(p.Namespace, ref)
	if job == nil {
		return
	}
	if !hasTrackingFinalizer(p) {
		c.exp.finalizerRemovalObserved(jobKey(job.Namespace, job.Name), p.UID)
	}
	c.enqueue(job, c.cfg.SyncBatchPeriod)
}

// deletePod handles a pod deleted (final) or marked for deletion.
func (c *controller) deletePod(obj any, final bool) {
	p, ok := worker.Unwrap[*corev1.Pod](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(p)
	job := c.resolve(p.Namespace, ref)
	if job == nil || isFinished(job) {
		// No sync will remove this pod's finalizer.
		if hasTrackingFinalizer(p) {
			c.orphans.Add(jobKey(p.Namespace, p.Name))
		}
		return
	}
	key := jobKey(job.Namespace, job.Name)
	c.exp.deletionObserved(key, p.UID)
	if final || !hasTrackingFinalizer(p) {
		c.exp.finalizerRemovalObserved(key, p.UID)
	}
	c.enqueue(job, c.cfg.SyncBatchPeriod)
}

// syncOrphan removes the tracking finalizer from a pod no unfinished job
// of ours controls.
func (c *controller) syncOrphan(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	p, err := c.pods.Pods(ns).Get(name)
	if err != nil {
		return nil // gone
	}
	if !hasTrackingFinalizer(p) {
		return nil
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		if ref.Kind != jobKind.Kind || ref.APIVersion != jobKind.GroupVersion().String() {
			return nil
		}
		if job := c.resolve(ns, ref); job != nil && (!isFinished(job) || managedElsewhere(job)) {
			// Still running (syncJob owns the finalizer), or another
			// controller's.
			return nil
		}
	}
	return c.patchOutFinalizer(ctx, p)
}
