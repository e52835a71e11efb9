// Package worker runs the keyed work queue most controllers are built
// around: informer handlers add the key ("namespace/name", or the name of
// a cluster-scoped object) of whatever changed, and workers sync one key
// at a time until the controller stops. The queue never hands a key to
// two workers at once and folds the changes that arrive during a sync
// into one more sync after it, so a sync can always read the latest state
// from the cache instead of acting on events.
package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Config describes a queue and how its workers report failed syncs.
type Config struct {
	// Name labels the queue's metrics.
	Name string
	// Clock times delays and retries (the real clock when nil); tests
	// step a fake one.
	Clock clock.WithTicker
	// RateLimiter spaces the retries of a failing key (client-go's
	// default for controllers when nil).
	RateLimiter workqueue.TypedRateLimiter[string]

	// Log receives the failures (slog.Default() when nil).
	Log *slog.Logger
	// Message is the warning a failed sync logs, with the key under the
	// attribute Noun and the error under "err".
	Message, Noun string
	// Quiet picks the failures that are part of normal operation, such as
	// a write conflict or a cache that has not yet seen the controller's
	// own last write. They are retried like any other, but logged only at
	// debug level as QuietMessage, or not at all when that is empty: a
	// warning would cry wolf.
	Quiet        func(error) bool
	QuietMessage string
}

// Queue is a rate-limited queue of keys and the loop of its workers. The
// embedded interface is there for the controller's own Add and AddAfter
// calls, from handlers and from syncs that want another look later.
type Queue struct {
	workqueue.TypedRateLimitingInterface[string]
	cfg Config
}

// New makes an empty queue.
func New(cfg Config) *Queue {
	limiter := cfg.RateLimiter
	if limiter == nil {
		limiter = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: cfg.Name, Clock: cfg.Clock})
	return &Queue{TypedRateLimitingInterface: q, cfg: cfg}
}

// Run syncs keys with the given number of workers until ctx ends, then
// shuts the queue down and returns once each worker has finished the key
// in hand.
//
// A key whose sync fails comes back after a delay that grows with each
// consecutive failure; a success resets the delay. A failure once ctx has
// ended is the cancellation's doing and is neither logged nor retried:
// the queue is going away.
func (q *Queue) Run(ctx context.Context, workers int, syncKey func(ctx context.Context, key string) error) {
	stop := context.AfterFunc(ctx, q.ShutDown)
	defer stop()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for q.next(ctx, syncKey) {
			}
		})
	}
	wg.Wait()
}

// next syncs one key; it reports false once the queue is shut down.
func (q *Queue) next(ctx context.Context, syncKey func(context.Context, string) error) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := syncKey(ctx, key)
	switch {
	case err == nil:
		q.Forget(key)
	case ctx.Err() != nil:
		// Stopping: see Run.
	case q.cfg.Quiet != nil && q.cfg.Quiet(err):
		if q.cfg.QuietMessage != "" {
			q.cfg.Log.Debug(q.cfg.QuietMessage, q.cfg.Noun, key, "err", err)
		}
		q.AddRateLimited(key)
	default:
		q.cfg.Log.Warn(q.cfg.Message, q.cfg.Noun, key, "err", err)
		q.AddRateLimited(key)
	}
	return true
}

// Enqueue adds the key of obj, which may be the tombstone of a deleted
// object; it serves as an informer's AddFunc or DeleteFunc.
func (q *Queue) Enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		q.Add(key)
	}
}

// EnqueueUpdate is Enqueue as an informer's UpdateFunc: the key of the
// object's new state.
func (q *Queue) EnqueueUpdate(_, cur any) { q.Enqueue(cur) }

// EnqueueAfter adds the key of obj once d has passed.
func (q *Queue) EnqueueAfter(obj any, d time.Duration) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		q.AddAfter(key, d)
	}
}

// Handlers enqueue the object of every add, update and delete: the
// handlers of the informer of the objects the controller syncs.
func (q *Queue) Handlers() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: q.Enqueue, UpdateFunc: q.EnqueueUpdate, DeleteFunc: q.Enqueue}
}

// Unwrap returns obj as a T. A DeleteFunc is handed a tombstone instead
// of the object when the informer missed the deletion and only knows the
// object's last state; Unwrap looks inside it.
func Unwrap[T any](obj any) (T, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

// Subscription is a handler for the events of a shared informer.
type Subscription struct {
	Informer cache.SharedInformer
	Handler  cache.ResourceEventHandler
}

// Subscribe adds the handlers to their informers. synced reports whether
// every handler has been handed its informer's initial list; unsubscribe
// takes the handlers off again, since the informers are shared and
// outlive the controller. When a handler cannot be added, those added
// already are taken off before the error is returned.
func Subscribe(subs ...Subscription) (synced []cache.InformerSynced, unsubscribe func(), err error) {
	var removes []func()
	unsubscribe = func() {
		for i := len(removes) - 1; i >= 0; i-- {
			removes[i]()
		}
	}
	for _, s := range subs {
		reg, err := s.Informer.AddEventHandler(s.Handler)
		if err != nil {
			unsubscribe()
			return nil, nil, err
		}
		removes = append(removes, func() { _ = s.Informer.RemoveEventHandler(reg) })
		synced = append(synced, reg.HasSynced)
	}
	return synced, unsubscribe, nil
}
