package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skiff/internal/etcdtest"
	"skiff/store"
	"skiff/store/etcd"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func openT(t *testing.T, cfg etcd.Config) *etcd.Store {
	t.Helper()
	s, err := etcd.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func create(t *testing.T, s store.Store, key string) store.KeyValue {
	t.Helper()
	kv, err := s.Create(ctxT(t, 30*time.Second), key, []byte("v"))
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return kv
}

// drain reads w until it closes and returns what it delivered.
func drain(t *testing.T, w store.Watcher) []store.Event {
	t.Helper()
	var got []store.Event
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("watch not closed within 30s (%d events)", len(got))
		}
	}
}

func TestWatch_ConsumerStopsReading_CutWithErrWatcherTooSlow(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	cfg := testConfig(c.Endpoints())
	cfg.WatchBuffer = 8
	s := openT(t, cfg)
	w, err := s.Watch(ctxT(t, time.Minute), "/slow/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := 0; i < 50; i++ { // nobody reads: the buffer fills
		create(t, s, fmt.Sprintf("/slow/%02d", i))
	}
	got := drain(t, w)
	if !errors.Is(w.Err(), store.ErrWatcherTooSlow) {
		t.Fatalf("watch ended with %v after %d events, want ErrWatcherTooSlow", w.Err(), len(got))
	}
	if len(got) != cfg.WatchBuffer {
		t.Errorf("delivered %d events before the cut, want the %d buffered", len(got), cfg.WatchBuffer)
	}
	for i, ev := range got {
		if want := fmt.Sprintf("/slow/%02d", i); ev.KV.Key != want {
			t.Fatalf("event %d is %s, want %s", i, ev.KV.Key, want)
		}
	}
}

func TestWatch_LongHistoryReadSlowly_DeliveredWithoutCut(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	cfg := testConfig(c.Endpoints())
	cfg.WatchBuffer = 4
	s := openT(t, cfg)
	ctx := ctxT(t, time.Minute)
	start, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := 0; i < n; i++ {
		create(t, s, fmt.Sprintf("/hist/%03d", i))
	}
	// The history asked for is handed over at the reader's pace, however
	// small the live buffer.
	w, err := s.Watch(ctx, "/hist/", start)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := 0; i < n; i++ {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch closed after %d of %d history events: %v", i, n, w.Err())
			}
			if ev.Revision() != start+int64(i)+1 {
				t.Fatalf("event %d at revision %d, want %d", i, ev.Revision(), start+int64(i)+1)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d history events", i, n)
		}
		if i%20 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestCompactedRevision_CompactedByAnotherServer_LearnedFromEtcd(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	a := openT(t, testConfig(c.Endpoints()))
	b := openT(t, testConfig(c.Endpoints()))
	ctx := ctxT(t, time.Minute)
	var revs []int64
	for i := 0; i < 60; i++ {
		revs = append(revs, create(t, a, fmt.Sprintf("/c/%02d", i)).ModRevision)
	}
	if got, err := b.CompactedRevision(ctx); err != nil || got != 0 {
		t.Fatalf("before any compaction: %d, %v; want 0", got, err)
	}
	for _, target := range []int64{revs[10], revs[37], revs[59]} {
		if err := a.Compact(ctx, target); err != nil {
			t.Fatal(err)
		}
		if got, err := b.CompactedRevision(ctx); err != nil || got != target {
			t.Fatalf("b sees compacted revision %d, %v; a compacted to %d", got, err, target)
		}
	}
	if _, err := b.Watch(ctx, "/c/", revs[58]); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("watch below the compaction: %v, want ErrCompacted", err)
	}
	if _, err := b.List(ctx, store.ListOptions{Prefix: "/c/", Revision: revs[30]}); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("list below the compaction: %v, want ErrCompacted", err)
	}
}

func TestWatch_CompactionOvertakesWatcher_EndsWithErrCompacted(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	s := openT(t, testConfig(c.Endpoints()))
	other := openT(t, testConfig(c.Endpoints()))
	ctx := ctxT(t, time.Minute)
	start, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := 0; i < 20; i++ {
		last = create(t, s, fmt.Sprintf("/o/%02d", i)).ModRevision
	}
	// Compacted between the watch's own check and etcd's start of it, or
	// anyway before the history was sent: the watch must fail, not skip.
	if err := other.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/o/", start)
	if err == nil {
		got := drain(t, w)
		err = w.Err()
		t.Logf("watch started, then ended after %d events", len(got))
	}
	if !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("watch from %d after compaction at %d: %v, want ErrCompacted", start, last, err)
	}
}

func TestClose_EndsWatchesAndCalls_WithErrClosed(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	s, err := etcd.Open(context.Background(), testConfig(c.Endpoints()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, time.Minute)
	w, err := s.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	drain(t, w)
	if !errors.Is(w.Err(), store.ErrClosed) {
		t.Fatalf("watch after Close: %v, want ErrClosed", w.Err())
	}
	calls := map[string]func() error{
		"get":    func() error { _, err := s.Get(ctx, "/k"); return err },
		"create": func() error { _, err := s.Create(ctx, "/k", nil); return err },
		"watch":  func() error { _, err := s.Watch(ctx, "", 0); return err },
		"ready":  func() error { return s.Ready(ctx) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestUnreachableCluster_CallsFailWithErrUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	cfg := etcd.Config{Endpoints: []string{"http://" + addr}, RequestTimeout: time.Second}
	s := openT(t, cfg)
	calls := map[string]func(ctx context.Context) error{
		"ready":  func(ctx context.Context) error { return s.Ready(ctx) },
		"create": func(ctx context.Context) error { _, err := s.Create(ctx, "/k", nil); return err },
		"list":   func(ctx context.Context) error { _, err := s.List(ctx, store.ListOptions{}); return err },
		"watch":  func(ctx context.Context) error { _, err := s.Watch(ctx, "", 0); return err },
	}
	for name, call := range calls {
		ctx := ctxT(t, 30*time.Second)
		t0 := time.Now()
		err := call(ctx)
		if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			t.Errorf("%s: %v (caller ctx %v), want ErrUnavailable from the request timeout", name, err, ctx.Err())
		}
		t.Logf("%s failed after %v: %v", name, time.Since(t0).Round(time.Millisecond), err)
	}
	// The caller's own deadline, shorter than the request timeout, is the
	// caller's error, not the datastore's.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Get(ctx, "/k"); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("get with a short caller deadline: %v, want the caller's DeadlineExceeded", err)
	}
}

func TestOpen_BadConfig_Refused(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  etcd.Config
	}{
		{"no endpoints", etcd.Config{Endpoints: []string{" , "}}},
		{"cert without key", etcd.Config{Endpoints: []string{"https://127.0.0.1:2379"}, CertFile: notPEM}},
		{"CA file not PEM", etcd.Config{Endpoints: []string{"https://127.0.0.1:2379"}, CAFile: notPEM}},
		{"CA file missing", etcd.Config{Endpoints: []string{"https://127.0.0.1:2379"}, CAFile: filepath.Join(dir, "nope")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := etcd.Open(context.Background(), c.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open accepted the config")
			}
		})
	}
}

func TestOpen_CommaSeparatedEndpoints_AutoCompactRuns(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	cfg := testConfig([]string{c.Endpoint(0) + ", " + c.Endpoint(0)})
	cfg.CompactInterval = 100 * time.Millisecond
	s := openT(t, cfg)
	ctx := ctxT(t, time.Minute)
	first := create(t, s, "/auto/a")
	create(t, s, "/auto/b")
	// AutoCompact compacts to the revision that was current one tick
	// earlier: within a few ticks the first write's revision is gone.
	for {
		got, err := s.CompactedRevision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got >= first.ModRevision {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no automatic compaction past %d (compacted at %d)", first.ModRevision, got)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
