package kinebench

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"skiff/store"
)

// TestAdapter checks that the adapter maps kine's results onto the store
// contract closely enough for the benchmarks to be like-for-like.
func TestAdapter(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	w, err := s.Watch(ctx, "/a/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	kv, err := s.Create(ctx, "/a/1", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/a/1", []byte("x")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	got, err := s.Get(ctx, "/a/1")
	if err != nil || string(got.Value) != "one" || got.ModRevision != kv.ModRevision || got.CreateRevision != kv.ModRevision {
		t.Fatalf("get = %+v, %v; created %+v", got, err, kv)
	}
	if _, err := s.Get(ctx, "/a/none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	up, err := s.Update(ctx, "/a/1", []byte("two"), kv.ModRevision)
	if err != nil || up.ModRevision <= kv.ModRevision {
		t.Fatalf("update = %+v, %v", up, err)
	}
	cur, err := s.Update(ctx, "/a/1", []byte("three"), kv.ModRevision)
	if !errors.Is(err, store.ErrConflict) || cur.ModRevision != up.ModRevision {
		t.Fatalf("stale update = %+v, %v", cur, err)
	}
	if _, err := s.Update(ctx, "/a/none", []byte("x"), 5); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}
	upAny, err := s.Update(ctx, "/a/1", []byte("four"), 0)
	if err != nil || upAny.ModRevision <= up.ModRevision {
		t.Fatalf("update any = %+v, %v", upAny, err)
	}
	for _, k := range []string{"/a/2", "/a/3", "/b/1"} {
		if _, err := s.Create(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Delete(ctx, "/a/2", 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale delete: %v", err)
	}
	_, delRev, err := s.Delete(ctx, "/a/2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Delete(ctx, "/a/2", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete deleted: %v", err)
	}

	// Paging at one snapshot.
	p1, err := s.List(ctx, store.ListOptions{Prefix: "/a/", Limit: 1})
	if err != nil || len(p1.Items) != 1 || p1.Items[0].Key != "/a/1" || p1.Continue == "" || p1.RemainingCount != 1 {
		t.Fatalf("page 1 = %+v, %v", p1, err)
	}
	if _, err := s.Create(ctx, "/a/0", nil); err != nil {
		t.Fatal(err)
	}
	p2, err := s.List(ctx, store.ListOptions{Prefix: "/a/", Limit: 1, Continue: p1.Continue})
	if err != nil || len(p2.Items) != 1 || p2.Items[0].Key != "/a/3" || p2.Continue != "" || p2.Revision != p1.Revision {
		t.Fatalf("page 2 = %+v, %v", p2, err)
	}
	old, err := s.List(ctx, store.ListOptions{Prefix: "/a/", Revision: delRev - 1})
	if err != nil || len(old.Items) != 3 || old.Revision != delRev-1 {
		t.Fatalf("list at %d = %+v, %v", delRev-1, old, err)
	}
	if _, err := s.List(ctx, store.ListOptions{Prefix: "/a/", Revision: 1 << 40}); !errors.Is(err, store.ErrFutureRevision) {
		t.Fatalf("future list: %v", err)
	}

	want := []struct {
		typ store.EventType
		key string
	}{
		{store.Created, "/a/1"}, {store.Updated, "/a/1"}, {store.Updated, "/a/1"},
		{store.Created, "/a/2"}, {store.Created, "/a/3"}, {store.Deleted, "/a/2"}, {store.Created, "/a/0"},
	}
	var last int64
	for i, wnt := range want {
		select {
		case ev := <-w.Events():
			if ev.Type != wnt.typ || ev.KV.Key != wnt.key || ev.Revision() <= last {
				t.Fatalf("event %d = %v %s@%d, want %v %s", i, ev.Type, ev.KV.Key, ev.Revision(), wnt.typ, wnt.key)
			}
			if ev.Type != store.Created && (ev.Prev == nil || ev.Prev.Value == nil) {
				t.Fatalf("event %d has no prev value: %+v", i, ev)
			}
			last = ev.Revision()
		case <-time.After(5 * time.Second):
			t.Fatalf("no event %d", i)
		}
	}

	// A watch from a past revision replays history.
	w2, err := s.Watch(ctx, "/a/1", kv.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w2.Events():
		if ev.Revision() != up.ModRevision || string(ev.Prev.Value) != "one" {
			t.Fatalf("replayed %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no replayed event")
	}
	w2.Stop()

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-w.Events():
		for ok {
			_, ok = <-w.Events()
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch not closed by Close")
	}
	if !errors.Is(w.Err(), store.ErrClosed) {
		t.Fatalf("watch err after Close = %v", w.Err())
	}
	if _, err := s.Get(ctx, "/a/1"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
}

// TestCloseStopsGoroutines checks that Close ends kine's background work
// (poll loop, TTL loop, broadcaster, DB closer) and the adapter's watchers.
func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(context.Background(), "/x/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(context.Background(), "/x/1", nil); err != nil {
		t.Fatal(err)
	}
	<-w.Events()
	s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
