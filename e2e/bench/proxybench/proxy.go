package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/informers"

	"skiff/netproxy"
)

const (
	clusterCIDR = "10.244.0.0/16"
	dnsIP       = "10.43.0.10"
	// fullSyncWait bounds the wait for a full sync at the largest scale,
	// far above the aim so a slow proxier still gets its figure.
	fullSyncWait = 3 * time.Minute
)

// syncRec is one AfterSync callback and when it came.
type syncRec struct {
	at  time.Time
	cpu cpuTime // the process's, the proxier being most of it
	res netproxy.SyncResult
}

// syncLog keeps every sync of one proxier so phases can wait for the sync
// that follows their change.
type syncLog struct {
	mu   sync.Mutex
	recs []syncRec
	ch   chan struct{} // closed and replaced on every add
}

func newSyncLog() *syncLog { return &syncLog{ch: make(chan struct{})} }

func (l *syncLog) add(r netproxy.SyncResult) {
	now, cpu := time.Now(), readCPU()
	l.mu.Lock()
	l.recs = append(l.recs, syncRec{at: now, cpu: cpu, res: r})
	close(l.ch)
	l.ch = make(chan struct{})
	l.mu.Unlock()
}

func (l *syncLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}

// proxyInstance is one proxier with its own informer factory, so a
// restart starts from an empty cache like a restarted agent.
type proxyInstance struct {
	f       informers.SharedInformerFactory
	p       *netproxy.Proxier
	log     *syncLog
	cancel  context.CancelFunc
	done    chan error
	started time.Time
	cpu0    cpuTime
}

// cpuTime is user and system CPU time.
type cpuTime struct{ user, sys time.Duration }

func readCPU() cpuTime {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuTime{}
	}
	return cpuTime{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

func (c cpuTime) sub(o cpuTime) cpuTime { return cpuTime{c.user - o.user, c.sys - o.sys} }

func (c cpuTime) String() string { return fmt.Sprintf("user %s sys %s", ms(c.user), ms(c.sys)) }

func (b *bench) startProxy(ctx context.Context, period time.Duration) (*proxyInstance, error) {
	_, cidr, _ := net.ParseCIDR(clusterCIDR)
	px := &proxyInstance{f: informers.NewSharedInformerFactory(b.cl.cs, 0), log: newSyncLog(), done: make(chan error, 1)}
	p, err := netproxy.New(netproxy.Config{
		NodeName:        nodeName,
		NodeIPs:         []net.IP{net.ParseIP(nodeIP)},
		ClusterCIDR:     cidr,
		LocalServiceIPs: []net.IP{net.ParseIP(dnsIP)},
		Informers:       px.f,
		SyncPeriod:      period,
		NetNS:           b.lab.nodePath(),
		Logger:          b.log.With("component", "netproxy"),
		AfterSync:       px.log.add,
	})
	if err != nil {
		return nil, fmt.Errorf("netproxy.New: %w", err)
	}
	px.p = p
	// The stores setOthers paces on: the same shared informers the proxier
	// registered, so no extra watcher.
	px.f.Core().V1().Services().Informer()
	px.f.Discovery().V1().EndpointSlices().Informer()
	pctx, cancel := context.WithCancel(ctx)
	px.cancel = cancel
	px.f.Start(pctx.Done())
	px.started, px.cpu0 = time.Now(), readCPU()
	go func() { px.done <- p.Run(pctx) }()
	return px, nil
}

// stop ends Run and the informers, waiting 15 s at most for each.
func (px *proxyInstance) stop() {
	px.cancel()
	select {
	case err := <-px.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			logf("proxier Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		logf("cleanup: proxier Run did not return within 15s")
	}
	shut := make(chan struct{})
	go func() { px.f.Shutdown(); close(shut) }()
	select {
	case <-shut:
	case <-time.After(15 * time.Second):
		logf("cleanup: informers did not stop within 15s")
	}
}

// wait returns the first sync at index from or later that pred accepts,
// with its index; it fails after timeout, or when Run returns.
func (px *proxyInstance) wait(ctx context.Context, from int, timeout time.Duration, pred func(netproxy.SyncResult) bool) (syncRec, int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		px.log.mu.Lock()
		recs, ch := px.log.recs, px.log.ch
		px.log.mu.Unlock()
		for i := from; i < len(recs); i++ {
			if pred(recs[i].res) {
				return recs[i], i, nil
			}
		}
		from = max(from, len(recs))
		select {
		case <-ch:
		case err := <-px.done:
			px.done <- err
			return syncRec{}, 0, fmt.Errorf("proxier Run returned: %v", err)
		case <-t.C:
			last := "none"
			if n := len(recs); n > 0 {
				last = fmt.Sprintf("%+v", recs[n-1].res)
			}
			return syncRec{}, 0, fmt.Errorf("no such sync within %v (%d syncs, last: %s)", timeout, len(recs), last)
		case <-ctx.Done():
			return syncRec{}, 0, context.Cause(ctx)
		}
	}
}

// quiet waits until no sync has come for d (at most limit).
func (px *proxyInstance) quiet(ctx context.Context, d, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		n := px.log.len()
		if err := sleepCtx(ctx, d); err != nil {
			return err
		}
		if px.log.len() == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proxier still syncing after %v", limit)
		}
	}
}

// isFull accepts a full sync or a failed one. Run syncs only after the
// informers have synced, so the first full sync already has every Service.
func isFull(r netproxy.SyncResult) bool { return r.Err != nil || r.Full }

// syncPhase: the cold full sync, then a restarted proxier's over the
// populated table (the same rewrite the periodic repair does; a short
// SyncPeriod would instead queue full syncs back to back while one runs).
func (b *bench) syncPhase(ctx context.Context) error {
	o, res := b.o, b.res
	t0 := time.Now()
	if err := b.cl.seed(ctx); err != nil {
		return err
	}
	logf("%d Services and EndpointSlices in the fake clientset (%v)", o.services, ms(time.Since(t0)))
	for _, fs := range []*fullSync{&res.cold, &res.restart} {
		if b.px != nil {
			b.px.stop()
			b.px = nil
		}
		px, err := b.startProxy(ctx, time.Hour)
		if err != nil {
			return err
		}
		b.px = px
		rec, _, err := px.wait(ctx, 0, fullSyncWait, isFull)
		if err != nil {
			return fmt.Errorf("%s full sync: %w", fs.name, err)
		}
		if rec.res.Err != nil {
			return fmt.Errorf("%s full sync: %w", fs.name, rec.res.Err)
		}
		*fs = fullSync{name: fs.name, res: rec.res, wall: rec.at.Sub(px.started), cpu: rec.cpu.sub(px.cpu0)}
		logf("%s full sync: %v (%v after Run; cpu %s)", fs.name, ms(rec.res.Duration), ms(fs.wall), fs.cpu)
		if err := px.quiet(ctx, 300*time.Millisecond, time.Minute); err != nil {
			return err
		}
	}
	res.nft, res.nftErr = nftCounts(ctx, b.lab.nodeName, "skiff")
	return nil
}

// changePhase times -changes single-Service changes at full scale.
func (b *bench) changePhase(ctx context.Context) error {
	o, px := b.o, b.px
	if o.services < 2 || o.changes == 0 {
		logf("one change: skipped (needs -services ≥ 2 and -changes > 0)")
		return nil
	}
	for c := range o.changes {
		i := 1 + (c/2)%(o.services-1)
		n := o.endpoints
		if c%2 == 0 {
			n--
		}
		from := px.log.len()
		t0, cpu0 := time.Now(), readCPU()
		if err := b.cl.updateSlice(ctx, i, n); err != nil {
			return err
		}
		rec, _, err := px.wait(ctx, from, 30*time.Second, func(netproxy.SyncResult) bool { return true })
		if err != nil {
			return fmt.Errorf("change %d (svc-%d → %d endpoints): %w", c, i, n, err)
		}
		b.res.addChange(rec, rec.at.Sub(t0), rec.cpu.sub(cpu0))
		// The changes are apart, not a burst: each measures one change
		// applied on its own.
		if err := px.quiet(ctx, 10*time.Millisecond, 10*time.Second); err != nil {
			return err
		}
	}
	logf("%d changes applied", o.changes)
	return nil
}
