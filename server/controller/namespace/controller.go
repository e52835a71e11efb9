// Package namespace empties namespaces that are being deleted and then
// releases them (upstream's namespace controller). The API server only
// marks a deleted namespace Terminating while its spec.finalizers holds
// "kubernetes"; this controller deletes everything inside it, reports
// progress in status conditions, and removes that finalizer through the
// finalize subresource once nothing is left, so the server can delete it.
package namespace

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"skiff/server/controller/worker"
)

const (
	// deletionGracePeriod delays the first pass over a newly terminating
	// namespace, as upstream does, so that a create which passed the
	// "namespace is not terminating" check just before the delete has
	// landed before the content is listed; otherwise it would only be
	// caught on a retry.
	deletionGracePeriod = 5 * time.Second
	// resyncPeriod re-offers every namespace now and then, a safety net
	// for a requeue lost to a restart of the loop.
	resyncPeriod = 5 * time.Minute
	// workers bounds how many namespaces are emptied at once; one namespace
	// with much content must not hold up the others.
	workers = 2
)

// Config wires the controller.
type Config struct {
	Client   kubernetes.Interface
	Metadata metadata.Interface
	// Discovery finds the namespaced resources to empty. It is asked on
	// every pass, so resources added since (CRDs) are not missed.
	Discovery discovery.DiscoveryInterface
	Logger    *slog.Logger
}

// Run empties terminating namespaces until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return run(ctx, cfg, deletionGracePeriod)
}

// run is Run with the initial delay as a parameter, so tests need not wait.
func run(ctx context.Context, cfg Config, grace time.Duration) error {
	if cfg.Client == nil || cfg.Metadata == nil || cfg.Discovery == nil {
		return errors.New("namespace controller: Client, Metadata and Discovery are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	factory := informers.NewSharedInformerFactory(cfg.Client, resyncPeriod)
	nsInf := factory.Core().V1().Namespaces().Informer()
	q := worker.New(worker.Config{Name: "namespace", RateLimiter: rateLimiter(), Log: log, Message: "namespace deletion", Noun: "namespace"})
	defer q.ShutDown()
	enqueue := func(obj any) {
		// Only namespaces being deleted concern this controller; a live
		// namespace is not even queued.
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			q.AddAfter(ns.Name, grace)
		}
	}
	if _, err := nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nsInf.HasSynced) {
		return ctx.Err()
	}
	d := &deleter{cfg: cfg, log: log}
	q.Run(ctx, workers, func(ctx context.Context, name string) error {
		err := d.sync(ctx, name)
		var remaining *remainingError
		if errors.As(err, &remaining) {
			// Content that is going away by itself (finalizers, graceful pod
			// termination) is waited for, not treated as a failure: look
			// again after half the estimate, as upstream does.
			log.Debug("content remaining", "namespace", name, "estimateSeconds", remaining.estimate)
			q.AddAfter(name, time.Duration(remaining.estimate/2+1)*time.Second)
			return nil
		}
		return err
	})
	return nil
}

// rateLimiter retries faster than the default controller limiter and never
// waits more than a minute (upstream's choice): a stuck namespace blocks
// whoever is waiting for it to go, so retries stay frequent, while the
// bucket keeps a crowd of failing namespaces from spinning.
func rateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, time.Minute),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
