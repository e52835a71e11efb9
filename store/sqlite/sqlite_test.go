package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skiff/store"
	"skiff/store/storetest"
)

func open(ctx context.Context, dir string) (store.Store, error) {
	return Open(ctx, Config{Path: filepath.Join(dir, "state.db")})
}

func TestMain(m *testing.M) {
	storetest.CrashChildMain(open)
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

func TestWatch_SlowWatcher_IsCutOffWithoutBlockingWriters(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "db"), WatchBuffer: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	slow, err := s.Watch(ctx, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	// Nobody reads slow. 200 writes must all finish even so.
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 200; i++ {
			if _, err := s.Create(ctx, fmt.Sprintf("/k/%d", i), nil); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("writers blocked behind a watcher that does not read")
	}
	n := 0
	for range slow.Events() {
		n++
	}
	if !errors.Is(slow.Err(), store.ErrWatcherTooSlow) {
		t.Fatalf("slow watcher ended with %v after %d events, want ErrWatcherTooSlow", slow.Err(), n)
	}
	if n >= 200 {
		t.Fatalf("slow watcher got all %d events; it was never cut off", n)
	}
}

func TestClose_EndsWatchesAndWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range w.Events() {
	}
	if !errors.Is(w.Err(), store.ErrClosed) {
		t.Fatalf("watch after Close: %v, want ErrClosed", w.Err())
	}
	if _, err := s.Create(ctx, "/x", nil); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("create after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Watch(ctx, "/", 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("watch after Close: %v, want ErrClosed", err)
	}
}

func TestAutoCompact_KeepsOneIntervalOfHistory(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "db"), CompactInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kv, err := s.Create(ctx, "/a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "/a", []byte("2"), kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, _ := s.CompactedRevision(ctx)
		if c == kv.ModRevision+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("compacted revision is %d after 20s, want %d", c, kv.ModRevision+1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := s.Get(ctx, "/a"); err != nil || string(got.Value) != "2" {
		t.Fatalf("newest value after compaction: %+v, %v", got, err)
	}
}
