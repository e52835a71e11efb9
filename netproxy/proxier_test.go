package netproxy

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"skiff/netproxy/nft"
)

// proxierEnv is a Proxier over a fake clientset, a simulated kernel and a
// recording conntrack.
type proxierEnv struct {
	p       *Proxier
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	kernel  *simKernel
	ct      *fakeConntrack
	reg     *prometheus.Registry
	results chan SyncResult
}

func newProxierEnv(t *testing.T, syncPeriod time.Duration, objs ...runtime.Object) *proxierEnv {
	t.Helper()
	e := newEnv(t, Config{SyncPeriod: syncPeriod}, objs...)
	e.kernel, e.ct = newSimKernel(), &fakeConntrack{}
	e.p.openRules = func(string) (ruleWriter, error) { return e.kernel, nil }
	e.p.openConntrack = func(string) (conntrackCleaner, error) { return e.ct, nil }
	return e
}

// newEnv makes a Proxier from cfg completed with the test node, pod range,
// informers, registry, logger and AfterSync channel.
func newEnv(tb testing.TB, cfg Config, objs ...runtime.Object) *proxierEnv {
	tb.Helper()
	e := &proxierEnv{
		client:  fake.NewClientset(objs...),
		reg:     prometheus.NewRegistry(),
		results: make(chan SyncResult, 1000),
	}
	e.factory = informers.NewSharedInformerFactory(e.client, 0)
	cfg.NodeName, cfg.ClusterCIDR, cfg.Informers = testNode, testPodCIDR, e.factory
	cfg.Registerer, cfg.Logger = e.reg, quietLog()
	if cfg.ServiceCIDRs == nil {
		cfg.ServiceCIDRs = []*net.IPNet{testServiceCIDR}
	}
	if cfg.LocalServiceIPs == nil {
		cfg.LocalServiceIPs = testLocalServiceIPs
	}
	cfg.AfterSync = func(r SyncResult) {
		select {
		case e.results <- r:
		default: // nobody is waiting for that many
		}
	}
	p, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	e.p = p
	return e
}

// run starts the factory and the proxier; cleanup stops both and fails
// the test if Run does not return.
func (e *proxierEnv) run(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	e.factory.Start(ctx.Done())
	go func() { done <- e.p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
		e.factory.Shutdown()
	})
}

// waitSync waits (10 s at most) for a sync that satisfies ok.
func (e *proxierEnv) waitSync(t testing.TB, what string, ok func(SyncResult) bool) SyncResult {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case r := <-e.results:
			if ok(r) {
				return r
			}
		case <-deadline:
			t.Fatalf("no sync %s within 10 s", what)
		}
	}
}

func isFull(r SyncResult) bool    { return r.Full && !r.Skipped && r.Err == nil }
func isPartial(r SyncResult) bool { return !r.Full && r.Err == nil }
func isSkipped(r SyncResult) bool { return r.Skipped }

func (e *proxierEnv) updateSlice(t testing.TB, sl *discoveryv1.EndpointSlice) {
	t.Helper()
	if _, err := e.client.DiscoveryV1().EndpointSlices(sl.Namespace).Update(context.Background(), sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestProxier_FullSyncAtStartThenSliceChangeIncrementally(t *testing.T) {
	web, webSl := clusterIPTwoNodes()
	e := newProxierEnv(t, time.Hour, web, webSl)
	e.run(t)
	first := e.waitSync(t, "at start", func(SyncResult) bool { return true })
	if !first.Full || first.Err != nil || first.Services != 1 {
		t.Fatalf("first sync %+v, want a successful full sync of 1 service port", first)
	}

	one := webSl.DeepCopy()
	one.Endpoints = one.Endpoints[:1]
	e.updateSlice(t, one)
	r := e.waitSync(t, "after the slice update", isPartial)
	if r.Changed != 1 || r.Ops == 0 {
		t.Errorf("partial sync changed %d ports in %d ops, want 1 port", r.Changed, r.Ops)
	}
	txs := e.kernel.txs()
	last := txs[len(txs)-1]
	tableMap := func(name string) bool {
		return slices.ContainsFunc(v4().maps, func(m nft.Set) bool { return m.Name == name })
	}
	if slices.ContainsFunc(last.Ops, func(op nft.Op) bool {
		return op.Kind == nft.OpAddTable || (op.Kind == nft.OpFlushSet && tableMap(op.Set.Name))
	}) {
		t.Errorf("incremental batch rewrites the table:\n%s", last)
	}
	want := fullSyncDump(t, world{svcs: []*corev1.Service{web}, slices: []*discoveryv1.EndpointSlice{one}})
	if got := e.kernel.dump(nft.Table{Family: nft.IPv4, Name: "skiff"}); got != want {
		t.Errorf("kernel after the incremental sync differs from a full sync:\n%s", lineDiff(want, got))
	}
}

func TestProxier_FailedIncrementalSync_FullResyncFollows(t *testing.T) {
	web, webSl := clusterIPTwoNodes()
	e := newProxierEnv(t, time.Hour, web, webSl)
	e.kernel.fail = func(tx *nft.Tx) error {
		if len(tx.Ops) > 0 && tx.Ops[0].Kind != nft.OpAddTable {
			e.kernel.fail = nil // only the first incremental batch fails
			return errors.New("injected failure")
		}
		return nil
	}
	e.run(t)
	e.waitSync(t, "at start", isFull)
	one := webSl.DeepCopy()
	one.Endpoints = one.Endpoints[:1]
	e.updateSlice(t, one)
	failed := e.waitSync(t, "that fails", func(r SyncResult) bool { return r.Err != nil })
	if failed.Full {
		t.Errorf("the failing sync was a full one: %+v", failed)
	}
	e.waitSync(t, "full after the failure", isFull)
	want := fullSyncDump(t, world{svcs: []*corev1.Service{web}, slices: []*discoveryv1.EndpointSlice{one}})
	if got := e.kernel.dump(nft.Table{Family: nft.IPv4, Name: "skiff"}); got != want {
		t.Errorf("kernel after the resync:\n%s", lineDiff(want, got))
	}
	if got := metricValue(t, e.reg, "skiff_proxy_sync_errors_total", ""); got != 1 {
		t.Errorf("skiff_proxy_sync_errors_total = %v, want 1", got)
	}
}

func TestProxier_PeriodicResync_RestoresHandDeletedChain(t *testing.T) {
	web, webSl := clusterIPTwoNodes()
	e := newProxierEnv(t, 100*time.Millisecond, web, webSl)
	e.run(t)
	e.waitSync(t, "at start", isFull)
	tbl := nft.Table{Family: nft.IPv4, Name: "skiff"}
	want := e.kernel.dump(tbl)
	e.kernel.deleteChainByHand(tbl, "endpoint-OVO3PS5U-default/web/tcp/http__10.42.1.5/8080")
	if e.kernel.dump(tbl) == want {
		t.Fatal("the hand deletion changed nothing")
	}
	e.waitSync(t, "periodic", isFull)
	if got := e.kernel.dump(tbl); got != want {
		t.Errorf("after the periodic resync:\n%s", lineDiff(want, got))
	}
}

func TestProxier_UDPEndpointRemoved_ConntrackEntriesDeleted(t *testing.T) {
	udp, udpSl := udpNamedPorts()
	e := newProxierEnv(t, time.Hour, udp, udpSl)
	e.run(t)
	e.waitSync(t, "at start", isFull)
	if got := e.ct.flows(); len(got) != 0 {
		t.Errorf("first sync deleted conntrack entries %q; nothing is known of them", got)
	}
	one := udpSl.DeepCopy()
	one.Endpoints = one.Endpoints[:1]
	e.updateSlice(t, one)
	e.waitSync(t, "after the removal", isPartial)
	want := []string{"udp dst 10.43.0.70:53 reply-src 10.42.2.21", "udp dst 10.43.0.70:514 reply-src 10.42.2.21"}
	if got := e.ct.flows(); !slices.Equal(got, want) {
		t.Errorf("conntrack deletions %q, want %q", got, want)
	}
	if got := metricValue(t, e.reg, "skiff_proxy_conntrack_deletions_total", ""); got != 2 {
		t.Errorf("skiff_proxy_conntrack_deletions_total = %v, want 2", got)
	}
}

func TestProxier_Metrics_CountInstalledObjects(t *testing.T) {
	web, webSl := clusterIPTwoNodes()
	e := newProxierEnv(t, time.Hour, web, webSl)
	e.run(t)
	r := e.waitSync(t, "at start", isFull)
	// 12 fixed chains with 24 rules (20, and 2 × 2 for the Service range
	// in filter-forward and filter-output), plus web: 3 chains, 6 rules, 1
	// element in service-ips and 2 in its endpoint map.
	if r.Chains != 15 || r.Rules != 30 || r.Elements != 3 {
		t.Errorf("result counts chains %d rules %d elements %d, want 15 30 3", r.Chains, r.Rules, r.Elements)
	}
	for _, m := range []struct {
		name, label string
		want        float64
	}{
		{"skiff_proxy_nft_objects", "chains", 15},
		{"skiff_proxy_nft_objects", "rules", 30},
		{"skiff_proxy_nft_objects", "elements", 3},
		{"skiff_proxy_services", "", 1},
		{"skiff_proxy_sync_duration_seconds", "full", 1},
		{"skiff_proxy_sync_errors_total", "", 0},
	} {
		if got := metricValue(t, e.reg, m.name, m.label); got != m.want {
			t.Errorf("%s{%s} = %v, want %v", m.name, m.label, got, m.want)
		}
	}
	if metricValue(t, e.reg, "skiff_proxy_last_sync_timestamp_seconds", "") == 0 {
		t.Error("skiff_proxy_last_sync_timestamp_seconds not set")
	}
}

// metricValue reads a gauge or counter (a histogram's sample count) from
// reg, of the series whose one label has value label ("" if unlabelled).
func metricValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if (label == "" && len(m.GetLabel()) == 0) || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label) {
				switch {
				case m.GetCounter() != nil:
					return m.GetCounter().GetValue()
				case m.GetGauge() != nil:
					return m.GetGauge().GetValue()
				case m.GetHistogram() != nil:
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	t.Fatalf("metric %s{%s} not registered", name, label)
	return 0
}

func TestProxier_QueuedServices_WrittenInOneBatch(t *testing.T) {
	e := newProxierEnv(t, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); e.factory.Shutdown(); e.p.queue.ShutDown() })
	e.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), e.p.cachesSynced...) {
		t.Fatal("caches never synced")
	}
	e.p.queue.Add(fullSyncKey)
	if !e.p.next(ctx, e.kernel, e.ct) {
		t.Fatal("queue shut down")
	}
	for _, name := range []string{"a", "b", "c"} {
		svc := service("default", name, "10.43.1."+string(rune('1'+name[0]-'a')), httpPort)
		if _, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); e.p.queue.Len() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d services queued after 10 s, want 3", e.p.queue.Len())
		}
	}
	before := len(e.kernel.txs())
	e.p.next(ctx, e.kernel, e.ct)
	if n := len(e.kernel.txs()) - before; n != 1 {
		t.Fatalf("%d batches for 3 queued services, want 1", n)
	}
	r := <-e.results // the full sync
	r = <-e.results
	if r.Full || r.Changed != 3 || r.Err != nil {
		t.Errorf("sync %+v, want one partial sync of 3 ports", r)
	}
}

// startManual starts the informers but not Run: the test turns the queue
// itself with step, so that what each sync finds is under its control.
func (e *proxierEnv) startManual(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); e.factory.Shutdown(); e.p.queue.ShutDown() })
	e.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), e.p.cachesSynced...) {
		t.Fatal("caches never synced")
	}
	return ctx
}

// step queues keys (none: take what the informers queued), runs one turn
// of the proxier's loop and returns the results it reported.
func (e *proxierEnv) step(ctx context.Context, t *testing.T, keys ...string) []SyncResult {
	t.Helper()
	for _, k := range keys {
		e.p.queue.Add(k)
	}
	for deadline := time.Now().Add(10 * time.Second); e.p.queue.Len() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nothing queued after 10 s")
		}
	}
	if !e.p.next(ctx, e.kernel, e.ct) {
		t.Fatal("queue shut down")
	}
	var out []SyncResult
	for {
		select {
		case r := <-e.results:
			out = append(out, r)
		default:
			return out
		}
	}
}

// tick runs one periodic resync and returns its result.
func (e *proxierEnv) tick(ctx context.Context, t *testing.T) SyncResult {
	t.Helper()
	rs := e.step(ctx, t, periodicKey)
	if len(rs) != 1 {
		t.Fatalf("periodic tick reported %d syncs, want 1: %+v", len(rs), rs)
	}
	return rs[0]
}

func TestProxier_PeriodicResync_SkippedWhenGenerationUnchanged_FullWhenSomeoneElseCommitted(t *testing.T) {
	web, webSl := clusterIPTwoNodes()
	e := newProxierEnv(t, time.Hour, web, webSl)
	ctx := e.startManual(t)
	if r := e.step(ctx, t, fullSyncKey); len(r) != 1 || !isFull(r[0]) {
		t.Fatalf("first sync %+v, want one full sync", r)
	}
	tbl := nft.Table{Family: nft.IPv4, Name: "skiff"}
	want := e.kernel.dump(tbl)

	batches := len(e.kernel.txs())
	r := e.tick(ctx, t)
	if !r.Full || !r.Skipped || r.Err != nil || r.Services != 1 || r.Elements != 3 {
		t.Errorf("tick over an untouched ruleset: %+v, want Full and Skipped with the installed counts", r)
	}
	if n := len(e.kernel.txs()) - batches; n != 0 {
		t.Errorf("the skipped resync sent %d batches", n)
	}
	if got := metricValue(t, e.reg, "skiff_proxy_resync_skipped_total", ""); got != 1 {
		t.Errorf("skiff_proxy_resync_skipped_total = %v, want 1", got)
	}

	// Someone else's commit: an element of the endpoint map deleted by hand.
	if !e.kernel.deleteElementByHand(tbl, "endpoints-SUSTUHLJ-default/web/tcp/http", "1") {
		t.Fatal("no element 1 in the endpoint map")
	}
	if r := e.tick(ctx, t); !isFull(r) {
		t.Errorf("tick after a hand edit: %+v, want a full resync", r)
	}
	if got := e.kernel.dump(tbl); got != want {
		t.Errorf("after the resync:\n%s", lineDiff(want, got))
	}
	// Its own commit moved the generation as expected: nothing to redo.
	if r := e.tick(ctx, t); !isSkipped(r) {
		t.Errorf("tick after the repair: %+v, want skipped", r)
	}
	if got := metricValue(t, e.reg, "skiff_proxy_resync_skipped_total", ""); got != 2 {
		t.Errorf("skiff_proxy_resync_skipped_total = %v, want 2", got)
	}
}

func TestProxier_PeriodicResync_FullWhenTheRulesetMayHaveChanged(t *testing.T) {
	tbl := nft.Table{Family: nft.IPv4, Name: "skiff"}
	tests := []struct {
		name string
		// meddle runs between the first full sync and the tick.
		meddle func(ctx context.Context, t *testing.T, e *proxierEnv, sl *discoveryv1.EndpointSlice)
	}{
		{"HandEditThenIncrementalSync", func(ctx context.Context, t *testing.T, e *proxierEnv, sl *discoveryv1.EndpointSlice) {
			// The incremental batch's commit must not hide the edit.
			e.kernel.deleteElementByHand(tbl, "endpoints-SUSTUHLJ-default/web/tcp/http", "0")
			e.updateSlice(t, withoutLastEndpoint(sl))
			if r := e.step(ctx, t); len(r) != 1 || !isPartial(r[0]) {
				t.Fatalf("sync of the slice update: %+v, want one partial sync", r)
			}
		}},
		{"CommitDuringOwnBatch", func(ctx context.Context, t *testing.T, e *proxierEnv, sl *discoveryv1.EndpointSlice) {
			e.kernel.fail = func(*nft.Tx) error {
				e.kernel.gen++ // runs with the kernel locked
				e.kernel.fail = nil
				return nil
			}
			e.updateSlice(t, withoutLastEndpoint(sl))
			if r := e.step(ctx, t); len(r) != 1 || !isPartial(r[0]) {
				t.Fatalf("sync of the slice update: %+v, want one partial sync", r)
			}
		}},
		{"GenerationUnreadable", func(_ context.Context, _ *testing.T, e *proxierEnv, _ *discoveryv1.EndpointSlice) {
			e.kernel.mu.Lock()
			e.kernel.genErr = errors.New("injected")
			e.kernel.mu.Unlock()
		}},
		{"FullSyncPeriodElapsed", func(_ context.Context, _ *testing.T, e *proxierEnv, _ *discoveryv1.EndpointSlice) {
			e.p.cfg.FullSyncPeriod = time.Nanosecond
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			web, webSl := clusterIPTwoNodes()
			e := newProxierEnv(t, time.Hour, web, webSl)
			ctx := e.startManual(t)
			if r := e.step(ctx, t, fullSyncKey); len(r) != 1 || !isFull(r[0]) {
				t.Fatalf("first sync %+v, want one full sync", r)
			}
			if r := e.tick(ctx, t); !isSkipped(r) {
				t.Fatalf("tick before any meddling: %+v, want skipped", r)
			}
			tc.meddle(ctx, t, e, webSl)
			if r := e.tick(ctx, t); !isFull(r) {
				t.Errorf("tick: %+v, want a full resync", r)
			}
		})
	}
}

func TestNew_WithoutInformers_Fails(t *testing.T) {
	if _, err := New(Config{NodeName: testNode}); err == nil {
		t.Error("New accepted a Config without Informers")
	}
}

// A key the sync loop took must be marked Done whatever it was batched
// with: the queue drops an Add of a key still being processed, so a key
// left undone never comes again (the proxier's own keys included: host
// ports and periodic ticks).
func TestProxierNext_AnyBatch_EveryKeyDoneAndQueuedAgainOnAdd(t *testing.T) {
	tests := []struct {
		name string
		keys []string
	}{
		{"host ports alone", []string{hostPortsKey}},
		{"host ports after a Service", []string{"default/web", hostPortsKey}},
		{"tick with a Service", []string{periodicKey, "default/web"}},
		{"tick, Service and host ports", []string{periodicKey, "default/web", hostPortsKey}},
		{"full resync with a Service", []string{fullSyncKey, "default/web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{SyncPeriod: time.Hour, HostPorts: &staticHostPorts{hps: e2eHostPorts()}})
			e.kernel, e.ct = newSimKernel(), &fakeConntrack{}
			e.p.enableLocalnet = func(string) error { return nil }
			defer e.p.queue.ShutDown()
			// As after a full sync: a tick finds the ruleset as written
			// and asks for no full resync of its own.
			e.p.genKnown, e.p.lastFull = true, time.Now()
			for _, k := range tt.keys {
				e.p.queue.Add(k)
			}
			if !e.p.next(context.Background(), e.kernel, e.ct) {
				t.Fatal("next: queue shut down")
			}
			if n := e.p.queue.Len(); n != 0 {
				t.Fatalf("%d keys left queued after one batch, want 0", n)
			}
			for _, k := range tt.keys {
				e.p.queue.Add(k)
			}
			if n := e.p.queue.Len(); n != len(tt.keys) {
				t.Errorf("keys %q added again: %d queued, want %d (a key never marked Done swallows its Add)", tt.keys, n, len(tt.keys))
			}
		})
	}
}
