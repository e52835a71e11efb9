// Package resourcequota keeps every ResourceQuota's status true, as
// upstream's resource quota controller: status.hard is spec.hard and
// status.used is measured from the objects of the namespace (with the
// evaluators of server/quota, which the admission check shares). Admission
// charges creates as they happen; this controller gives usage back when
// objects go away or stop counting (a deleted object, a pod that finished,
// a service that lost its node ports), and a periodic full recalculation
// catches everything else.
package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"skiff/server/controller/worker"
	"skiff/server/quota"
)

const (
	// defaultWorkers matches upstream's --concurrent-resource-quota-syncs,
	// for each of the two queues.
	defaultWorkers = 5
	// defaultResyncPeriod is upstream's --resource-quota-sync-period: how
	// often every quota is recalculated in full.
	defaultResyncPeriod = 5 * time.Minute
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; the ResourceQuota,
	// Pod, Service and PersistentVolumeClaim informers are taken from it.
	Informers informers.SharedInformerFactory
	// Metadata lists and watches the objects that quotas only count, of
	// any resource (count/<resource>.<group>, custom resources included).
	Metadata metadata.Interface
	// Discovery tells which resources are served, and at which version.
	Discovery discovery.DiscoveryInterface
	Logger    *slog.Logger
	// ResyncPeriod is how often every quota is recalculated in full (5
	// minutes when zero).
	ResyncPeriod time.Duration
	// Workers is how many quotas each queue syncs at once (5 when zero).
	Workers int
	// Now tells when a deleting pod's grace period has run out (time.Now
	// when nil).
	Now func() time.Time
}

type controller struct {
	client   kubernetes.Interface
	log      *slog.Logger
	registry *quota.Registry
	res      *resources
	quotas   corelisters.ResourceQuotaLister
	monitors *monitors
	now      func() time.Time
	// fast holds the quotas whose status is wrong or missing, or whose
	// objects just gave usage back: what a user or the admission check is
	// waiting for. slow holds the periodic full recalculation, so that many
	// quotas resyncing never delay them.
	fast, slow *worker.Queue
}

// Run keeps quota statuses up to date until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Metadata == nil || cfg.Discovery == nil {
		return errors.New("resourcequota controller: Client, Informers, Metadata and Discovery are required")
	}
	c := &controller{client: cfg.Client, log: cfg.Logger, now: cfg.Now}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.registry = quota.NewRegistry(c.now)
	c.res = &resources{client: cfg.Client, metadata: cfg.Metadata, discovery: cfg.Discovery}
	c.monitors = newMonitors(cfg.Metadata, c.log, c.replenish, c.replenishEverywhere)
	newQueue := func(name string) *worker.Queue {
		return worker.New(worker.Config{Name: name, Log: c.log, Message: "resource quota sync", Noun: "quota",
			// The quota changed since the cache copy (an admission charge):
			// the retry measures again.
			Quiet: apierrors.IsConflict, QuietMessage: "resource quota sync conflict"})
	}
	c.fast, c.slow = newQueue("resourcequota_priority"), newQueue("resourcequota_primary")
	defer c.fast.ShutDown()
	defer c.slow.ShutDown()
	resync := cfg.ResyncPeriod
	if resync <= 0 {
		resync = defaultResyncPeriod
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = defaultWorkers
	}

	core := cfg.Informers.Core().V1()
	quotaInf := core.ResourceQuotas()
	c.quotas = quotaInf.Lister()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: quotaInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addQuota, UpdateFunc: c.updateQuota, DeleteFunc: c.deleteQuota}},
		worker.Subscription{Informer: core.Pods().Informer(), Handler: c.replenishing(podsGR, c.podChanged)},
		worker.Subscription{Informer: core.Services().Informer(), Handler: c.replenishing(servicesGR, c.usageChanged(servicesGR))},
		worker.Subscription{Informer: core.PersistentVolumeClaims().Informer(), Handler: c.replenishing(pvcsGR, c.usageChanged(pvcsGR))},
	)
	if err != nil {
		return fmt.Errorf("resourcequota controller informer: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}

	var wg sync.WaitGroup
	wg.Go(func() { c.fast.Run(ctx, workers, c.sync) })
	wg.Go(func() { c.slow.Run(ctx, workers, c.sync) })
	wg.Go(func() { c.resyncEvery(ctx, resync) })
	wg.Wait()
	c.monitors.wait()
	return nil
}

// resyncEvery recalculates every quota each period, as upstream's full
// resync: usage that no event gives back (a pod past its deletion grace
// period, objects deleted while the controller was away) and statuses
// changed by hand come right within one period.
func (c *controller) resyncEvery(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Monitors no quota needs any more, or of resources gone (a
		// deleted CRD), are stopped.
		discovered := c.res.refresh() == nil
		quotas, err := c.quotas.List(labels.Everything())
		if err != nil {
			continue
		}
		keep := map[schema.GroupResource]bool{}
		for _, q := range quotas {
			for gr := range monitoredResources(q) {
				keep[gr] = !discovered || c.res.served(gr)
			}
			c.slow.Enqueue(q)
		}
		c.monitors.retain(keep)
	}
}

// sync measures one quota and writes its status when it changed.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	q, err := c.quotas.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	since := time.Now()
	c.watchCounted(ctx, q, since)
	status, calcErr := c.registry.Status(ctx, q, c.res.lister(since))
	if calcErr != nil {
		calcErr = fmt.Errorf("measure quota %s: %w", key, calcErr)
	}
	if quota.Equals(status.Hard, q.Status.Hard) && quota.Equals(status.Used, q.Status.Used) {
		return calcErr
	}
	upd := q.DeepCopy()
	upd.Status = status
	_, err = c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return calcErr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("update status of quota %s: %w", key, err), calcErr)
	}
	return calcErr
}

// watchCounted starts the monitors of the resources q counts that the
// typed informers do not follow.
func (c *controller) watchCounted(ctx context.Context, q *corev1.ResourceQuota, since time.Time) {
	for gr := range monitoredResources(q) {
		gvr, ok, err := c.res.lookup(gr, since)
		if err != nil {
			c.log.Warn("resource quota discovery", "err", err)
			return
		}
		if ok {
			c.monitors.ensure(ctx, gr, gvr)
		}
	}
}

// monitoredResources are the group-resources q counts that need a
// monitor of their own.
func monitoredResources(q *corev1.ResourceQuota) map[schema.GroupResource]bool {
	out := map[schema.GroupResource]bool{}
	for name := range q.Spec.Hard {
		if gr, ok := countedResource(name); ok && !typed[gr] && !quota.Ignored(gr) {
			out[gr] = true
		}
	}
	return out
}
