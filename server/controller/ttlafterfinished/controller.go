// Package ttlafterfinished deletes finished Jobs whose
// spec.ttlSecondsAfterFinished has run out (upstream's TTL-after-finished
// controller). The clock starts at the lastTransitionTime of the Job's
// Complete or Failed condition; the Job is deleted with foreground
// propagation, so its pods go first.
package ttlafterfinished

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"skiff/server/controller/worker"
)

// DefaultWorkers is upstream's --concurrent-ttl-after-finished-syncs.
const DefaultWorkers = 5

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; the Job informer is
	// taken from it.
	Informers informers.SharedInformerFactory
	// Recorder records a TTLExpired event on each Job deleted (upstream
	// records none; the event outlives the Job and says why it went).
	// When nil, events are sent to the API server as from
	// "ttl-after-finished-controller".
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many Jobs are handled at once (default 5).
	Workers int
	// Clock is the time source (real by default).
	Clock clock.WithTicker
}

type controller struct {
	log      *slog.Logger
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	workers  int
	jobs     batchlisters.JobLister
	queue    *worker.Queue
}

// Run deletes expired Jobs until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("ttl-after-finished controller: Client and Informers are required")
	}
	c := newController(cfg)
	defer c.queue.ShutDown()
	if c.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		defer b.Shutdown()
		c.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ttl-after-finished-controller"})
	}
	synced, unsubscribe, err := worker.Subscribe(worker.Subscription{
		Informer: cfg.Informers.Batch().V1().Jobs().Informer(),
		Handler:  cache.ResourceEventHandlerFuncs{AddFunc: c.enqueue, UpdateFunc: func(_, n any) { c.enqueue(n) }},
	})
	if err != nil {
		return fmt.Errorf("job informer: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	c.queue.Run(ctx, c.workers, c.sync)
	return nil
}

// newController applies the defaults; the recorder stays nil when none is
// given, for Run to fill.
func newController(cfg Config) *controller {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &controller{
		log: cfg.Logger, client: cfg.Client, clock: cfg.Clock, recorder: cfg.Recorder, workers: cfg.Workers,
		jobs:  cfg.Informers.Batch().V1().Jobs().Lister(),
		queue: worker.New(worker.Config{Name: "ttl_jobs_to_delete", Clock: cfg.Clock, Log: cfg.Logger, Message: "ttl after finished", Noun: "job"}),
	}
}

// enqueue queues finished Jobs with a TTL that are not already going.
func (c *controller) enqueue(obj any) {
	j, ok := obj.(*batchv1.Job)
	if ok && j.DeletionTimestamp == nil && needsCleanup(j) {
		c.queue.Add(j.Namespace + "/" + j.Name)
	}
}

// sync deletes the Job if its TTL has run out, or requeues it for when
// it will.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	job, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if expired, err := c.expired(key, job); err != nil || !expired {
		return err
	}
	// The cached TTL may be stale: a user may just have raised or removed
	// it. Only a fresh read decides the deletion.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get job: %w", err)
	}
	if expired, err := c.expired(key, fresh); err != nil || !expired {
		return err
	}
	fg := metav1.DeletePropagationForeground
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: &fg,
		// The Job read may have been replaced by one of the same name.
		Preconditions: &metav1.Preconditions{UID: &fresh.UID},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	c.recorder.Eventf(fresh, corev1.EventTypeNormal, "TTLExpired", "Job deleted %ds after it finished (ttlSecondsAfterFinished)", *fresh.Spec.TTLSecondsAfterFinished)
	return nil
}

// expired reports whether the job's TTL has run out; if it has not, the
// job is requeued for the moment it will.
func (c *controller) expired(key string, job *batchv1.Job) (bool, error) {
	if job.DeletionTimestamp != nil || !needsCleanup(job) {
		return false, nil
	}
	left, err := timeLeft(job, c.clock.Now())
	if err != nil {
		return false, err
	}
	if left > 0 {
		c.queue.AddAfter(key, left)
		return false, nil
	}
	return true, nil
}

// needsCleanup is a finished Job with a TTL.
func needsCleanup(j *batchv1.Job) bool {
	_, finished := finishTime(j)
	return j.Spec.TTLSecondsAfterFinished != nil && finished
}

// finishTime is when the Job finished: the lastTransitionTime of its
// Complete or Failed condition, else its completionTime. ok is false for
// an unfinished Job.
func finishTime(j *batchv1.Job) (t time.Time, ok bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			if !c.LastTransitionTime.IsZero() {
				return c.LastTransitionTime.Time, true
			}
			if j.Status.CompletionTime != nil {
				return j.Status.CompletionTime.Time, true
			}
			return time.Time{}, true
		}
	}
	return time.Time{}, false
}

// timeLeft is the TTL remaining at now.
func timeLeft(j *batchv1.Job, now time.Time) (time.Duration, error) {
	finished, ok := finishTime(j)
	if !ok || j.Spec.TTLSecondsAfterFinished == nil {
		return 0, fmt.Errorf("job %s/%s is not finished with a TTL", j.Namespace, j.Name)
	}
	if finished.IsZero() {
		return 0, fmt.Errorf("job %s/%s is finished but does not say when", j.Namespace, j.Name)
	}
	return finished.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second).Sub(now), nil
}
