package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"skiff/store"
)

// collect reads n events from w, failing the test if they do not arrive.
func collect(t *testing.T, w store.Watcher, n int) []store.Event {
	t.Helper()
	var out []store.Event
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch closed after %d of %d events: %v", len(out), n, w.Err())
			}
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("only %d of %d events within 30s", len(out), n)
		}
	}
	return out
}

// expectQuiet fails if w delivers anything within a short while.
func expectQuiet(t *testing.T, w store.Watcher) {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if ok {
			t.Fatalf("unexpected event %s %s@%d", ev.Type, ev.KV.Key, ev.Revision())
		}
	case <-time.After(100 * time.Millisecond):
	}
}

// collector drains a watcher in the background, as a real consumer does
// while writes are still going on.
type collector struct {
	w      store.Watcher
	mu     sync.Mutex
	events []store.Event
	closed bool
}

func startCollect(w store.Watcher) *collector {
	c := &collector{w: w}
	go func() {
		for ev := range w.Events() {
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
	}()
	return c
}

// wait returns the first n events once they have arrived.
func (c *collector) wait(t *testing.T, n int) []store.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		got, closed := len(c.events), c.closed
		c.mu.Unlock()
		switch {
		case got >= n:
			c.mu.Lock()
			defer c.mu.Unlock()
			return append([]store.Event(nil), c.events[:n]...)
		case closed:
			t.Fatalf("watch closed after %d of %d events: %v", got, n, c.w.Err())
		case time.Now().After(deadline):
			t.Fatalf("only %d of %d events within 30s", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// extra reports events beyond the first n (there must be none).
func (c *collector) extra(n int) int {
	time.Sleep(100 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events) - n
}

type wrote struct {
	key string
	typ store.EventType
}

func testWatchCompleteness(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	start := mustRev(t, s)
	liveW, err := s.Watch(ctx, "/w/", start)
	if err != nil {
		t.Fatal(err)
	}
	defer liveW.Stop()
	live := startCollect(liveW)

	const writers, perWriter = 8, 150
	var mu sync.Mutex
	acked := map[int64]wrote{}
	var late *collector
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				key := fmt.Sprintf("/w/%d/%d", w, i)
				kv, err := s.Create(ctx, key, []byte("v"))
				if err != nil {
					t.Errorf("create %s: %v", key, err)
					return
				}
				mu.Lock()
				acked[kv.ModRevision] = wrote{key, store.Created}
				mu.Unlock()
				// Halfway through, a second watcher starts from the very
				// beginning: it must replay history and hand over to live
				// events without a gap or a duplicate while writes go on.
				if w == 0 && i == perWriter/2 {
					lw, err := s.Watch(ctx, "/w/", start)
					if err != nil {
						t.Errorf("late watch: %v", err)
						return
					}
					t.Cleanup(lw.Stop)
					mu.Lock()
					late = startCollect(lw)
					mu.Unlock()
				}
				var rev int64
				var typ store.EventType
				switch {
				case i%5 == 4:
					typ = store.Deleted
					_, rev, err = s.Delete(ctx, key, kv.ModRevision)
				case i%3 == 2:
					typ = store.Updated
					var u store.KeyValue
					u, err = s.Update(ctx, key, []byte("v2"), kv.ModRevision)
					rev = u.ModRevision
				default:
					continue
				}
				if err != nil {
					t.Errorf("write %s: %v", key, err)
					return
				}
				mu.Lock()
				acked[rev] = wrote{key, typ}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if late == nil {
		t.Fatal("late watcher never started")
	}
	for name, c := range map[string]*collector{"live": live, "late": late} {
		events := c.wait(t, len(acked))
		for i, ev := range events {
			if want := start + int64(i) + 1; ev.Revision() != want {
				t.Fatalf("%s watcher: event %d has revision %d, want %d (gap, duplicate or disorder)", name, i, ev.Revision(), want)
			}
			if a := acked[ev.Revision()]; a.key != ev.KV.Key || a.typ != ev.Type {
				t.Fatalf("%s watcher: revision %d is %s %s, the writer did %s %s", name, ev.Revision(), ev.Type, ev.KV.Key, a.typ, a.key)
			}
		}
		if n := c.extra(len(acked)); n != 0 {
			t.Fatalf("%s watcher: %d events beyond the writes made", name, n)
		}
	}
}

func testWatchReplay(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	r0 := mustRev(t, s)
	a := mustCreate(t, s, "/h/a", "a1")
	a2, _ := s.Update(ctx, "/h/a", []byte("a2"), a.ModRevision)
	mustCreate(t, s, "/h/b", "b1")
	s.Delete(ctx, "/h/a", 0)
	mustCreate(t, s, "/h/a", "a3")

	type want struct {
		typ      store.EventType
		key, val string
		prev     string // "" means no previous value
	}
	all := []want{
		{store.Created, "/h/a", "a1", ""},
		{store.Updated, "/h/a", "a2", "a1"},
		{store.Created, "/h/b", "b1", ""},
		{store.Deleted, "/h/a", "", "a2"},
		{store.Created, "/h/a", "a3", ""},
	}
	for _, from := range []int64{r0, r0 + 2, r0 + 5} {
		w, err := s.Watch(ctx, "/h/", from)
		if err != nil {
			t.Fatal(err)
		}
		exp := all[from-r0:]
		got := collect(t, w, len(exp))
		for i, ev := range got {
			e := exp[i]
			prev := ""
			if ev.Prev != nil {
				prev = string(ev.Prev.Value)
			}
			if ev.Type != e.typ || ev.KV.Key != e.key || string(ev.KV.Value) != e.val || prev != e.prev || ev.Revision() != from+int64(i)+1 {
				t.Fatalf("watch from %d, event %d: %s %s=%q prev %q @%d; want %+v @%d",
					from, i, ev.Type, ev.KV.Key, ev.KV.Value, prev, ev.Revision(), e, from+int64(i)+1)
			}
		}
		if from == r0 && got[1].Prev.ModRevision != a.ModRevision {
			t.Fatalf("update's previous revision %d, want %d", got[1].Prev.ModRevision, a.ModRevision)
		}
		if from == r0 && got[3].Prev.ModRevision != a2.ModRevision {
			t.Fatalf("delete's previous revision %d, want %d", got[3].Prev.ModRevision, a2.ModRevision)
		}
		expectQuiet(t, w)
		w.Stop()
	}
}

func testWatchDeletePrev(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	kv := mustCreate(t, s, "/d/k", "v1")
	up, err := s.Update(ctx, "/d/k", []byte("v2"), kv.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/d/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	_, delRev, err := s.Delete(ctx, "/d/k", up.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := s.Watch(ctx, "/d/", up.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	defer replayed.Stop()
	for name, w := range map[string]store.Watcher{"live": w, "replayed": replayed} {
		ev := collect(t, w, 1)[0]
		if ev.Type != store.Deleted || ev.Revision() != delRev || ev.KV.Value != nil {
			t.Fatalf("%s: got %s @%d value %q, want DELETED @%d with no value", name, ev.Type, ev.Revision(), ev.KV.Value, delRev)
		}
		if ev.Prev == nil || string(ev.Prev.Value) != "v2" || ev.Prev.ModRevision != up.ModRevision || ev.Prev.CreateRevision != kv.ModRevision {
			t.Fatalf("%s: delete event's previous value %+v, want v2 @%d", name, ev.Prev, up.ModRevision)
		}
	}
}

func testWatchPrefix(t *testing.T, s store.Store) {
	w, err := s.Watch(ctxT(t), "/x/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, k := range []string{"/x/1", "/y/1", "/x0", "/x", "/x/2"} {
		mustCreate(t, s, k, "v")
	}
	got := collect(t, w, 2)
	if got[0].KV.Key != "/x/1" || got[1].KV.Key != "/x/2" {
		t.Fatalf("got %s, %s; want /x/1, /x/2", got[0].KV.Key, got[1].KV.Key)
	}
	expectQuiet(t, w)
}

func testWatchStop(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	w, err := s.Watch(ctx, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	w.Stop()
	waitClosed(t, w)
	if w.Err() != nil {
		t.Fatalf("Err after Stop: %v, want nil", w.Err())
	}
	cctx, cancel := context.WithCancel(ctx)
	w2, err := s.Watch(cctx, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	waitClosed(t, w2)
}

func waitClosed(t *testing.T, w store.Watcher) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("watch channel not closed within 10s")
		}
	}
}

func testCompactKeepsNewest(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for i := 0; i < 20; i++ {
		k := fmt.Sprintf("/k/%02d", i)
		kv := mustCreate(t, s, k, "0")
		for v := 1; v <= i%4; v++ {
			if kv, _ = s.Update(ctx, k, []byte(fmt.Sprint(v)), kv.ModRevision); kv.ModRevision == 0 {
				t.Fatal("update failed")
			}
		}
		if i%5 == 0 {
			s.Delete(ctx, k, 0)
		}
	}
	before, err := s.List(ctx, store.ListOptions{Prefix: "/k/"})
	if err != nil {
		t.Fatal(err)
	}
	old := before.Revision - 10
	rev := mustRev(t, s)
	if err := s.Compact(ctx, rev+1); !errors.Is(err, store.ErrFutureRevision) {
		t.Fatalf("compact to the future: %v, want ErrFutureRevision", err)
	}
	if err := s.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, rev-5); err != nil {
		t.Fatalf("compacting below the compacted revision should be a no-op, got %v", err)
	}
	if c, _ := s.CompactedRevision(ctx); c != rev {
		t.Fatalf("compacted revision %d, want %d", c, rev)
	}
	after, err := s.List(ctx, store.ListOptions{Prefix: "/k/"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after.Items) != fmt.Sprint(before.Items) || len(after.Items) != 16 {
		t.Fatalf("compaction changed the live keys:\nbefore %v\nafter  %v", before.Items, after.Items)
	}
	if _, err := s.List(ctx, store.ListOptions{Prefix: "/k/", Revision: old}); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("list below the compacted revision: %v, want ErrCompacted", err)
	}
	atCompact, err := s.List(ctx, store.ListOptions{Prefix: "/k/", Revision: rev})
	if err != nil || len(atCompact.Items) != 16 {
		t.Fatalf("list at the compacted revision: %d items, %v", len(atCompact.Items), err)
	}
	// Writes go on after compaction, and their history is watchable again.
	kv, err := s.Update(ctx, "/k/01", []byte("after"), 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/k/", rev)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := collect(t, w, 1)[0]
	if ev.Revision() != kv.ModRevision || ev.Prev == nil || string(ev.Prev.Value) != "1" {
		t.Fatalf("event after compaction: %s @%d prev %+v", ev.Type, ev.Revision(), ev.Prev)
	}
}

func testWatchCompacted(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	kv := mustCreate(t, s, "/wc/a", "1")
	s.Update(ctx, "/wc/a", []byte("2"), kv.ModRevision)
	mustCreate(t, s, "/wc/b", "1")
	rev := mustRev(t, s)
	if err := s.Compact(ctx, rev-1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Watch(ctx, "/wc/", rev-2); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("watch from below the compacted revision: %v, want ErrCompacted", err)
	}
	w, err := s.Watch(ctx, "/wc/", rev-1)
	if err != nil {
		t.Fatalf("watch from the compacted revision: %v", err)
	}
	defer w.Stop()
	if ev := collect(t, w, 1)[0]; ev.KV.Key != "/wc/b" || ev.Type != store.Created {
		t.Fatalf("got %s %s, want CREATED /wc/b", ev.Type, ev.KV.Key)
	}
}

// testWatchEveryKey checks what a consumer that must keep up with the
// store's revision (the API server's watch cache) relies on: a watch on the
// empty prefix sees every key, each revision is exactly one event, and
// nothing else (failed writes, compaction) moves the revision. So the
// events of such a watch have consecutive revisions and reach
// CurrentRevision; a gap would leave the consumer waiting for a revision no
// event ever carries.
func testWatchEveryKey(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	mustCreate(t, s, "/registry/a", "1")
	start := mustRev(t, s)
	w, err := s.Watch(ctx, "", start)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := s.Compact(ctx, start); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	kv := mustCreate(t, s, "/allocations/x", "1")
	if _, err := s.Create(ctx, "/allocations/x", []byte("again")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	if _, err := s.Update(ctx, "/allocations/x", []byte("2"), kv.ModRevision+100); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Update at a wrong revision: %v, want ErrConflict", err)
	}
	if _, err := s.Update(ctx, "/allocations/x", []byte("2"), kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "other", "1")
	if _, _, err := s.Delete(ctx, "/registry/a", 0); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "/registry/b", "1")
	end := mustRev(t, s)
	if end != start+5 {
		t.Fatalf("revision %d after 5 successful writes from %d; want %d", end, start, start+5)
	}
	got := collect(t, w, int(end-start))
	for i, ev := range got {
		if want := start + 1 + int64(i); ev.Revision() != want {
			t.Fatalf("event %d (%s %s) at revision %d, want %d: every revision is one event", i, ev.Type, ev.KV.Key, ev.Revision(), want)
		}
	}
	expectQuiet(t, w)
}
