package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skiff/store"
	"skiff/store/sqlite"
)

// TestSaveRestore_ManyKeys_Timed fills a store, saves a snapshot and
// restores it, logging how long each step takes. 2,000 keys by default;
// SKIFF_LONG=1 uses 100,000 (about 1 KiB each, as a small ConfigMap).
func TestSaveRestore_ManyKeys_Timed(t *testing.T) {
	n := 2000
	if os.Getenv("SKIFF_LONG") == "1" {
		n = 100_000
	}
	ctx := testContext(t)
	dbPath := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	start := time.Now()
	const batch = 1000
	for i := 0; i < n; i += batch {
		b := sqlite.Batch{}
		for j := i; j < min(i+batch, n); j++ {
			b.Commands = append(b.Commands, sqlite.Command{Kind: sqlite.CmdCreate, Key: fmt.Sprintf("/registry/configmaps/default/cm-%06d", j), Value: value})
		}
		if _, err := st.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	rev, _ := st.CurrentRevision(ctx)
	t.Logf("filled %d keys in %v (revision %d)", n, time.Since(start).Round(time.Millisecond), rev)

	dir := t.TempDir()
	start = time.Now()
	info, err := Save(ctx, st, dir, OnDemandName, "n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("save of a running store: %v, %d bytes", time.Since(start).Round(time.Millisecond), info.Size)
	if info.Revision != rev {
		t.Fatalf("snapshot revision %d, want %d", info.Revision, rev)
	}
	start = time.Now()
	if err := sqlite.BackupFile(ctx, dbPath, filepath.Join(dir, "from-file")); err != nil {
		t.Fatal(err)
	}
	t.Logf("save from another connection (the CLI's BackupFile): %v", time.Since(start).Round(time.Millisecond))
	if _, _, err := st.Delete(ctx, "/registry/configmaps/default/cm-000000", 0); err != nil {
		t.Fatal(err)
	}
	st.Close()

	start = time.Now()
	if err := RestoreSQLite(ctx, info.Path, dbPath); err != nil {
		t.Fatal(err)
	}
	restoreTook := time.Since(start)
	start = time.Now()
	restored, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	openTook := time.Since(start)
	res, err := restored.List(ctx, store.ListOptions{Prefix: "/registry/configmaps/", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(len(res.Items)) + res.RemainingCount; got != int64(n) || res.Revision != rev {
		t.Fatalf("restored store: %d keys at revision %d, want %d at %d", got, res.Revision, n, rev)
	}
	t.Logf("restore: %v, then open: %v", restoreTook.Round(time.Millisecond), openTook.Round(time.Millisecond))
}
