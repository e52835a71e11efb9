// Package cronjob starts Jobs on a cron schedule (upstream's CronJob
// controller, v2): at each schedule time of spec.schedule, in
// spec.timeZone, it creates the Job "<cronjob>-<minutes since epoch>" from
// the job template, honouring the concurrency policy, the starting
// deadline and suspend, keeps status.active, lastScheduleTime and
// lastSuccessfulTime, and deletes finished jobs beyond the history limits.
//
// A CronJob is not polled: after each sync it is requeued for its next
// schedule time.
package cronjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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

// DefaultWorkers is upstream's --concurrent-cron-job-syncs.
const DefaultWorkers = 5

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; the CronJob and Job
	// informers are taken from it.
	Informers informers.SharedInformerFactory
	// Recorder records the events on CronJobs. When nil, events are sent
	// to the API server as from "cronjob-controller".
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many CronJobs are synced at once (default 5).
	Workers int
	// Clock is the time source, for the schedule and for requeue delays
	// (real by default); tests step a fake one.
	Clock clock.WithTicker
}

type controller struct {
	log      *slog.Logger
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	cronJobs batchlisters.CronJobLister
	jobs     batchlisters.JobLister
	queue    *worker.Queue
}

// Run schedules CronJobs until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("cronjob controller: Client and Informers are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	c := &controller{
		log: cfg.Logger, client: cfg.Client, clock: cfg.Clock, recorder: cfg.Recorder,
		cronJobs: cfg.Informers.Batch().V1().CronJobs().Lister(),
		jobs:     cfg.Informers.Batch().V1().Jobs().Lister(),
		queue: worker.New(worker.Config{Name: "cronjob", Clock: cfg.Clock, Log: cfg.Logger, Message: "cronjob sync", Noun: "cronjob",
			Quiet: func(err error) bool { return apierrors.IsConflict(err) || errors.Is(err, errStaleCache) }}),
	}
	defer c.queue.ShutDown()
	if c.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		defer b.Shutdown()
		c.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "cronjob-controller"})
	}
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: cfg.Informers.Batch().V1().CronJobs().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.queue.Enqueue,
			UpdateFunc: c.updateCronJob,
		}},
		worker.Subscription{Informer: cfg.Informers.Batch().V1().Jobs().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.jobChanged,
			UpdateFunc: func(_, n any) { c.jobChanged(n) },
			DeleteFunc: c.jobChanged,
		}},
	)
	if err != nil {
		return fmt.Errorf("cronjob controller: add event handler: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	c.queue.Run(ctx, cfg.Workers, c.syncAndRequeue)
	return nil
}

// syncAndRequeue syncs a CronJob and queues it again for its next
// schedule time, the only moment it has something to do unless it
// changes or one of its jobs does.
func (c *controller) syncAndRequeue(ctx context.Context, key string) error {
	requeue, err := c.sync(ctx, key)
	if err == nil && requeue != nil {
		c.queue.AddAfter(key, *requeue)
	}
	return err
}

// updateCronJob requeues at the new next schedule time when the schedule
// changed (an earlier time replaces the pending one; a later one makes
// the pending sync a no-op), and at once for any other change.
func (c *controller) updateCronJob(oldObj, newObj any) {
	old, ok1 := oldObj.(*batchv1.CronJob)
	cur, ok2 := newObj.(*batchv1.CronJob)
	if !ok1 || !ok2 {
		return
	}
	if old.Spec.Schedule == cur.Spec.Schedule && deref(old.Spec.TimeZone) == deref(cur.Spec.TimeZone) {
		c.queue.Enqueue(cur)
		return
	}
	sched, err := parseSchedule(cur)
	if err != nil {
		c.recorder.Eventf(cur, corev1.EventTypeWarning, "UnParseableCronJobSchedule", "unparseable schedule for cronjob: %s", cur.Spec.Schedule)
		return
	}
	c.queue.EnqueueAfter(cur, untilNext(cur, c.clock.Now(), sched))
}

// jobChanged wakes the CronJob controlling a job.
func (c *controller) jobChanged(obj any) {
	j, ok := worker.Unwrap[*batchv1.Job](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(j)
	if ref == nil || ref.Kind != cronJobKind.Kind || ref.APIVersion != cronJobKind.GroupVersion().String() {
		return
	}
	cj, err := c.cronJobs.CronJobs(j.Namespace).Get(ref.Name)
	if err != nil || cj.UID != ref.UID {
		return
	}
	c.queue.Enqueue(cj)
}
