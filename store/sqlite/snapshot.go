package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"skiff/store"
)

// Snapshots are whole copies of the database file: Backup writes one with
// VACUUM INTO (a consistent, compact copy read in one transaction, while
// writes go on), Restore loads one into the live database in one write
// transaction, so readers see the old state or the new one, never a mix.
// `skiff snapshot` and the Raft FSM's snapshots both use them.

// Backup writes a consistent copy of the database to path, which must not
// exist. The copy is an ordinary database that Open and Restore accept.
func (s *Store) Backup(ctx context.Context, path string) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	// Its own connection: the readers are query-only and the writer's one
	// connection must keep committing meanwhile.
	db, err := sql.Open("sqlite3", "file:"+s.cfg.Path+"?_busy_timeout=10000")
	if err != nil {
		return fmt.Errorf("sqlite: backup: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		os.Remove(path)
		return fmt.Errorf("sqlite: backup to %s: %w", path, err)
	}
	return nil
}

// BackupFile writes a consistent copy of the database file dbPath to dst
// (which must not exist) without opening a Store: `skiff snapshot save`
// runs it in its own process beside a running server, which WAL allows
// (a reader in another process sees the last committed state). The
// database is opened read-only and must be a skiff database.
func BackupFile(ctx context.Context, dbPath, dst string) error {
	if _, err := ReadMeta(ctx, dbPath); err != nil {
		return err
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("sqlite: backup to %s: %w", dst, os.ErrExist) // not removed below: it is not ours
	}
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return fmt.Errorf("sqlite: backup: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		os.Remove(dst)
		return fmt.Errorf("sqlite: backup %s to %s: %w", dbPath, dst, err)
	}
	return nil
}

// Meta is what a database file records about itself.
type Meta struct {
	Revision, Compacted int64
	AppliedIndex        uint64
}

// ReadMeta reads the revisions a database file (a Backup) holds.
func ReadMeta(ctx context.Context, path string) (Meta, error) {
	if _, err := os.Stat(path); err != nil {
		return Meta{}, fmt.Errorf("sqlite: %w", err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_query_only=1")
	if err != nil {
		return Meta{}, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	defer db.Close()
	var m Meta
	var applied int64
	if err := db.QueryRowContext(ctx, sqlMetaAll).Scan(&m.Revision, &m.Compacted, &applied); err != nil {
		// A backup from before applied_index existed.
		if err2 := db.QueryRowContext(ctx, sqlMeta).Scan(&m.Revision, &m.Compacted); err2 != nil {
			return Meta{}, fmt.Errorf("sqlite: %s is not a skiff database: %w", path, err)
		}
	}
	m.AppliedIndex = uint64(applied)
	return m, nil
}

// ErrRestoreWatch ends the watches a Restore cuts: the history between
// their revision and the restored one is not in the store. It wraps
// store.ErrCompacted, so watchers re-list as after a compaction.
var ErrRestoreWatch = fmt.Errorf("%w: the store was restored from a snapshot", store.ErrCompacted)

// Restore replaces the whole content of the store by the database at path
// (a Backup), in one transaction, and cuts every watch with ErrRestoreWatch.
// The store's revision, compaction and applied index become the backup's.
func (s *Store) Restore(ctx context.Context, path string) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	m, err := ReadMeta(ctx, path)
	if err != nil {
		return err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	// The writer has one connection, so ATTACH, the transaction and
	// DETACH all run on it; a committer batch waits for the lock.
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: restore: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `ATTACH DATABASE ? AS snap`, "file:"+path+"?mode=ro"); err != nil {
		return fmt.Errorf("sqlite: restore: attach %s: %w", path, err)
	}
	defer conn.ExecContext(context.Background(), `DETACH DATABASE snap`)
	err = func() error {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, q := range []string{
			`DELETE FROM main.kv`,
			`INSERT INTO main.kv (rev, key, created, prev_rev, deleted, value) SELECT rev, key, created, prev_rev, deleted, value FROM snap.kv`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE main.meta SET current_rev = ?, compact_rev = ?, applied_index = ? WHERE id = 1`,
			m.Revision, m.Compacted, int64(m.AppliedIndex)); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = store.ErrClosed
		}
		return fmt.Errorf("sqlite: restore from %s: %w", path, err)
	}
	s.rev.Store(m.Revision)
	s.compact.Store(m.Compacted)
	s.applied.Store(m.AppliedIndex)
	s.hub.reset(m.Revision, ErrRestoreWatch)
	return nil
}

// ResetAppliedIndex records applied index 0 in the database file at path,
// which no Store may have open. A Raft log that starts afresh at index 1
// (a cluster bootstrapped from a snapshot, or from a single server's
// database) then applies to it instead of being skipped as already applied.
func ResetAppliedIndex(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	defer db.Close()
	if err := migrate(ctx, db); err != nil {
		return fmt.Errorf("sqlite: %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, sqlSetApplied, 0); err != nil {
		return fmt.Errorf("sqlite: reset applied index of %s: %w", path, err)
	}
	return db.Close()
}
