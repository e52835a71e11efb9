package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"skiff/store"
)

func openAt(t *testing.T, path string, replica bool) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: path, Replica: replica})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mixedBatch(i int) Batch {
	k := fmt.Sprintf("/k/%d", i%5)
	return Batch{Index: uint64(i + 1), Commands: []Command{
		{Kind: CmdCreate, Key: k, Value: []byte("v")},
		{Kind: CmdUpdate, Key: k, Value: []byte(fmt.Sprint(i)), Expected: int64(i)}, // mostly a conflict
		{Kind: CmdUpdate, Key: k, Value: []byte(fmt.Sprint(i))},
		{Kind: CmdDelete, Key: fmt.Sprintf("/k/%d", (i+2)%5)},
	}}
}

func TestApply_SameBatchesOnTwoReplicas_SameRevisionsResultsAndState(t *testing.T) {
	ctx := context.Background()
	a := openAt(t, filepath.Join(t.TempDir(), "a.db"), true)
	b := openAt(t, filepath.Join(t.TempDir(), "b.db"), true)
	for i := 0; i < 50; i++ {
		ra, err := a.Apply(ctx, mixedBatch(i))
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.Apply(ctx, mixedBatch(i))
		if err != nil {
			t.Fatal(err)
		}
		for j := range ra {
			if ra[j].Rev != rb[j].Rev || !reflect.DeepEqual(ra[j].KV, rb[j].KV) || (ra[j].Err == nil) != (rb[j].Err == nil) {
				t.Fatalf("batch %d command %d: %+v vs %+v", i, j, ra[j], rb[j])
			}
		}
	}
	la, _ := a.List(ctx, store.ListOptions{})
	lb, _ := b.List(ctx, store.ListOptions{})
	if !reflect.DeepEqual(la, lb) || la.Revision < 50 {
		t.Fatalf("replicas differ: %+v vs %+v", la, lb)
	}
}

func TestApply_IndexedBatchReplayed_AppliedOnceAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(ctx, Config{Path: path, Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	create := func(idx uint64, key string) []Result {
		t.Helper()
		r, err := s.Apply(ctx, Batch{Index: idx, Commands: []Command{{Kind: CmdCreate, Key: key}}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := create(7, "/a"); len(r) != 1 || r[0].Err != nil || r[0].Rev != 2 {
		t.Fatalf("first apply: %+v", r)
	}
	if r := create(7, "/b"); r != nil {
		t.Fatalf("replayed index 7 applied again: %+v", r)
	}
	s.Close()
	s, err = Open(ctx, Config{Path: path, Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.AppliedIndex() != 7 {
		t.Fatalf("applied index after reopen = %d, want 7", s.AppliedIndex())
	}
	if r := create(5, "/c"); r != nil {
		t.Fatalf("older index applied: %+v", r)
	}
	if r := create(8, "/d"); r[0].Rev != 3 {
		t.Fatalf("next index: %+v", r)
	}
	if _, err := s.Get(ctx, "/b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("/b from a replayed batch exists: %v", err)
	}
}

func TestReplica_OwnWrites_FailWithErrReplica(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "r.db"), true)
	ctx := context.Background()
	if _, err := s.Create(ctx, "/x", nil); !errors.Is(err, ErrReplica) {
		t.Fatalf("Create on a replica: %v", err)
	}
	if _, _, err := s.Delete(ctx, "/x", 0); !errors.Is(err, ErrReplica) {
		t.Fatalf("Delete on a replica: %v", err)
	}
}

func TestApply_UnknownKindOrEmptyKey_FailsTheCommandOnly(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "r.db"), true)
	r, err := s.Apply(context.Background(), Batch{Commands: []Command{{Kind: 99, Key: "/x"}, {Kind: CmdCreate}, {Kind: CmdCreate, Key: "/ok"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(r[0].Err, store.ErrInvalidKey) || !errors.Is(r[1].Err, store.ErrInvalidKey) || r[2].Err != nil || r[2].Rev != 2 {
		t.Fatalf("results: %+v", r)
	}
}

func TestBackupRestore_RoundTrip_CutsWatchesAndKeepsRevisions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := openAt(t, filepath.Join(dir, "src.db"), false)
	for i := 0; i < 20; i++ {
		if _, err := src.Create(ctx, fmt.Sprintf("/k/%02d", i), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := src.List(ctx, store.ListOptions{})
	snap := filepath.Join(dir, "snap.db")
	if err := src.Backup(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Create(ctx, "/after", nil); err != nil { // not in the backup
		t.Fatal(err)
	}
	m, err := ReadMeta(ctx, snap)
	if err != nil || m.Revision != want.Revision {
		t.Fatalf("backup meta %+v, %v; want revision %d", m, err, want.Revision)
	}

	dst := openAt(t, filepath.Join(dir, "dst.db"), false)
	if _, err := dst.Create(ctx, "/other", nil); err != nil {
		t.Fatal(err)
	}
	w, err := dst.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(ctx, snap); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-w.Events():
		if ok {
			t.Fatal("watch got an event across the restore")
		}
		if !errors.Is(w.Err(), store.ErrCompacted) {
			t.Fatalf("watch ended with %v, want ErrCompacted", w.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch not cut by the restore")
	}
	got, _ := dst.List(ctx, store.ListOptions{})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("restored list differs:\n got %+v\nwant %+v", got, want)
	}
	kv, err := dst.Create(ctx, "/next", nil)
	if err != nil || kv.ModRevision != want.Revision+1 {
		t.Fatalf("write after restore: %+v, %v", kv, err)
	}
}

func TestBackup_ExistingFile_FailsAndKeepsIt(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, filepath.Join(dir, "s.db"), false)
	if err := s.Backup(context.Background(), filepath.Join(dir, "s.db")); err == nil {
		t.Fatal("backup over the live database succeeded")
	}
	if _, err := s.Create(context.Background(), "/still", nil); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_DatabaseWithoutAppliedIndex_IsMigrated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE kv (rev INTEGER PRIMARY KEY, key TEXT NOT NULL, created INTEGER NOT NULL, prev_rev INTEGER NOT NULL, deleted INTEGER NOT NULL, value BLOB);
CREATE UNIQUE INDEX kv_key_prev ON kv (key, prev_rev);
CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), current_rev INTEGER NOT NULL, compact_rev INTEGER NOT NULL);
INSERT INTO meta VALUES (1, 5, 0);
INSERT INTO kv VALUES (5, '/old', 5, 0, 0, 'x');`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := openAt(t, path, false)
	kv, err := s.Get(context.Background(), "/old")
	if err != nil || kv.ModRevision != 5 {
		t.Fatalf("old key: %+v, %v", kv, err)
	}
	if kv, err := s.Create(context.Background(), "/new", nil); err != nil || kv.ModRevision != 6 {
		t.Fatalf("write after migration: %+v, %v", kv, err)
	}
}
