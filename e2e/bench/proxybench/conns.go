package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/vishvananda/netns"

	"skiff/netproxy"
)

// warmConns are made before each measurement and not counted: the first
// connections pay for the caches of a cold path.
const warmConns = 200

// latencyPhase measures the floor (pod address) and the target Service
// with 1 and with all Services present, alternating the order per round so
// drift in the machine's load cancels out instead of faking a ratio.
func (b *bench) latencyPhase(ctx context.Context) error {
	o := b.o
	floor := net.JoinHostPort(podIP, strconv.Itoa(echoPort))
	target := net.JoinHostPort(targetIP, strconv.Itoa(svcPort))
	// The state the change phase left; with one Service there is only one.
	many := o.services > 1
	for r := 1; r <= o.rounds; r++ {
		st, err := measureConns(ctx, b.lab.node, floor, o.conns)
		if err != nil {
			return fmt.Errorf("round %d, floor: %w", r, err)
		}
		b.res.addLatency(latFloor, r, st)
		logf("round %d: %-22s mean %s p50 %s p99 %s", r, latFloor, us(st.mean), us(st.p50), us(st.p99))
		order := []bool{true, false}
		if r%2 == 0 {
			order = []bool{false, true}
		}
		if o.services == 1 {
			order = []bool{false}
		}
		for _, want := range order {
			if want != many {
				if err := b.setOthers(ctx, want); err != nil {
					return err
				}
				many = want
			}
			st, err := measureConns(ctx, b.lab.node, target, o.conns)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, latKind(want), err)
			}
			b.res.addLatency(latKind(want), r, st)
			logf("round %d: %-22s mean %s p50 %s p99 %s", r, latKind(want), us(st.mean), us(st.p50), us(st.p99))
		}
	}
	if !many && o.services > 1 {
		return b.setOthers(ctx, true)
	}
	return nil
}

// setOthers adds or removes every Service but the target and waits until
// the proxier has applied it and gone quiet.
func (b *bench) setOthers(ctx context.Context, present bool) error {
	px := b.px
	want := 1
	if present {
		want = b.o.services
	}
	from := px.log.len()
	t0 := time.Now()
	if err := b.cl.setOthers(ctx, px.f, present); err != nil {
		return err
	}
	writes := time.Since(t0)
	_, last, err := px.wait(ctx, from, fullSyncWait, func(r netproxy.SyncResult) bool {
		return r.Err == nil && r.Services == want
	})
	if err != nil {
		return fmt.Errorf("proxier to %d services: %w", want, err)
	}
	if err := px.quiet(ctx, 300*time.Millisecond, 30*time.Second); err != nil {
		return err
	}
	logf("now %d Services: API writes %v, proxier applied after %v in %d syncs", want, ms(writes),
		ms(time.Since(t0)), last-from+1)
	return nil
}

// measureConns makes warmConns+n sequential connections to addr from
// namespace ns, each connect + 1-byte echo + close, and returns the n
// timed ones.
func measureConns(ctx context.Context, ns netns.NsHandle, addr string, n int) (connStats, error) {
	samples := make([]time.Duration, 0, n)
	var failed int
	start := time.Now()
	err := inNS(ns, func() error {
		// Bound to the node's bridge address: a socket somehow outside the
		// node namespace could not bind it and would send nothing.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(nodeIP)}, Timeout: 2 * time.Second}
		limit := max(10, n/100)
		var last error
		for k := range warmConns + n {
			if k%1000 == 0 && ctx.Err() != nil {
				return context.Cause(ctx)
			}
			t0 := time.Now()
			err := echoOnce(&d, addr)
			dt := time.Since(t0)
			if err != nil {
				failed++
				last = err
				if failed > limit {
					return fmt.Errorf("%d of %d connections to %s failed, last: %w", failed, k+1, addr, last)
				}
				continue
			}
			if k >= warmConns {
				samples = append(samples, dt)
			}
		}
		return nil
	})
	if err != nil {
		return connStats{}, err
	}
	st := newConnStats(samples, time.Since(start))
	st.failed = failed
	return st, nil
}

func echoOnce(d *net.Dialer, addr string) error {
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	// A reset instead of FIN: the client keeps no TIME_WAIT, so hundreds
	// of thousands of connections never run out of ports.
	if err := c.(*net.TCPConn).SetLinger(0); err != nil {
		return err
	}
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	buf := []byte{'x'}
	if _, err := c.Write(buf); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if buf[0] != 'x' {
		return fmt.Errorf("echo returned %q", buf)
	}
	return nil
}
