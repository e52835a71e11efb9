package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff/store"
	"skiff/store/sqlite"
)

func TestRestoreSQLite_MovesOldDBAside_RestoredStoreHasSavedObjectsAndRevision(t *testing.T) {
	ctx := testContext(t)
	dbPath := filepath.Join(t.TempDir(), "db", "state.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	rev := create(t, st, "/a", "/b")
	snap, err := Save(ctx, st, t.TempDir(), OnDemandName, "n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	after := create(t, st, "/later")
	if _, _, err := st.Delete(ctx, "/a", 0); err != nil {
		t.Fatal(err)
	}
	st.Close()

	at := time.Unix(1700000000, 0)
	aside, err := RestoreSQLiteAt(ctx, snap.Path, dbPath, at)
	if err != nil {
		t.Fatal(err)
	}
	if aside != dbPath+".before-restore-1700000000" {
		t.Fatalf("old database moved to %q", aside)
	}
	// The old database is whole under its new name.
	if m, err := sqlite.ReadMeta(ctx, aside); err != nil || m.Revision <= after {
		t.Fatalf("old database aside: %+v, %v, want revision > %d", m, err, after)
	}
	for _, s := range sideFiles {
		if _, err := os.Stat(dbPath + s); err == nil {
			t.Fatalf("the old %s is still beside the restored database", s)
		}
	}
	restored := openStore(t, dbPath)
	if cur, _ := restored.CurrentRevision(ctx); cur != rev {
		t.Fatalf("restored revision %d, want the snapshot's %d", cur, rev)
	}
	for key, want := range map[string]error{"/a": nil, "/b": nil, "/later": store.ErrNotFound} {
		if _, err := restored.Get(ctx, key); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("Get %s after restore: %v, want %v", key, err, want)
		}
	}
	// Writes go on from the snapshot's revision.
	if kv, err := restored.Create(ctx, "/new", nil); err != nil || kv.ModRevision != rev+1 {
		t.Fatalf("create after restore: %+v, %v, want revision %d", kv, err, rev+1)
	}
}

func TestRestoreSQLite_NotASkiffDatabase_LeavesStoreAlone(t *testing.T) {
	ctx := testContext(t)
	dbPath := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	rev := create(t, st, "/a")
	st.Close()
	junk := filepath.Join(t.TempDir(), "junk")
	os.WriteFile(junk, []byte(strings.Repeat("x", 4096)), 0o600)
	for _, file := range []string{junk, filepath.Join(t.TempDir(), "missing")} {
		if err := RestoreSQLite(ctx, file, dbPath); err == nil {
			t.Fatalf("restore from %s succeeded", file)
		}
	}
	if m, err := sqlite.ReadMeta(ctx, dbPath); err != nil || m.Revision != rev {
		t.Fatalf("store after refused restores: %+v, %v, want revision %d", m, err, rev)
	}
	entries, _ := os.ReadDir(filepath.Dir(dbPath))
	for _, e := range entries {
		if strings.Contains(e.Name(), "restore") {
			t.Fatalf("refused restore left %s", e.Name())
		}
	}
}

func TestRestoreSQLite_FreshDataDir_PlacesSnapshot(t *testing.T) {
	ctx := testContext(t)
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	rev := create(t, st, "/a")
	snap, err := Save(ctx, st, t.TempDir(), OnDemandName, "n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(t.TempDir(), "server", "db", "state.db")
	aside, err := RestoreSQLiteAt(ctx, snap.Path, dbPath, time.Now())
	if err != nil || aside != "" {
		t.Fatalf("restore into a fresh dir: aside %q, %v", aside, err)
	}
	if m, err := sqlite.ReadMeta(ctx, dbPath); err != nil || m.Revision != rev {
		t.Fatalf("restored: %+v, %v, want revision %d", m, err, rev)
	}
}

func TestLockDataDir_SecondHolderRefused_UntilReleased(t *testing.T) {
	dataDir := t.TempDir()
	first, err := LockDataDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockDataDir(dataDir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "process ") {
		t.Fatalf("second lock: %v, want ErrLocked naming the holder", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := LockDataDir(dataDir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Close()
}
