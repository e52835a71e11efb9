package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"skiff/store/sqlite"
)

// sideFiles are SQLite's companions of a WAL database: they belong to the
// database file they sit beside and move with it.
var sideFiles = []string{"-wal", "-shm"}

// RestoreSQLite makes the snapshot file the single server's database at
// dbPath. It is offline: no server may have dbPath open (the caller holds
// LockDataDir). The old database is kept, moved aside.
func RestoreSQLite(ctx context.Context, file, dbPath string) error {
	_, err := RestoreSQLiteAt(ctx, file, dbPath, time.Now())
	return err
}

// RestoreSQLiteAt is RestoreSQLite at a given time: the old database (with
// its -wal and -shm, which hold its last commits, so that it stays
// openable) goes to <db>.before-restore-<unix seconds>, returned ("" when
// there was none). The snapshot is checked to be a skiff database and
// copied next to dbPath and fsynced before anything is moved; dbPath then
// names the old database or the new one at every moment, never an empty
// or partial file that the next start would take for a store.
func RestoreSQLiteAt(ctx context.Context, file, dbPath string, now time.Time) (aside string, err error) {
	meta, err := sqlite.ReadMeta(ctx, file)
	if err != nil {
		return "", fmt.Errorf("snapshot: restore: %w", err)
	}
	dir := filepath.Dir(dbPath)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("snapshot: restore: %w", err)
	}
	tmp, err := copyTemp(ctx, file, dir, "."+filepath.Base(dbPath)+".restore-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp) // gone once renamed into place
	if got, err := sqlite.ReadMeta(ctx, tmp); err != nil || got.Revision != meta.Revision {
		return "", fmt.Errorf("snapshot: restore: the copy of %s does not read back (revision %d, want %d): %v", file, got.Revision, meta.Revision, err)
	}
	if aside, err = moveAside(dbPath, dbPath+".before-restore-"+strconv.FormatInt(now.Unix(), 10)); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dbPath); err != nil {
		return aside, fmt.Errorf("snapshot: restore: %w", err)
	}
	return aside, syncDir(dir)
}

// moveAside keeps the database at dbPath under the name aside. The main
// file is hard-linked (dbPath stays until the restored file replaces it);
// its side files are renamed, so the restored database never starts with
// the old one's WAL.
func moveAside(dbPath, aside string) (string, error) {
	if _, err := os.Lstat(dbPath); errors.Is(err, fs.ErrNotExist) {
		for _, s := range sideFiles { // leftovers of a database that is gone
			if err := os.Remove(dbPath + s); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("snapshot: restore: %w", err)
			}
		}
		return "", nil
	}
	if err := os.Link(dbPath, aside); err != nil {
		return "", fmt.Errorf("snapshot: restore: keep the old database: %w", err)
	}
	for _, s := range sideFiles {
		if err := os.Rename(dbPath+s, aside+s); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("snapshot: restore: keep the old database: %w", err)
		}
	}
	return aside, syncDir(filepath.Dir(dbPath))
}

// copyTemp copies src to a new hidden file in dir and fsyncs it.
func copyTemp(ctx context.Context, src, dir, pattern string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("snapshot: restore: %w", err)
	}
	defer in.Close()
	out, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("snapshot: restore: %w", err)
	}
	_, err = io.Copy(out, ctxReader{ctx, in})
	if err == nil {
		err = out.Sync()
	}
	if err2 := out.Close(); err == nil {
		err = err2
	}
	if err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("snapshot: restore: copy %s: %w", src, err)
	}
	return out.Name(), nil
}

// ctxReader stops a long copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
