package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"time"

	"skiff/store"
)

// CompactChunk bounds how many revisions one compaction transaction covers,
// so a large compaction is interleaved with writes instead of stalling them.
const CompactChunk = 10000

// Create stores a new key.
func (s *Store) Create(ctx context.Context, key string, value []byte) (store.KeyValue, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, err
	}
	r := s.submit(ctx, Command{Kind: CmdCreate, Key: key, Value: value})
	if r.Err != nil {
		return store.KeyValue{}, r.Err
	}
	return r.KV, nil
}

// Update replaces key's value if its ModRevision is expectedRev (0: any).
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedRev int64) (store.KeyValue, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, err
	}
	r := s.submit(ctx, Command{Kind: CmdUpdate, Key: key, Value: value, Expected: expectedRev})
	return r.KV, r.Err
}

// Delete removes key if its ModRevision is expectedRev (0: any).
func (s *Store) Delete(ctx context.Context, key string, expectedRev int64) (store.KeyValue, int64, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, 0, err
	}
	r := s.submit(ctx, Command{Kind: CmdDelete, Key: key, Expected: expectedRev})
	return DeleteResult(r)
}

// DeleteResult turns a Delete command's Result into Store.Delete's returns:
// the previous value only with success or ErrConflict.
func DeleteResult(r Result) (store.KeyValue, int64, error) {
	if r.Err != nil {
		if errors.Is(r.Err, store.ErrConflict) {
			return r.KV, 0, r.Err
		}
		return store.KeyValue{}, 0, r.Err
	}
	return r.KV, r.Rev, nil
}

// Compact discards history at and below rev, in chunks of CompactChunk
// revisions, each ordered with the writes around it.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	from := s.compact.Load()
	if rev > s.rev.Load() {
		return fmt.Errorf("%w: compact to %d, current revision is %d", store.ErrFutureRevision, rev, s.rev.Load())
	}
	for next := from; next < rev; {
		next = min(next+CompactChunk, rev)
		if r := s.submit(ctx, Command{Kind: CmdCompact, Expected: next}); r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// Get returns the current value of key.
func (s *Store) Get(ctx context.Context, key string) (store.KeyValue, error) {
	if s.isClosed() {
		return store.KeyValue{}, store.ErrClosed
	}
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, err
	}
	var r row
	err := s.rstmt.latest.QueryRowContext(ctx, key).Scan(&r.rev, &r.created, &r.deleted, &r.value)
	if err == nil {
		if werr := s.awaitVisible(ctx, r.rev); werr != nil {
			return store.KeyValue{}, werr
		}
	}
	if errors.Is(err, sql.ErrNoRows) || (err == nil && r.deleted) {
		return store.KeyValue{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	if err != nil {
		return store.KeyValue{}, fmt.Errorf("sqlite: get %q: %w", key, err)
	}
	return store.KeyValue{Key: key, Value: r.value, CreateRevision: r.created, ModRevision: r.rev}, nil
}

// List returns a page of the live keys under a prefix at one revision.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
	if s.isClosed() {
		return store.ListResult{}, store.ErrClosed
	}
	rev, start := opts.Revision, opts.Prefix
	if opts.Continue != "" {
		var err error
		if rev, start, err = store.DecodeContinue(opts.Continue, opts.Prefix); err != nil {
			return store.ListResult{}, err
		}
	}
	if opts.Limit < 0 {
		return store.ListResult{}, fmt.Errorf("sqlite: negative limit %d", opts.Limit)
	}
	end := store.PrefixEnd(opts.Prefix)

	// One read transaction: the revisions and the rows come from the same
	// WAL snapshot, so a compaction committed meanwhile cannot tear the page.
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.ListResult{}, fmt.Errorf("sqlite: list: %w", err)
	}
	defer tx.Rollback()
	rev, err = snapshotRevision(ctx, tx, rev)
	if err != nil {
		return store.ListResult{}, err
	}
	if err := s.awaitVisible(ctx, rev); err != nil {
		return store.ListResult{}, err
	}

	limit := opts.Limit
	if limit == 0 {
		limit = -1 // SQLite: no limit
	} else {
		limit++ // one more tells whether a next page exists
	}
	rows, err := tx.StmtContext(ctx, s.rstmt.list[bound(end)]).QueryContext(ctx, start, rev, end, limit)
	if err != nil {
		return store.ListResult{}, fmt.Errorf("sqlite: list %q: %w", opts.Prefix, err)
	}
	defer rows.Close()
	res := store.ListResult{Revision: rev}
	if opts.Limit > 0 {
		res.Items = make([]store.KeyValue, 0, min(opts.Limit, 1024))
	}
	for rows.Next() {
		var kv store.KeyValue
		if err := rows.Scan(&kv.ModRevision, &kv.Key, &kv.CreateRevision, &kv.Value); err != nil {
			return store.ListResult{}, fmt.Errorf("sqlite: list %q: %w", opts.Prefix, err)
		}
		res.Items = append(res.Items, kv)
	}
	if err := rows.Err(); err != nil {
		return store.ListResult{}, fmt.Errorf("sqlite: list %q: %w", opts.Prefix, err)
	}
	if opts.Limit > 0 && int64(len(res.Items)) > opts.Limit {
		next := res.Items[opts.Limit].Key
		res.Items = res.Items[:opts.Limit]
		res.Continue = store.EncodeContinue(rev, next)
		if err := tx.StmtContext(ctx, s.rstmt.count[bound(end)]).QueryRowContext(ctx, next, rev, end).Scan(&res.RemainingCount); err != nil {
			return store.ListResult{}, fmt.Errorf("sqlite: count %q: %w", opts.Prefix, err)
		}
	}
	return res, nil
}

// snapshotRevision resolves the revision a read runs at (0: current) and
// checks it against the compacted and current revisions seen by tx.
func snapshotRevision(ctx context.Context, tx *sql.Tx, rev int64) (int64, error) {
	var cur, compacted int64
	if err := tx.QueryRowContext(ctx, sqlMeta).Scan(&cur, &compacted); err != nil {
		return 0, fmt.Errorf("sqlite: read revisions: %w", err)
	}
	switch {
	case rev == 0:
		return cur, nil
	case rev < compacted:
		return 0, fmt.Errorf("%w: revision %d, compacted at %d", store.ErrCompacted, rev, compacted)
	case rev > cur:
		return 0, fmt.Errorf("%w: revision %d, current is %d", store.ErrFutureRevision, rev, cur)
	}
	return rev, nil
}

// awaitVisible returns once CurrentRevision has caught up with rev, a
// revision a read saw: Apply's commit is visible to readers a moment before
// it advances s.rev, and no read may be ahead of CurrentRevision. The gap is
// the few instructions between tx.Commit and s.rev.Store, so it spins; the
// bound covers a Restore that moved the revision back meanwhile.
func (s *Store) awaitVisible(ctx context.Context, rev int64) error {
	var deadline time.Time
	for i := 0; s.rev.Load() < rev; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.isClosed() {
			return store.ErrClosed
		}
		if i < 1000 {
			runtime.Gosched()
			continue
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(time.Second)
		} else if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(50 * time.Microsecond)
	}
	return nil
}
