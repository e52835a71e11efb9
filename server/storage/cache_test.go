package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"skiff/server/registry"
	"skiff/store"
	"skiff/store/sqlite"
)

// testStorage is a Storage over SQLite in a temp dir with its cache
// running; the cache goroutine is awaited when the test ends.
func testStorage(t *testing.T) (*Storage, *registry.Registry) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Builtin(registry.Hooks{})...)
	if err != nil {
		t.Fatal(err)
	}
	s := New(st, reg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Cache().Run(ctx, nil)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		st.Close()
	})
	return s, reg
}

func lookup(t *testing.T, reg *registry.Registry, name string) *registry.Resource {
	t.Helper()
	res, ok := reg.Lookup("", "v1", name)
	if !ok {
		t.Fatalf("no resource %s", name)
	}
	return res
}

// deadline bounds a step that must finish: generous, so a slow machine
// passes, while a stall (a wait that only the next write would end) fails.
func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createConfigMap(t *testing.T, s *Storage, res *registry.Resource, name string) *Entry {
	t.Helper()
	e, err := s.Create(deadline(t), res, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Writes outside the cached prefixes (the node-port and service-IP
// allocation keys) move the store's revision; a consistent read waits for
// the cache to reach it, so the cache must advance on them too, and must not
// need a later write under /registry/ to get there.
func TestCache_WriteOutsideCachedPrefixes_ConsistentListReturnsAtStoreRevision(t *testing.T) {
	cases := []struct {
		name  string
		write func(ctx context.Context, st store.Store) error
	}{
		{"create of an allocation key", func(ctx context.Context, st store.Store) error {
			_, err := st.Create(ctx, "/allocations/nodeports/30080", []byte("x"))
			return err
		}},
		{"update of an allocation key", func(ctx context.Context, st store.Store) error {
			if _, err := st.Create(ctx, "/allocations/serviceips/10.0.0.9", []byte("a")); err != nil {
				return err
			}
			_, err := st.Update(ctx, "/allocations/serviceips/10.0.0.9", []byte("b"), 0)
			return err
		}},
		{"delete of an allocation key", func(ctx context.Context, st store.Store) error {
			if _, err := st.Create(ctx, "/allocations/nodeports/30081", []byte("x")); err != nil {
				return err
			}
			_, _, err := st.Delete(ctx, "/allocations/nodeports/30081", 0)
			return err
		}},
		{"write under /registry/ of no served resource", func(ctx context.Context, st store.Store) error {
			_, err := st.Create(ctx, "/registry/nothing.example.com/widgets/w", []byte("{}"))
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, reg := testStorage(t)
			cms := lookup(t, reg, "configmaps")
			before := createConfigMap(t, s, cms, "before")
			if err := c.write(deadline(t), s.Store()); err != nil {
				t.Fatal(err)
			}
			want, err := s.Store().CurrentRevision(deadline(t))
			if err != nil {
				t.Fatal(err)
			}
			if want <= before.Rev {
				t.Fatalf("store revision %d did not move past %d", want, before.Rev)
			}
			// No other write happens: only the write above can advance the cache.
			if err := s.Cache().WaitCurrent(deadline(t)); err != nil {
				t.Fatalf("consistent read after the write: %v", err)
			}
			items, rev, err := s.Cache().List(cms, Predicate{})
			if err != nil {
				t.Fatal(err)
			}
			if rev != want {
				t.Fatalf("list at revision %d, want the store's %d", rev, want)
			}
			if len(items) != 1 || items[0].Rev != before.Rev {
				t.Fatalf("list has %d items, want only the configmap written before", len(items))
			}
		})
	}
}

// next is the watcher's next live event, failing the test if none comes.
func next(t *testing.T, w *Watcher) Event {
	t.Helper()
	select {
	case e, ok := <-w.Events():
		if !ok {
			t.Fatal("watch closed")
		}
		return e
	case <-deadline(t).Done():
		t.Fatal("no event")
	}
	return Event{}
}

// A watcher of a resource nobody writes still gets bookmarks whose revision
// follows the store's, as upstream's progress-based bookmarks do, and a
// watch resumed from such a bookmark is served from the cache (no 410).
func TestCache_OnlyOtherKeysWritten_BookmarksProgress(t *testing.T) {
	s, reg := testStorage(t)
	cms, secrets := lookup(t, reg, "configmaps"), lookup(t, reg, "secrets")
	c := s.Cache()
	if err := c.WaitCurrent(deadline(t)); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(deadline(t), cms, WatchOptions{Bookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	quiet, err := c.Watch(deadline(t), cms, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Stop()
	writes := []struct {
		name  string
		write func(ctx context.Context) (int64, error)
	}{
		{"allocation key", func(ctx context.Context) (int64, error) {
			kv, err := s.Store().Create(ctx, "/allocations/nodeports/30090", []byte("x"))
			return kv.ModRevision, err
		}},
		{"object of another resource", func(ctx context.Context) (int64, error) {
			e, err := s.Create(ctx, secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}})
			if err != nil {
				return 0, err
			}
			return e.Rev, nil
		}},
		{"allocation key again", func(ctx context.Context) (int64, error) {
			_, err := s.Store().Update(ctx, "/allocations/nodeports/30090", []byte("y"), 0)
			if err != nil {
				return 0, err
			}
			return s.Store().CurrentRevision(ctx)
		}},
	}
	var last int64
	for _, wr := range writes {
		rev, err := wr.write(deadline(t))
		if err != nil {
			t.Fatalf("%s: %v", wr.name, err)
		}
		if err := c.WaitFor(deadline(t), rev); err != nil {
			t.Fatalf("%s: cache did not reach revision %d: %v", wr.name, rev, err)
		}
		c.sendBookmarks()
		e := next(t, w)
		if e.Type != watch.Bookmark || e.Entry.Rev != rev {
			t.Fatalf("%s: got %s at %d, want a bookmark at %d", wr.name, e.Type, e.Entry.Rev, rev)
		}
		if e.Entry.Rev <= last {
			t.Fatalf("%s: bookmark at %d did not progress past %d", wr.name, e.Entry.Rev, last)
		}
		last = e.Entry.Rev
	}

	resumed, err := c.Watch(deadline(t), cms, WatchOptions{Rev: last})
	if err != nil {
		t.Fatalf("resume from bookmark %d: %v", last, err)
	}
	defer resumed.Stop()
	if n := len(resumed.Initial()); n != 0 {
		t.Fatalf("resumed watch replays %d events, want none", n)
	}
	cm := createConfigMap(t, s, cms, "after")
	for name, watcher := range map[string]*Watcher{"resumed": resumed, "without bookmarks": quiet, "with bookmarks": w} {
		if e := next(t, watcher); e.Type != watch.Added || e.Entry.Rev != cm.Rev {
			t.Fatalf("%s watcher: got %s at %d, want the configmap ADDED at %d", name, e.Type, e.Entry.Rev, cm.Rev)
		}
	}
}
