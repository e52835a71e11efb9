package netproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"skiff/netproxy/nft"
)

// ruleWriter is the kernel's nftables as the proxier uses it.
type ruleWriter interface {
	// Apply sends tx to the kernel as one atomic batch.
	Apply(tx *nft.Tx) error
	// Existing lists the names of the chains and of the named sets and
	// maps now in table t (none when the table is missing).
	Existing(t nft.Table) (chains, sets []string, err error)
	// Generation is the network namespace's nftables ruleset generation,
	// which every commit (by anyone, to any table) bumps.
	Generation() (uint32, error)
	// Close releases the connection.
	Close() error
}

// fullSyncKey is the queue item asking for a full resync: no Service key
// is empty, and going through the queue lets a full resync absorb every
// change queued with it and be retried with back-off like any key.
const fullSyncKey = ""

// periodicKey is the SyncPeriod tick's queue item: a full resync only if
// the ruleset may have changed behind the proxier's back (see resyncDue).
// Service keys always hold a "/".
const periodicKey = "periodic"

// hostPortsKey asks for the host port mappings to be brought up to date.
const hostPortsKey = "hostports"

// isServiceKey tells a Service's key from the proxier's own queue items.
func isServiceKey(k string) bool { return k != fullSyncKey && k != periodicKey && k != hostPortsKey }

// sliceIndex indexes EndpointSlices by their Service's key. The name is
// the proxier's own: other users of the shared informer add theirs.
const sliceIndex = "skiff-netproxy-service"

// Proxier keeps the node's nftables Service rules in line with the API's
// Services and EndpointSlices.
type Proxier struct {
	cfg     Config
	log     *slog.Logger
	opts    modelOptions
	metrics *metrics
	tables  []*table
	health  *healthChecks

	services     corelisters.ServiceLister
	slices       cache.Indexer
	cachesSynced []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]

	// openRules and openConntrack reach the kernel in a network
	// namespace; unit tests put recorders in their place.
	openRules     func(netns string) (ruleWriter, error)
	openConntrack func(netns string) (conntrackCleaner, error)
	// enableLocalnet turns route_localnet on in the namespace, once a
	// full sync has installed the rule that keeps the network off the
	// loopback addresses (localnetOn: done).
	enableLocalnet func(netns string) error
	localnetOn     bool

	// needFull is set by a failed sync: until a full resync succeeds,
	// the installed state may not be what the kernel has.
	needFull bool
	lastSync time.Time

	// gen is the ruleset generation the proxier's last batch produced
	// (genKnown: it could be read). dirty says that someone else committed
	// between a reading and the proxier's own commit, so the generation no
	// longer proves the table is as written. lastFull is the last
	// successful full rewrite. A periodic tick uses them to skip a resync
	// that would rewrite the table as it already is.
	gen      uint32
	genKnown bool
	dirty    bool
	lastFull time.Time
}

// New registers the Service and EndpointSlice informers of cfg.Informers;
// start the factory after New, then Run.
func New(cfg Config) (*Proxier, error) {
	if cfg.Informers == nil {
		return nil, errors.New("netproxy: Config.Informers is required")
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 30 * time.Second
	}
	if cfg.FullSyncPeriod <= 0 {
		cfg.FullSyncPeriod = time.Hour
	}
	if cfg.TableName == "" {
		cfg.TableName = "skiff"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("netproxy: %w", err)
	}
	p := &Proxier{
		cfg:     cfg,
		log:     log.With("component", "netproxy"),
		opts:    modelOptions{nodeName: cfg.NodeName, localServiceIPs: cfg.LocalServiceIPs},
		metrics: m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, cfg.SyncPeriod),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "netproxy"}),
		openRules:      func(ns string) (ruleWriter, error) { return nft.Open(nft.Options{NetNS: ns}) },
		openConntrack:  openConntrack,
		enableLocalnet: enableRouteLocalnet,
	}
	p.health = newHealthChecks(cfg.NodeName, cfg.NetNS, p.log)
	for _, fam := range families(cfg.NodeIPs, familyConfig{clusterCIDR: cfg.ClusterCIDR, serviceCIDRs: cfg.ServiceCIDRs, localServiceIPs: cfg.LocalServiceIPs}) {
		p.tables = append(p.tables, newTable(fam, cfg.TableName))
	}

	svcInf := cfg.Informers.Core().V1().Services()
	sliceInf := cfg.Informers.Discovery().V1().EndpointSlices()
	if err := sliceInf.Informer().AddIndexers(cache.Indexers{sliceIndex: indexByService}); err != nil {
		return nil, fmt.Errorf("netproxy: EndpointSlice index: %w", err)
	}
	if _, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.serviceChanged,
		UpdateFunc: func(_, cur any) { p.serviceChanged(cur) },
		DeleteFunc: p.serviceChanged,
	}); err != nil {
		return nil, fmt.Errorf("netproxy: Service handler: %w", err)
	}
	if _, err := sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: p.sliceChanged,
		UpdateFunc: func(old, cur any) {
			p.sliceChanged(old)
			p.sliceChanged(cur)
		},
		DeleteFunc: p.sliceChanged,
	}); err != nil {
		return nil, fmt.Errorf("netproxy: EndpointSlice handler: %w", err)
	}
	p.services = svcInf.Lister()
	p.slices = sliceInf.Informer().GetIndexer()
	p.cachesSynced = []cache.InformerSynced{svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced}
	return p, nil
}

func indexByService(obj any) ([]string, error) {
	sl, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	if key := serviceKey(sl); key != "" {
		return []string{key}, nil
	}
	return nil, nil
}

// HostPortsChanged tells the proxier that Config.HostPorts may list
// something else now (a pod got its address, or went away): the mappings
// are rewritten at the next sync, with whatever Services are queued.
func (p *Proxier) HostPortsChanged() { p.queue.Add(hostPortsKey) }

func (p *Proxier) serviceChanged(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil && key != fullSyncKey {
		p.queue.Add(key)
	}
}

func (p *Proxier) sliceChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if sl, ok := obj.(*discoveryv1.EndpointSlice); ok {
		if key := serviceKey(sl); key != "" {
			p.queue.Add(key)
		}
	}
}

// Run waits for the informer caches, writes the whole ruleset, then keeps
// it up to date until ctx ends: each batch of queued Services in one
// incremental batch; everything after a failure, and at a SyncPeriod tick
// when the ruleset may have changed behind its back (resyncDue). Run is
// called once.
func (p *Proxier) Run(ctx context.Context) error {
	defer p.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), p.cachesSynced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("netproxy: informer caches never synced")
	}
	w, err := p.openRules(p.cfg.NetNS)
	if err != nil {
		return fmt.Errorf("netproxy: %w", err)
	}
	defer w.Close()
	ct, err := p.openConntrack(p.cfg.NetNS)
	if err != nil {
		return fmt.Errorf("netproxy: %w", err)
	}
	defer ct.Close()

	stop := context.AfterFunc(ctx, p.queue.ShutDown)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.cfg.SyncPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.queue.Add(periodicKey)
			}
		}
	})
	p.queue.Add(fullSyncKey)
	for p.next(ctx, w, ct) {
	}
	wg.Wait()
	p.health.closeAll()
	return nil
}

// next takes everything queued, syncs it in one batch and reports false
// once the queue is shut down.
func (p *Proxier) next(ctx context.Context, w ruleWriter, ct conntrackCleaner) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	keys := []string{key}
	if wait := p.cfg.MinSyncInterval - time.Since(p.lastSync); wait > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	for p.queue.Len() > 0 {
		k, quit := p.queue.Get()
		if quit {
			break
		}
		keys = append(keys, k)
	}
	full := p.needFull || slices.Contains(keys, fullSyncKey)
	if !full && slices.Contains(keys, periodicKey) {
		start := time.Now()
		if full = p.resyncDue(w); !full {
			p.metrics.resyncSkipped.Inc()
			p.report(&SyncResult{Full: true, Skipped: true, Duration: time.Since(start)})
		}
	}
	var res SyncResult
	if full || slices.ContainsFunc(keys, isServiceKey) || slices.Contains(keys, hostPortsKey) {
		res = p.sync(keys, full, w, ct)
		p.lastSync = time.Now()
	}
	for _, k := range keys {
		// A failed sync is retried as a full resync, whose back-off must
		// keep growing while it fails: only success forgets it.
		if res.Err == nil || k != fullSyncKey {
			p.queue.Forget(k)
		}
		p.queue.Done(k)
	}
	if res.Err != nil && ctx.Err() == nil {
		p.needFull = true
		p.queue.AddRateLimited(fullSyncKey)
	}
	return true
}

// resyncDue says whether a periodic tick must rewrite the whole ruleset:
// when the generation is not the one the proxier's last batch produced
// (someone edited nftables, by hand or otherwise), when someone committed
// during one of its syncs, or when the last full rewrite is older than
// FullSyncPeriod. Otherwise the kernel holds what the proxier wrote and
// the check cost one small netlink request.
func (p *Proxier) resyncDue(w ruleWriter) bool {
	if p.dirty || !p.genKnown || time.Since(p.lastFull) >= p.cfg.FullSyncPeriod {
		return true
	}
	gen, ok := p.generation(w)
	return !ok || gen != p.gen
}

// generation reads the ruleset generation. Failing to is logged, not an
// error: it only costs a full resync at the next tick.
func (p *Proxier) generation(w ruleWriter) (uint32, bool) {
	gen, err := w.Generation()
	if err != nil {
		p.log.Warn("read nftables ruleset generation", "err", err)
		return 0, false
	}
	return gen, true
}

// genTracker follows the ruleset generation through one sync's batches:
// each must move it by exactly its own commit, else someone else
// committed in between.
type genTracker struct {
	// expect is the generation the next batch should start from (known:
	// there is one to expect).
	expect  uint32
	known   bool
	foreign bool
}

// applied records one batch: before is the generation read before it
// (beforeOK: read at all), after the one read after it was committed.
func (g *genTracker) applied(before uint32, beforeOK bool, after uint32, afterOK bool, commits uint32) {
	if !beforeOK || !afterOK || (g.known && before != g.expect) || after != before+commits {
		g.foreign = true
	}
	g.expect, g.known = after, afterOK
}

// sync writes the given Services (or all of them when full) to every
// table, and reports on it.
func (p *Proxier) sync(keys []string, full bool, w ruleWriter, ct conntrackCleaner) SyncResult {
	start := time.Now()
	res := SyncResult{Full: full}
	var src serviceSource
	// hps is nil when the host ports need no rewrite.
	var hps *[]HostPort
	if p.cfg.HostPorts != nil && (full || slices.Contains(keys, hostPortsKey)) {
		list := p.cfg.HostPorts.HostPorts()
		hps = &list
	}
	if full {
		keys, src = p.snapshot()
	} else {
		// On a copy: the caller marks its keys Done afterwards, and
		// DeleteFunc in place would shift them and zero the tail (to
		// fullSyncKey), so the proxier's own keys (hostPortsKey,
		// periodicKey) were never marked Done and every later Add of them
		// was swallowed by the queue: host ports never synced again.
		keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !isServiceKey(k) })
		src = p.lookup
	}
	// An incremental batch is only right if the kernel still holds what
	// the last one left: a generation other than that one means someone
	// edited the ruleset since, and the next tick must repair it. A full
	// resync expects nothing: it rewrites whatever is there.
	g := genTracker{expect: p.gen, known: p.genKnown && !full}
	var errs []error
	for _, t := range p.tables {
		var pl *plan
		var before uint32
		var beforeOK bool
		if full {
			// Read before the listing: a stray added between the listing
			// and the commit is not deleted, and must show.
			before, beforeOK = p.generation(w)
			chains, sets, err := w.Existing(t.name)
			if err != nil {
				errs = append(errs, fmt.Errorf("list table %s %s: %w", t.name.Family, t.name.Name, err))
				continue
			}
			var list []HostPort
			if hps != nil {
				list = *hps
			}
			pl = t.planFullWith(keys, src, p.opts, list, chains, sets, p.log)
		} else {
			if pl = t.planIncrementalWith(keys, src, p.opts, hps, p.log); pl == nil {
				continue
			}
			before, beforeOK = p.generation(w)
		}
		res.Ops += pl.tx.Len()
		if err := w.Apply(pl.tx); err != nil {
			errs = append(errs, fmt.Errorf("table %s %s: %w", t.name.Family, t.name.Name, err))
			g.known = false
			continue
		}
		after, afterOK := p.generation(w)
		commits := uint32(0)
		if pl.tx.Len() > 0 {
			commits = 1
		}
		g.applied(before, beforeOK, after, afterOK, commits)
		p.gen, p.genKnown = g.expect, g.known
		res.Changed += len(pl.changes)
		afterStart := t.synced
		t.commit(pl)
		p.cleanConntrack(ct, t, pl, afterStart)
	}
	res.Duration = time.Since(start)
	res.Err = errors.Join(errs...)
	p.updateHealthChecks(keys, src, full)
	if res.Err == nil && full {
		p.turnOnLocalnet()
		p.needFull = false
		p.dirty = g.foreign
		p.lastFull = time.Now()
	} else {
		p.dirty = p.dirty || g.foreign
	}
	p.report(&res)
	return res
}

// updateHealthChecks follows the synced Services' health check ports;
// a full sync also closes those of Services that are gone.
func (p *Proxier) updateHealthChecks(keys []string, src serviceSource, full bool) {
	for _, k := range keys {
		svc, sls := src(k)
		p.health.update(k, svc, sls)
	}
	if full {
		p.health.retain(keys)
	}
}

// snapshot lists every Service key and reads from the caches once, for a
// full resync: per-Service index lookups would cost more at 5,000.
func (p *Proxier) snapshot() ([]string, serviceSource) {
	svcs, _ := p.services.List(labels.Everything())
	byKey := make(map[string]*corev1.Service, len(svcs))
	keys := make([]string, 0, len(svcs))
	for _, s := range svcs {
		k := s.Namespace + "/" + s.Name
		byKey[k] = s
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sls := map[string][]*discoveryv1.EndpointSlice{}
	for _, obj := range p.slices.List() {
		if sl, ok := obj.(*discoveryv1.EndpointSlice); ok {
			if k := serviceKey(sl); k != "" {
				sls[k] = append(sls[k], sl)
			}
		}
	}
	return keys, func(key string) (*corev1.Service, []*discoveryv1.EndpointSlice) { return byKey[key], sls[key] }
}

// lookup reads one Service and its slices from the caches.
func (p *Proxier) lookup(key string) (*corev1.Service, []*discoveryv1.EndpointSlice) {
	ns, name := splitKey(key)
	svc, err := p.services.Services(ns).Get(name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			p.log.Warn("read service from cache", "service", key, "err", err)
		}
		return nil, nil
	}
	objs, _ := p.slices.ByIndex(sliceIndex, key)
	sls := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if sl, ok := o.(*discoveryv1.EndpointSlice); ok {
			sls = append(sls, sl)
		}
	}
	return svc, sls
}

// cleanConntrack deletes the UDP entries the applied plan made stale.
// A failure is logged, not retried: the entries time out eventually.
func (p *Proxier) cleanConntrack(ct conntrackCleaner, t *table, pl *plan, afterStart bool) {
	var flows []staleFlow
	for _, c := range pl.changes {
		flows = append(flows, staleFlows(c, afterStart)...)
	}
	for _, c := range pl.hostPorts {
		flows = append(flows, hostPortStaleFlows(c, afterStart)...)
	}
	if len(flows) == 0 {
		return
	}
	n, err := ct.DeleteUDP(t.fam.nft, flows)
	p.metrics.conntrackDeletions.Add(float64(n))
	if err != nil {
		p.log.Warn("delete stale UDP conntrack entries", "family", t.fam.nft.String(), "filters", len(flows), "err", err)
		return
	}
	p.log.Debug("deleted stale UDP conntrack entries", "family", t.fam.nft.String(), "filters", len(flows), "deleted", n)
}

// turnOnLocalnet sets route_localnet once, when host ports are mapped:
// the kernel then routes a connection from 127.0.0.1 out to a pod (which
// the mapping's chain masquerades). A failure is logged and retried at
// the next full sync: only ports on loopback addresses depend on it.
func (p *Proxier) turnOnLocalnet() {
	if p.cfg.HostPorts == nil || p.localnetOn {
		return
	}
	if err := p.enableLocalnet(p.cfg.NetNS); err != nil {
		p.log.Warn("enable route_localnet for host ports on 127.0.0.1", "err", err)
		return
	}
	p.localnetOn = true
}

// report fills the installed counts, updates the metrics, logs and calls
// AfterSync.
func (p *Proxier) report(res *SyncResult) {
	for _, t := range p.tables {
		res.Services += len(t.ports)
		res.Chains += t.count.chains
		res.Rules += t.count.rules
		res.Elements += t.count.elements
	}
	kind := "partial"
	if res.Full {
		kind = "full"
	}
	switch {
	case res.Skipped:
		// The ruleset was checked and found as written: as good as synced.
		p.metrics.lastSync.SetToCurrentTime()
		p.log.Debug("periodic resync skipped: ruleset unchanged", "duration", res.Duration)
	case res.Err != nil:
		p.metrics.syncErrors.Inc()
		p.log.Warn("sync failed", "kind", kind, "ops", res.Ops, "err", res.Err)
	default:
		p.metrics.syncDuration.WithLabelValues(kind).Observe(res.Duration.Seconds())
		p.metrics.lastSync.SetToCurrentTime()
		p.log.Debug("synced", "kind", kind, "changed", res.Changed, "ops", res.Ops, "duration", res.Duration)
	}
	p.metrics.services.Set(float64(res.Services))
	p.metrics.objects.WithLabelValues("chains").Set(float64(res.Chains))
	p.metrics.objects.WithLabelValues("rules").Set(float64(res.Rules))
	p.metrics.objects.WithLabelValues("elements").Set(float64(res.Elements))
	if p.cfg.AfterSync != nil {
		p.cfg.AfterSync(*res)
	}
}
