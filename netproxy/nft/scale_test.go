package nft

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
)

// The proxier's full sync at 5,000 Services × 10 endpoints is one batch
// of about 55,000 chains, 110,000 rules and 5,000 map elements.
const (
	scaleServices  = 5000
	scaleEndpoints = 10
)

// oneServiceUpdate is the incremental batch for one service port: its
// service chain and endpoint chains flushed and refilled, one map element
// replaced.
func oneServiceUpdate(s svcPort) *Tx {
	tx := NewTx(tableSkiff)
	cds := s.chains()
	for _, cd := range cds {
		tx.AddChain(cd.chain)
	}
	for _, cd := range cds {
		tx.FlushChain(cd.chain.Name)
		for _, r := range cd.rules {
			tx.AddRule(cd.chain.Name, "", r...)
		}
	}
	for _, m := range s.endpointMaps() {
		tx.FlushSet(m.set)
		tx.AddElements(m.set, m.els...)
	}
	el := s.elements()[mapServiceIPs.Name]
	tx.DeleteElements(mapServiceIPs, el...)
	tx.AddElements(mapServiceIPs, el...)
	return tx
}

func countOps(tx *Tx) (chains, rules, elements int) {
	for _, op := range tx.Ops {
		switch op.Kind {
		case OpAddChain:
			chains++
		case OpAddRule:
			rules++
		case OpAddElements:
			elements += len(op.Elements)
		}
	}
	return
}

// TestApply_FullSyncAt5000Services_AppliesAsOneBatch proves the batch fits
// through netlink at all, and reports (never asserts) how long it takes.
func TestApply_FullSyncAt5000Services_AppliesAsOneBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("about a minute of kernel time; run without -short")
	}
	ns := addNS(t, "scale")
	c := openIn(t, ns)
	svcs := syntheticServices(scaleServices, scaleEndpoints)
	full := fullSync(svcs)
	ch, ru, el := countOps(full)
	t.Logf("full sync: %d ops: %d chains, %d rules, %d elements", full.Len(), ch, ru, el)

	m := startMeasure()
	mustApply(t, c, full)
	t.Logf("full apply on an empty kernel: %v", m)

	one := oneServiceUpdate(svcs[scaleServices/2])
	m = startMeasure()
	mustApply(t, c, one)
	t.Logf("one-service apply (%d ops) with %d services present: %v", one.Len(), scaleServices, m)

	m = startMeasure()
	chains, sets, err := c.Existing(tableSkiff)
	if err != nil {
		t.Fatalf("Existing: %v", err)
	}
	t.Logf("Existing: %v", m)
	if want := len(commonChains) + scaleServices*(1+scaleEndpoints); len(chains) != want {
		t.Errorf("kernel has %d chains, want %d", len(chains), want)
	}
	if want := len(allMaps) + scaleServices; len(sets) != want {
		t.Errorf("kernel has %d sets, want the %d maps and one endpoint map per service", len(sets), want)
	}
	// Not `nft list map`: nft 1.0.6 takes most of a minute on a table
	// with 5,000 anonymous maps.
	els, err := c.list.GetSetElements(&nftables.Set{Table: &nftables.Table{Name: tableSkiff.Name, Family: nftables.TableFamilyIPv4}, Name: mapServiceIPs.Name, IsMap: true})
	if err != nil || len(els) != scaleServices {
		t.Errorf("service-ips has %d elements (%v), want %d", len(els), err, scaleServices)
	}
}

// measure is wall and CPU time (user, and system: the kernel's work on a
// batch is done inside the send call) since it started. The machine is
// shared, so wall time alone says little.
type measure struct {
	start     time.Time
	user, sys time.Duration
}

func cpuTimes() (user, sys time.Duration) {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano()), time.Duration(r.Stime.Nano())
}

func startMeasure() measure {
	u, s := cpuTimes()
	return measure{start: time.Now(), user: u, sys: s}
}

func (m measure) String() string {
	u, s := cpuTimes()
	return fmt.Sprintf("wall %v, cpu user %v sys %v", time.Since(m.start).Round(time.Millisecond),
		(u - m.user).Round(time.Millisecond), (s - m.sys).Round(time.Millisecond))
}

// report adds CPU time per op to a benchmark's figures.
func (m measure) report(b *testing.B) {
	u, s := cpuTimes()
	b.ReportMetric(float64((u-m.user).Milliseconds())/float64(b.N), "user-ms/op")
	b.ReportMetric(float64((s-m.sys).Milliseconds())/float64(b.N), "sys-ms/op")
}

// BenchmarkApply_5000Services10Endpoints times Apply of the full sync
// (built in setup) on a fresh namespace, again with the same ruleset
// present (the periodic resync), and of one service's update.
func BenchmarkApply_5000Services10Endpoints(b *testing.B) {
	svcs := syntheticServices(scaleServices, scaleEndpoints)
	full := fullSync(svcs)
	b.Run("full-empty-kernel", func(b *testing.B) {
		var m measure
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			c := openIn(b, addNS(b, "bench"))
			if i == 0 {
				m = startMeasure()
			}
			b.StartTimer()
			mustApply(b, c, full)
		}
		m.report(b)
	})
	c := openIn(b, addNS(b, "bench"))
	mustApply(b, c, full)
	b.Run("full-ruleset-present", func(b *testing.B) {
		m := startMeasure()
		for i := 0; i < b.N; i++ {
			mustApply(b, c, full)
		}
		m.report(b)
	})
	b.Run("one-service", func(b *testing.B) {
		txs := make([]*Tx, 64)
		for i := range txs {
			txs[i] = oneServiceUpdate(svcs[i*scaleServices/len(txs)])
		}
		m := startMeasure()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			mustApply(b, c, txs[i%len(txs)])
		}
		m.report(b)
	})
}

// BenchmarkBuild_5000Services10Endpoints times the userspace half of a
// full sync: serializing the batch, without the kernel.
func BenchmarkBuild_5000Services10Endpoints(b *testing.B) {
	tx := fullSync(syntheticServices(scaleServices, scaleEndpoints))
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeasure()
	for i := 0; i < b.N; i++ {
		bl, err := newBuilder(tx)
		if err != nil {
			b.Fatal(err)
		}
		msgs, err := bl.build()
		if err != nil {
			b.Fatal(err)
		}
		buf = appendBatch(buf[:0], msgs, 1)
	}
	m.report(b)
	b.ReportMetric(float64(len(buf)), "batch-bytes")
}
