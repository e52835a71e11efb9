// Package garbagecollector deletes objects whose owners are gone and
// carries out foreground and orphan deletion (upstream's garbage
// collector, much smaller).
//
// Every collectable resource from discovery is watched through metadata
// informers, which feed a graph of ownerReferences. Changes in the graph
// queue work: attemptToDelete for objects that may be garbage, for owners
// deleted in the foreground (foregroundDeletion finalizer) and for owners
// referenced but not yet seen; attemptToOrphan for owners deleted with the
// orphan finalizer. Every decision to delete or to strip a reference is
// taken on live reads from the API server, never on the informers' caches
// alone: an owner missing from a cache is not a missing owner.
package garbagecollector

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"skiff/server/controller/worker"
)

// Config wires the collector.
type Config struct {
	// Metadata reads, patches and deletes objects of any resource. It must
	// be allowed to get, list, watch, patch and delete everything.
	Metadata metadata.Interface
	// Discovery tells which resources exist; it is re-read periodically so
	// that new resources (CRDs) are collected too.
	Discovery discovery.DiscoveryInterface
	Logger    *slog.Logger
	// ResyncPeriod is the informers' resync: every object is re-examined
	// this often, a safety net for changes whose handling failed for good.
	// Zero disables it.
	ResyncPeriod time.Duration

	// rediscover is how often discovery is re-read (30 s when zero); tests
	// shorten it.
	rediscover time.Duration
}

const (
	defaultRediscover = 30 * time.Second
	// Workers mostly wait on the API server; a handful keeps a 2-core
	// machine responsive while a big deletion cascades.
	deleteWorkers = 4
	orphanWorkers = 2
)

type collector struct {
	cfg     Config
	log     *slog.Logger
	period  time.Duration
	api     cluster
	mapping atomic.Pointer[mapping]
	graph   *graph
	absent  *absentCache

	toDelete workqueue.TypedRateLimitingInterface[item]
	toOrphan workqueue.TypedRateLimitingInterface[objectRef]
	// workerLock is held for reading while a worker handles an item and
	// for writing while newly watched resources are loaded into the graph,
	// so that nothing is orphaned or finalized on a graph that is still
	// missing dependents (upstream pauses its workers the same way).
	workerLock sync.RWMutex
	// monitors is only touched by Run's goroutine.
	monitors map[schema.GroupVersionResource]context.CancelFunc
}

// Run collects garbage until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Metadata == nil || cfg.Discovery == nil {
		return errors.New("garbagecollector: Metadata and Discovery are required")
	}
	c := &collector{
		cfg:      cfg,
		log:      cfg.Logger,
		period:   cfg.rediscover,
		graph:    newGraph(),
		absent:   newAbsentCache(),
		toDelete: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[item]()),
		toOrphan: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[objectRef]()),
		monitors: map[schema.GroupVersionResource]context.CancelFunc{},
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.period <= 0 {
		c.period = defaultRediscover
	}
	c.api = metadataCluster{client: cfg.Metadata, mapping: &c.mapping}
	var wg sync.WaitGroup
	defer func() {
		// Shutting the queues down is what ends the workers.
		c.toDelete.ShutDown()
		c.toOrphan.ShutDown()
		wg.Wait()
		c.stopMonitors()
	}()

	// Workers start once the first discovery's resources are loaded:
	// orphaning on an empty graph would miss every dependent.
	for !c.resync(ctx) {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.period):
		}
	}
	for range deleteWorkers {
		wg.Go(func() { c.deleteWorker(ctx) })
	}
	for range orphanWorkers {
		wg.Go(func() { c.orphanWorker(ctx) })
	}
	t := time.NewTicker(c.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.resync(ctx)
		}
	}
}

// resync reads discovery and brings the informers in line with it: new
// resources get one (loaded before workers go on), vanished ones lose
// theirs. It reports whether discovery worked.
func (c *collector) resync(ctx context.Context) bool {
	m, watch, complete, err := discover(c.cfg.Discovery)
	if err != nil {
		c.log.Warn("garbage collector discovery failed", "err", err)
		return false
	}
	if !complete {
		c.log.Warn("garbage collector discovery incomplete; keeping the monitors of missing groups")
	}
	c.mapping.Store(m)
	want := map[schema.GroupVersionResource]resource{}
	for _, r := range watch {
		want[r.gvr] = r
	}
	var added []resource
	for gvr, r := range want {
		if c.monitors[gvr] == nil {
			added = append(added, r)
		}
	}
	for gvr, stop := range c.monitors {
		if _, ok := want[gvr]; !ok && complete {
			stop()
			delete(c.monitors, gvr)
			c.log.Info("garbage collector stopped watching", "resource", gvr.String())
		}
	}
	if len(added) == 0 {
		return true
	}
	c.workerLock.Lock()
	defer c.workerLock.Unlock()
	var synced []cache.InformerSynced
	for _, r := range added {
		hasSynced, err := c.startMonitor(ctx, r)
		if err != nil {
			c.log.Warn("garbage collector cannot watch", "resource", r.gvr.String(), "err", err)
			continue
		}
		synced = append(synced, hasSynced)
	}
	// A resource that never lists (a broken aggregated API) must not stop
	// collection for good: wait one period, then go on without it.
	wctx, cancel := context.WithTimeout(ctx, c.period)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), synced...) && ctx.Err() == nil {
		c.log.Warn("garbage collector: some resources did not load in time; collecting anyway")
	}
	c.log.Info("garbage collector watching new resources", "count", len(added), "objects", c.graph.size())
	return true
}

// startMonitor runs a metadata informer for one resource, feeding the
// graph. The returned check passes once the initial list has reached the
// graph (the handler's sync, not just the informer's store).
func (c *collector) startMonitor(ctx context.Context, r resource) (cache.InformerSynced, error) {
	inf := metadatainformer.NewFilteredMetadataInformer(c.cfg.Metadata, r.gvr, metav1.NamespaceAll, c.cfg.ResyncPeriod, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(slim); err != nil {
		return nil, err
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observed(r, obj, false) },
		UpdateFunc: func(old, obj any) { c.observed(r, obj, false); c.resynced(r, old, obj) },
		DeleteFunc: func(obj any) { c.observed(r, obj, true) },
	})
	if err != nil {
		return nil, err
	}
	mctx, stop := context.WithCancel(ctx)
	c.monitors[r.gvr] = stop
	go inf.Run(mctx.Done())
	return reg.HasSynced, nil
}

func (c *collector) stopMonitors() {
	for _, stop := range c.monitors {
		stop()
	}
}

// slim drops what the graph never reads before the informer stores it:
// the collector holds every object in the cluster.
func slim(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ManagedFields, m.Annotations, m.Labels = nil, nil, nil
	}
	return obj, nil
}

// observed feeds one informer event into the graph. Graph changes are
// quick and take the graph's lock, so they run in the informer's handler
// rather than through a queue of their own.
func (c *collector) observed(r resource, obj any, deleted bool) {
	m, ok := worker.Unwrap[*metav1.PartialObjectMetadata](obj)
	if !ok {
		return
	}
	ref := r.refOf(m)
	if !deleted {
		c.enqueue(c.graph.observe(nodeFor(ref, m)))
		return
	}
	// A deleted UID never comes back: remember it, so that its dependents
	// need no lookup each.
	if len(c.graph.dependentsOf(ref.UID)) > 0 {
		c.absent.add(ref)
	}
	c.enqueue(c.graph.forget(ref))
}

// resynced looks again at an owner still waiting for the collector when
// the informer resyncs it (same resourceVersion): the graph acts on
// changes only, and this is the safety net ResyncPeriod promises.
func (c *collector) resynced(r resource, old, obj any) {
	o, ok1 := old.(*metav1.PartialObjectMetadata)
	m, ok2 := obj.(*metav1.PartialObjectMetadata)
	if !ok1 || !ok2 || o.ResourceVersion != m.ResourceVersion {
		return
	}
	n := nodeFor(r.refOf(m), m)
	switch {
	case n.orphan:
		c.enqueue([]work{orphanWork(n.ref)})
	case n.foreground:
		c.enqueue([]work{deleteWork(n.ref)})
	}
}

func (c *collector) enqueue(ws []work) {
	for _, w := range ws {
		if w.orphan {
			c.toOrphan.Add(w.item.ref)
		} else {
			c.toDelete.Add(w.item)
		}
	}
}

func (c *collector) deleteWorker(ctx context.Context) {
	for {
		it, quit := c.toDelete.Get()
		if quit {
			return
		}
		c.workerLock.RLock()
		requeue, err := c.attemptToDelete(ctx, it)
		c.workerLock.RUnlock()
		done(c, c.toDelete, it, it.ref, requeue, err)
	}
}

func (c *collector) orphanWorker(ctx context.Context) {
	for {
		ref, quit := c.toOrphan.Get()
		if quit {
			return
		}
		c.workerLock.RLock()
		err := c.attemptToOrphan(ctx, ref)
		c.workerLock.RUnlock()
		done(c, c.toOrphan, ref, ref, false, err)
	}
}

// done settles a handled item: failures and requeues come back with
// growing delays, successes are forgotten.
func done[T comparable](c *collector, q workqueue.TypedRateLimitingInterface[T], it T, ref objectRef, requeue bool, err error) {
	defer q.Done(it)
	switch {
	case errors.Is(err, errInvalidOwnerScope):
		c.log.Warn("garbage collector ignores object", "object", ref, "err", err)
		q.Forget(it)
	case err != nil:
		c.log.Warn("garbage collector will retry", "object", ref, "err", err)
		q.AddRateLimited(it)
	case requeue:
		q.AddRateLimited(it)
	default:
		q.Forget(it)
	}
}

// absentCache remembers objects known to be gone. A UID never comes back,
// so a remembered absence never goes stale; it only saves lookups.
type absentCache struct {
	mu  sync.Mutex
	set map[absentKey]struct{}
}

// absentKey leaves out the version: all versions serve the same objects.
type absentKey struct {
	group, kind, namespace, name string
	uid                          types.UID
}

// absentCacheSize bounds memory; when full, the cache starts over.
const absentCacheSize = 4096

func newAbsentCache() *absentCache { return &absentCache{set: map[absentKey]struct{}{}} }

func keyOf(r objectRef) absentKey {
	return absentKey{group: r.group(), kind: r.Kind, namespace: r.Namespace, name: r.Name, uid: r.UID}
}

func (a *absentCache) add(r objectRef) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.set) >= absentCacheSize {
		clear(a.set)
	}
	a.set[keyOf(r)] = struct{}{}
}

func (a *absentCache) has(r objectRef) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.set[keyOf(r)]
	return ok
}
