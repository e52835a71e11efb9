package storetest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"skiff/store"
)

// Benchmarks shared by every backend (and by the kine comparison in
// store/sqlite/kinebench), so that figures side by side come from the very same
// operations. Each reports ops/s and latency percentiles as custom metrics.

// benchValue is about the size of a small Kubernetes object (a ConfigMap or a
// Pod's JSON is 1–3 KiB).
var benchValue = make([]byte, 1024)

// BenchCreate runs b.N Creates spread over writers goroutines and reports
// creates/s and the p50/p99 latency of one Create.
func BenchCreate(b *testing.B, s store.Store, writers int) {
	ctx := context.Background()
	prefix := fmt.Sprintf("/bench/create/%d/%d/", writers, time.Now().UnixNano())
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if _, err := s.Create(ctx, fmt.Sprintf("%s%09d", prefix, i), benchValue); err != nil {
					failed.Add(1)
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d creates failed", n)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
	reportPercentiles(b, lat)
}

// BenchGet reads one existing key b.N times.
func BenchGet(b *testing.B, s store.Store) {
	ctx := context.Background()
	key := fmt.Sprintf("/bench/get/%d", time.Now().UnixNano())
	if _, err := s.Create(ctx, key, benchValue); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := s.Get(ctx, key); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchList fills a prefix with n keys (each also updated once, so the log
// holds history as a live cluster's does) and lists all of them per iteration.
func BenchList(b *testing.B, s store.Store, n int) {
	ctx := context.Background()
	prefix := fmt.Sprintf("/bench/list/%d/", time.Now().UnixNano())
	fill(b, s, prefix, n)
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := s.List(ctx, store.ListOptions{Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
		if len(res.Items) != n {
			b.Fatalf("listed %d keys, want %d", len(res.Items), n)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// fill creates and then updates n keys under prefix with 64 writers.
func fill(b *testing.B, s store.Store, prefix string, n int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 64)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				key := fmt.Sprintf("%s%09d", prefix, i)
				kv, err := s.Create(ctx, key, benchValue)
				if err == nil {
					_, err = s.Update(ctx, key, benchValue, kv.ModRevision)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchWatchLatency measures the time from issuing a Create to its event
// arriving at a watcher, one write at a time (what a controller waits for), and
// reports p50/p99. It includes the write's own commit, as the anchor's
// create → event figure does.
func BenchWatchLatency(b *testing.B, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := fmt.Sprintf("/bench/watch/%d/", time.Now().UnixNano())
	w, err := s.Watch(ctx, prefix, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := fmt.Sprintf("%s%09d", prefix, i)
		t0 := time.Now()
		if _, err := s.Create(ctx, key, benchValue); err != nil {
			b.Fatal(err)
		}
		select {
		case ev, ok := <-w.Events():
			if !ok {
				b.Fatalf("watch closed: %v", w.Err())
			}
			if ev.KV.Key != key {
				b.Fatalf("event for %q, want %q", ev.KV.Key, key)
			}
		case <-time.After(10 * time.Second):
			b.Fatal("no event within 10s")
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
