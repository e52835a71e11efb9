package netproxy

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The scale the proxier is measured at: 5,000 Services of one TCP port,
// each with 10 ready endpoints spread over two nodes.
const (
	benchServices  = 5000
	benchEndpoints = 10
)

// scaleService is Service i of the benchmark world: cluster IP
// 10.43.x.y, endpoints 10.42.x.y on nodes a and b.
func scaleService(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	p := svcPort("http", "", 80, 8080)
	name := fmt.Sprintf("svc-%05d", i)
	svc := service("bench", name, fmt.Sprintf("10.43.%d.%d", 1+i/250, 1+i%250), p)
	eps := make([]discoveryv1.Endpoint, benchEndpoints)
	for j := range eps {
		node := "node-a"
		if j%2 == 1 {
			node = "node-b"
		}
		eps[j] = ep(fmt.Sprintf("10.42.%d.%d", 1+(i*benchEndpoints+j)/250, 1+(i*benchEndpoints+j)%250), node, ready)
	}
	return svc, endpointSlice("bench", name, name+"-1", slicePorts(p), eps...)
}

func scaleWorld() world {
	var w world
	for i := range benchServices {
		svc, sl := scaleService(i)
		w.svcs = append(w.svcs, svc)
		w.slices = append(w.slices, sl)
	}
	return w
}

func (w world) objects() []runtime.Object {
	objs := make([]runtime.Object, 0, len(w.svcs)+len(w.slices))
	for _, s := range w.svcs {
		objs = append(objs, s)
	}
	for _, s := range w.slices {
		objs = append(objs, s)
	}
	return objs
}

// withoutLastEndpoint is sl less its last endpoint.
func withoutLastEndpoint(sl *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	c := sl.DeepCopy()
	c.Endpoints = c.Endpoints[:len(c.Endpoints)-1]
	return c
}

// BenchmarkBuildFullSync_5000Services10Endpoints times the userspace side
// of a sync at scale: the model, the rules and the batch, without the
// kernel. "full" is the full resync's batch; "one-change" the incremental
// batch of one Service that lost an endpoint, against a table holding all
// 5,000; "resync" the periodic full resync of a table already up to date.
func BenchmarkBuildFullSync_5000Services10Endpoints(b *testing.B) {
	w := scaleWorld()
	keys := w.keys()
	src := w.source()
	opts := testOpts()

	b.Run("full", func(b *testing.B) {
		tb := newTable(v4(), "skiff")
		var pl *plan
		b.ReportAllocs()
		for b.Loop() {
			pl = tb.planFull(keys, src.get, opts, nil, nil, quietLog())
		}
		tb.commit(pl)
		b.ReportMetric(float64(pl.tx.Len()), "ops")
		b.ReportMetric(float64(tb.count.chains), "chains")
		b.ReportMetric(float64(tb.count.rules), "rules")
		b.ReportMetric(float64(tb.count.elements), "elements")
	})

	// The periodic resync: the same batch, to a table that holds it.
	b.Run("resync", func(b *testing.B) {
		tb := newTable(v4(), "skiff")
		tb.commit(tb.planFull(keys, src.get, opts, nil, nil, quietLog()))
		var pl *plan
		b.ReportAllocs()
		for b.Loop() {
			pl = tb.planFull(keys, src.get, opts, nil, nil, quietLog())
		}
		b.ReportMetric(float64(pl.tx.Len()), "ops")
	})

	b.Run("one-change", func(b *testing.B) {
		tb := newTable(v4(), "skiff")
		tb.commit(tb.planFull(keys, src.get, opts, nil, nil, quietLog()))
		key := "bench/svc-02500"
		changed := newSource(w.svcs, withoutLastEndpoint(src.slices[key][0]))
		var pl *plan
		b.ReportAllocs()
		for b.Loop() {
			pl = tb.planIncremental([]string{key}, changed.get, opts, quietLog())
		}
		if pl == nil {
			b.Fatal("no batch for the change")
		}
		b.ReportMetric(float64(pl.tx.Len()), "ops")
	})
}

// BenchmarkSync_5000Services10Endpoints runs the Proxier on the kernel of
// a fresh namespace over 5,000 Services: the first full sync (empty
// table), a periodic full resync (table in place), a periodic tick the
// ruleset generation lets it skip, then one loop iteration per
// EndpointSlice change, each waiting for its incremental sync. The wall
// figures are the syncs' own durations (build + apply); the CPU figures
// are the process's user+system time over the same span (the kernel's
// commit work is system time of the sending thread), so they include the
// informers' share: for the first sync, their start and initial list.
func BenchmarkSync_5000Services10Endpoints(b *testing.B) {
	node := addNetNS(b, "bench")
	w := scaleWorld()
	e := newEnv(b, Config{NetNS: "/run/netns/" + node, SyncPeriod: time.Hour}, w.objects()...)
	cpu0 := processCPU(b)
	e.run(b)
	first := waitResult(b, e, "first full sync", isFull)
	firstCPU := processCPU(b) - cpu0

	cpu0 = processCPU(b)
	e.p.queue.Add(fullSyncKey)
	resync := waitResult(b, e, "full resync", isFull)
	resyncCPU := processCPU(b) - cpu0

	cpu0 = processCPU(b)
	e.p.queue.Add(periodicKey)
	skipped := waitResult(b, e, "skipped periodic resync", isSkipped)
	skippedCPU := processCPU(b) - cpu0
	b.Logf("full sync: %v wall %v cpu (empty table), %v wall %v cpu (resync), %d ops; skipped tick %v wall %v cpu; "+
		"installed %d chains, %d rules, %d elements",
		first.Duration, firstCPU, resync.Duration, resyncCPU, resync.Ops, skipped.Duration, skippedCPU,
		resync.Chains, resync.Rules, resync.Elements)

	sl := w.slices[benchServices/2]
	versions := []*discoveryv1.EndpointSlice{withoutLastEndpoint(sl), sl}
	var changes, changesCPU time.Duration
	n := 0
	for b.Loop() {
		cpu0 := processCPU(b)
		e.updateSlice(b, versions[n%2])
		r := waitResult(b, e, "incremental sync", isPartial)
		changesCPU += processCPU(b) - cpu0
		changes += r.Duration
		n++
	}
	b.ReportMetric(first.Duration.Seconds()*1e3, "full-ms")
	b.ReportMetric(firstCPU.Seconds()*1e3, "full-cpu-ms")
	b.ReportMetric(resync.Duration.Seconds()*1e3, "resync-ms")
	b.ReportMetric(resyncCPU.Seconds()*1e3, "resync-cpu-ms")
	b.ReportMetric(skipped.Duration.Seconds()*1e3, "skipped-ms")
	b.ReportMetric(changes.Seconds()*1e3/float64(n), "change-ms")
	b.ReportMetric(changesCPU.Seconds()*1e3/float64(n), "change-cpu-ms")
	b.ReportMetric(float64(resync.Chains), "chains")
	b.ReportMetric(float64(resync.Rules), "rules")
	b.ReportMetric(float64(resync.Elements), "elements")
}

// processCPU is the user plus system CPU time the process has used.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitResult waits for a sync that satisfies ok, one minute at most: a
// sync at scale on a busy machine is slower than the tests' bound.
func waitResult(b *testing.B, e *proxierEnv, what string, ok func(SyncResult) bool) SyncResult {
	b.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case r := <-e.results:
			if r.Err != nil {
				b.Fatalf("%s: %v", what, r.Err)
			}
			if ok(r) {
				return r
			}
		case <-deadline:
			b.Fatalf("no %s within a minute", what)
		}
	}
}
