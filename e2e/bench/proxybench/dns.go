package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"skiff/netproxy/clusterdns"
)

const (
	dnsLink = "skiffdns0"
	dnsPort = 53
	// An address nothing answers on in the node namespace: the benchmark
	// asks only cluster names, and nothing may be forwarded anywhere else.
	dnsUpstream = "127.0.0.1:9"
)

// dnsPhase runs clusterdns in the node namespace and queries it from the
// pod namespace, as a pod's resolver would, one socket per query.
func (b *bench) dnsPhase(ctx context.Context) error {
	o := b.o
	dctx, cancel := context.WithCancel(ctx)
	runDone, err := b.startDNS(dctx)
	if err != nil {
		cancel()
		return err
	}
	defer func() {
		cancel()
		select {
		case err := <-runDone:
			if err != nil && !errors.Is(err, context.Canceled) {
				logf("clusterdns Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			logf("cleanup: clusterdns Run did not return within 15s")
		}
	}()

	var st dnsStats
	t0 := time.Now()
	err = inNS(b.lab.pod, func() error {
		q := newQuerier()
		last := o.services - 1
		if err := q.waitReady(ctx, runDone, last); err != nil {
			return err
		}
		logf("clusterdns answers svc-%d after %v", last, ms(time.Since(t0)))
		var err error
		st, err = q.run(ctx, o.dnsQueries, o.services)
		return err
	})
	if err != nil {
		return err
	}
	b.res.dns = &st
	logf("%d DNS queries: p50 %s p99 %s, %.0f/s", st.n, us(st.p50), us(st.p99), st.qps)
	return nil
}

// startDNS puts the DNS address in the node namespace, creates the server
// there and runs it until ctx ends; Run's result arrives on the channel.
func (b *bench) startDNS(ctx context.Context) (chan error, error) {
	ip := net.ParseIP(dnsIP)
	var srv *clusterdns.Server
	// New binds its sockets in the calling thread's namespace.
	err := inNS(b.lab.node, func() error {
		err := clusterdns.EnsureAddress(dnsLink, ip)
		if errors.Is(err, syscall.EOPNOTSUPP) {
			// A kernel without dummy links (CONFIG_DUMMY unset): the
			// address on lo is as local, and the figure is the same.
			b.res.dnsAddrNote = fmt.Sprintf("EnsureAddress failed (%v); %s put on lo instead", err, dnsIP)
			logf("%s", b.res.dnsAddrNote)
			err = ipCmd("-n", b.lab.nodeName, "addr", "add", dnsIP+"/32", "dev", "lo")
		}
		if err != nil {
			return fmt.Errorf("EnsureAddress: %w", err)
		}
		srv, err = clusterdns.New(clusterdns.Config{
			Addr:      ip,
			Port:      dnsPort,
			Domain:    dnsDomain,
			Informers: b.px.f,
			Upstreams: []string{dnsUpstream},
			Logger:    b.log.With("component", "clusterdns"),
		})
		if err != nil {
			return fmt.Errorf("clusterdns.New: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	runDone := make(chan error, 1)
	// Run too stays on a thread in the node namespace, in case it opens
	// sockets of its own.
	go func() { runDone <- inNS(b.lab.node, func() error { return srv.Run(ctx) }) }()
	// New registered its handlers on the running factory; Start starts any
	// informer it added.
	b.px.f.Start(ctx.Done())
	return runDone, nil
}

// querier asks the cluster DNS from the thread it is used on.
type querier struct {
	c      *dns.Client
	server string
	rng    *rand.Rand
}

func newQuerier() *querier {
	return &querier{
		// Bound to the pod's address: outside the pod namespace the socket
		// could not bind it and would send nothing.
		c: &dns.Client{Net: "udp", Timeout: 2 * time.Second,
			Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(podIP)}}},
		server: net.JoinHostPort(dnsIP, strconv.Itoa(dnsPort)),
		rng:    rand.New(rand.NewPCG(1, 2)),
	}
}

// ask resolves svc-i and checks the answer is its cluster IP; it returns
// the wall time including the socket, as a pod's resolver pays it.
func (q *querier) ask(i int) (time.Duration, error) {
	m := new(dns.Msg)
	m.SetQuestion(fmt.Sprintf("%s.%s.svc.%s.", svcName(i), benchNS, dnsDomain), dns.TypeA)
	t0 := time.Now()
	r, _, err := q.c.Exchange(m, q.server)
	dt := time.Since(t0)
	if err != nil {
		return dt, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return dt, fmt.Errorf("svc-%d: rcode %s", i, dns.RcodeToString[r.Rcode])
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.Equal(clusterIP(i)) {
			return dt, nil
		}
	}
	return dt, fmt.Errorf("svc-%d: answer %v, want %s", i, r.Answer, clusterIP(i))
}

// waitReady asks for svc-last until it is answered right (the server has
// every Service), 60 s at most.
func (q *querier) waitReady(ctx context.Context, runDone chan error, last int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := q.ask(last)
		if err == nil {
			return nil
		}
		select {
		case rerr := <-runDone:
			runDone <- rerr
			return fmt.Errorf("clusterdns Run returned: %v", rerr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clusterdns not answering svc-%d within 1m: %w", last, err)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

func (q *querier) run(ctx context.Context, n, services int) (dnsStats, error) {
	for range warmConns {
		if _, err := q.ask(q.rng.IntN(services)); err != nil {
			return dnsStats{}, fmt.Errorf("warm-up query: %w", err)
		}
	}
	samples := make([]time.Duration, 0, n)
	failed, limit := 0, max(10, n/100)
	start := time.Now()
	for k := range n {
		if k%1000 == 0 && ctx.Err() != nil {
			return dnsStats{}, context.Cause(ctx)
		}
		dt, err := q.ask(q.rng.IntN(services))
		if err != nil {
			if failed++; failed > limit {
				return dnsStats{}, fmt.Errorf("%d of %d queries failed, last: %w", failed, k+1, err)
			}
			continue
		}
		samples = append(samples, dt)
	}
	elapsed := time.Since(start)
	cs := newConnStats(samples, elapsed)
	cs.failed = failed
	return dnsStats{connStats: cs, qps: float64(len(samples)) / elapsed.Seconds()}, nil
}
