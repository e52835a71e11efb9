package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff/store"
	"skiff/store/sqlite"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openStore opens a SQLite store at path, closed at the end of the test.
func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(testContext(t), sqlite.Config{Path: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func create(t *testing.T, st store.Store, keys ...string) int64 {
	t.Helper()
	var rev int64
	for _, k := range keys {
		kv, err := st.Create(testContext(t), k, []byte("value of "+k))
		if err != nil {
			t.Fatalf("create %s: %v", k, err)
		}
		rev = kv.ModRevision
	}
	return rev
}

func names(infos []Info) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.Name)
	}
	return out
}

func TestSave_NamesFileAsK3s_RecordsRevisionSizeNodeAndTime(t *testing.T) {
	ctx := testContext(t)
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	rev := create(t, st, "/a", "/b", "/c")
	dir := filepath.Join(t.TempDir(), "snapshots")
	at := time.Unix(1700000000, 0)

	info, err := Save(ctx, st, dir, OnDemandName, "node-1", at)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "on-demand-node-1-1700000000" || info.Path != filepath.Join(dir, info.Name) {
		t.Fatalf("saved as %q at %q, want on-demand-node-1-1700000000 in %s", info.Name, info.Path, dir)
	}
	if info.Revision != rev || info.Node != "node-1" || !info.Created.Equal(at) || info.Size <= 0 {
		t.Fatalf("info %+v, want revision %d, node node-1, created %v, a size", info, rev, at)
	}
	listed, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0] != info {
		t.Fatalf("List = %+v, want [%+v]", listed, info)
	}
	// The snapshot is a store of its own with the saved keys.
	got := openStore(t, info.Path)
	if kv, err := got.Get(ctx, "/b"); err != nil || string(kv.Value) != "value of /b" {
		t.Fatalf("Get /b from the snapshot: %q, %v", kv.Value, err)
	}
}

func TestSave_SameNameTwice_RefusesToOverwrite(t *testing.T) {
	ctx := testContext(t)
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	create(t, st, "/a")
	dir := t.TempDir()
	at := time.Unix(1700000000, 0)
	first, err := Save(ctx, st, dir, OnDemandName, "n", at)
	if err != nil {
		t.Fatal(err)
	}
	create(t, st, "/b")
	if _, err := Save(ctx, st, dir, OnDemandName, "n", at); !errors.Is(err, ErrExists) {
		t.Fatalf("second save at the same second: %v, want ErrExists", err)
	}
	if m, err := sqlite.ReadMeta(ctx, first.Path); err != nil || m.Revision != first.Revision {
		t.Fatalf("first snapshot changed: %+v, %v, want revision %d", m, err, first.Revision)
	}
	assertOnlySnapshots(t, dir, first.Name)
}

func TestSave_FailedBackup_LeavesNothingListed(t *testing.T) {
	dir := t.TempDir()
	// A backup that writes half a file and fails, as a crash or a full disk
	// would leave it.
	half := backupFunc(func(ctx context.Context, path string) error {
		os.WriteFile(path, []byte("SQLite format 3\x00 half"), 0o600)
		return errors.New("disk full")
	})
	if _, err := Save(testContext(t), half, dir, OnDemandName, "n", time.Now()); err == nil {
		t.Fatal("save with a failing backup succeeded")
	}
	assertOnlySnapshots(t, dir)
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("files left behind: %v", entries)
	}
}

func TestList_IgnoresTemporaryAndSideFiles_ReadsSnapshotsWithoutMetadata(t *testing.T) {
	ctx := testContext(t)
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	rev := create(t, st, "/a")
	dir := t.TempDir()
	// An interrupted Save's temporary file and SQLite's side files.
	for _, n := range []string{".on-demand-n-1.tmp-123", "copied-1700000100-wal", "copied-1700000100-shm"} {
		os.WriteFile(filepath.Join(dir, n), []byte("partial"), 0o600)
	}
	// A snapshot copied in by hand: no sidecar.
	if err := st.Backup(ctx, filepath.Join(dir, "copied-1700000100")); err != nil {
		t.Fatal(err)
	}
	listed, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Name != "copied-1700000100" || listed[0].Revision != rev || !listed[0].Created.Equal(time.Unix(1700000100, 0)) {
		t.Fatalf("List = %+v, want only copied-1700000100 at revision %d, created from its name", listed, rev)
	}
}

func TestDelete_RefusesNamesOutsideDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "snapshots")
	os.MkdirAll(dir, 0o700)
	victim := filepath.Join(parent, "x")
	os.WriteFile(victim, []byte("keep me"), 0o600)
	os.WriteFile(filepath.Join(dir, "on-demand-n-1"), []byte("s"), 0o600)
	for _, bad := range []string{"../x", victim, "sub/x", "", ".", "..", ".metadata"} {
		// A bad name anywhere in the list: nothing at all is deleted.
		if err := Delete(dir, "on-demand-n-1", bad); !errors.Is(err, ErrInvalidName) {
			t.Fatalf("Delete(%q) = %v, want ErrInvalidName", bad, err)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("file outside the snapshot dir: %v", err)
	}
	assertOnlySnapshots(t, dir, "on-demand-n-1")
}

func TestDelete_RemovesSnapshotAndMetadata_MissingIsNotFound(t *testing.T) {
	ctx := testContext(t)
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	dir := t.TempDir()
	a, _ := Save(ctx, st, dir, OnDemandName, "n", time.Unix(100, 0))
	b, _ := Save(ctx, st, dir, OnDemandName, "n", time.Unix(200, 0))
	if err := Delete(dir, a.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(metadataPath(dir, a.Name)); !os.IsNotExist(err) {
		t.Fatalf("metadata of a deleted snapshot: %v", err)
	}
	assertOnlySnapshots(t, dir, b.Name)
	if err := Delete(dir, a.Name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting it again: %v, want ErrNotFound", err)
	}
}

func TestPrune_KeepsNewestScheduledOfThisNode_LeavesOnDemandAndOtherNodes(t *testing.T) {
	ctx := testContext(t)
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	create(t, st, "/a")
	dir := t.TempDir()
	var want []string
	for i := 1; i <= 5; i++ {
		s, err := Save(ctx, st, dir, ScheduledName, "n1", time.Unix(int64(1000*i), 0))
		if err != nil {
			t.Fatal(err)
		}
		if i > 3 {
			want = append(want, s.Name)
		}
	}
	others := []struct {
		name, node string
	}{{OnDemandName, "n1"}, {ScheduledName, "n10"}, {ScheduledName, "n1-b"}}
	for i, o := range others {
		s, err := Save(ctx, st, dir, o.name, o.node, time.Unix(int64(10+i), 0)) // older than all
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, s.Name)
	}
	if err := Prune(dir, ScheduledName+"-n1", 2); err != nil {
		t.Fatal(err)
	}
	assertOnlySnapshots(t, dir, want...)
	if err := Prune(dir, ScheduledName+"-n1", 0); err != nil {
		t.Fatal(err)
	}
	assertOnlySnapshots(t, dir, want...)
}

func assertOnlySnapshots(t *testing.T, dir string, want ...string) {
	t.Helper()
	listed, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := names(listed)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("snapshots %v, want %v", got, want)
	}
}

type backupFunc func(ctx context.Context, path string) error

func (f backupFunc) Backup(ctx context.Context, path string) error { return f(ctx, path) }

func TestBackupFile_BesideARunningStore_AndAfterItClosed(t *testing.T) {
	ctx := testContext(t)
	dbPath := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	rev := create(t, st, "/a", "/b")
	dir := t.TempDir()
	live := filepath.Join(dir, "live")
	if err := sqlite.BackupFile(ctx, dbPath, live); err != nil {
		t.Fatalf("backup beside the open store: %v", err)
	}
	if m, err := sqlite.ReadMeta(ctx, live); err != nil || m.Revision != rev {
		t.Fatalf("backup beside the open store: %+v, %v, want revision %d", m, err, rev)
	}
	rev = create(t, st, "/c")
	st.Close()
	closed := filepath.Join(dir, "closed")
	if err := sqlite.BackupFile(ctx, dbPath, closed); err != nil {
		t.Fatalf("backup of the closed store: %v", err)
	}
	if m, err := sqlite.ReadMeta(ctx, closed); err != nil || m.Revision != rev {
		t.Fatalf("backup of the closed store: %+v, %v, want revision %d", m, err, rev)
	}
	if err := sqlite.BackupFile(ctx, dbPath, closed); err == nil {
		t.Fatal("backup over an existing file succeeded")
	}
	if m, err := sqlite.ReadMeta(ctx, closed); err != nil || m.Revision != rev {
		t.Fatalf("existing file damaged by a refused backup: %+v, %v", m, err)
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if err := sqlite.BackupFile(ctx, missing, filepath.Join(dir, "x")); err == nil {
		t.Fatal("backup of a missing database succeeded")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("backup of a missing database created it: %v", err)
	}
}

func TestBackupFile_NotASkiffDatabase_Fails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junk")
	os.WriteFile(path, []byte(strings.Repeat("not sqlite ", 100)), 0o600)
	err := sqlite.BackupFile(testContext(t), path, filepath.Join(t.TempDir(), "x"))
	if err == nil || !strings.Contains(err.Error(), "not a skiff database") {
		t.Fatalf("backup of junk: %v, want 'not a skiff database'", err)
	}
}

func ExampleFileName() {
	fmt.Println(FileName(ScheduledName, "server-1", time.Unix(1700000000, 0)))
	// Output: scheduled-server-1-1700000000
}
