package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"skiff/store"
)

type opKind int

const (
	opCreate opKind = iota + 1
	opUpdate
	opDelete
	opCompact
)

// op is one write waiting for the committer.
type op struct {
	ctx      context.Context
	kind     opKind
	key      string
	value    []byte
	expected int64 // Update/Delete: expected ModRevision (0 = any); Compact: target revision
	done     chan result
}

type result struct {
	kv  store.KeyValue // the key after the write (Create/Update), or before it (Delete)
	rev int64          // revision assigned to the write
	err error
}

// submit queues o for the committer and waits for its result. If ctx ends
// first the caller gets ctx.Err(), but an operation already taken into a
// batch may still be applied — as with etcd, a timeout is not a rollback.
func (s *Store) submit(ctx context.Context, o *op) result {
	o.ctx = ctx
	o.done = make(chan result, 1)
	select {
	case <-s.closing:
		return result{err: store.ErrClosed}
	case <-ctx.Done():
		return result{err: ctx.Err()}
	case s.ops <- o:
	}
	select {
	case r := <-o.done:
		return r
	case <-ctx.Done():
		return result{err: ctx.Err()}
	case <-s.stopped:
		select {
		case r := <-o.done:
			return r
		default:
			return result{err: store.ErrClosed}
		}
	}
}

// commitLoop is the single writer: it takes whatever operations are queued
// (up to MaxBatch), applies them in one transaction, commits (one fsync for
// all of them), publishes their events and only then answers the callers.
// While it commits, the next batch gathers in the queue: that is the group
// commit that makes throughput grow with the number of writers.
func (s *Store) commitLoop(ctx context.Context) {
	defer close(s.stopped)
	batch := make([]*op, 0, s.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			s.failQueued()
			return
		case o := <-s.ops:
			batch = append(batch, o)
		}
	gather:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break gather
			}
		}
		s.commit(ctx, batch)
	}
}

func (s *Store) failQueued() {
	for {
		select {
		case o := <-s.ops:
			o.done <- result{err: store.ErrClosed}
		default:
			return
		}
	}
}

// commit applies one batch. A failed commit fails every operation in it and
// leaves the in-memory revision untouched, so nothing is acknowledged or
// published that is not on disk.
func (s *Store) commit(ctx context.Context, batch []*op) {
	results := make([]result, len(batch))
	rev := s.rev.Load()
	compact := s.compact.Load()
	var events []store.Event
	err := func() error {
		tx, err := s.wdb.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sqlite: begin: %w", err)
		}
		defer tx.Rollback()
		a := applier{ctx: ctx, tx: tx, rev: rev, compact: compact,
			latestStmt: tx.StmtContext(ctx, s.wstmt.latest), insertStmt: tx.StmtContext(ctx, s.wstmt.insert)}
		for i, o := range batch {
			if err := o.ctx.Err(); err != nil {
				results[i] = result{err: err}
				continue
			}
			r, ev, err := a.apply(o)
			if err != nil {
				return err // a database failure, not a precondition: abandon the batch
			}
			results[i] = r
			if ev != nil {
				events = append(events, *ev)
			}
		}
		if a.rev != rev {
			if _, err := tx.StmtContext(ctx, s.wstmt.setRev).ExecContext(ctx, a.rev); err != nil {
				return fmt.Errorf("sqlite: record revision: %w", err)
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlite: commit: %w", err)
		}
		rev, compact = a.rev, a.compact
		return nil
	}()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = store.ErrClosed
		}
		s.log.Error("commit failed", "ops", len(batch), "err", err)
		for _, o := range batch {
			o.done <- result{err: err}
		}
		return
	}
	s.rev.Store(rev)
	s.compact.Store(compact)
	s.hub.publish(events, rev)
	for i, o := range batch {
		o.done <- results[i]
	}
}

// applier applies operations inside one write transaction. It is the one
// place revisions are assigned: each successful write takes rev+1; a write
// whose precondition fails takes none.
type applier struct {
	ctx        context.Context
	tx         *sql.Tx
	latestStmt *sql.Stmt
	insertStmt *sql.Stmt
	rev        int64
	compact    int64
}

type row struct {
	rev, created int64
	deleted      bool
	value        []byte
}

func (a *applier) latest(key string) (row, bool, error) {
	var r row
	err := a.latestStmt.QueryRowContext(a.ctx, key).Scan(&r.rev, &r.created, &r.deleted, &r.value)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, false, nil
	}
	if err != nil {
		return row{}, false, fmt.Errorf("sqlite: read %q: %w", key, err)
	}
	return r, true, nil
}

// apply runs one operation. A precondition failure is returned in the
// result; the error return is only for database failures.
func (a *applier) apply(o *op) (result, *store.Event, error) {
	if o.kind == opCompact {
		return a.compactTo(o.expected)
	}
	cur, found, err := a.latest(o.key)
	if err != nil {
		return result{}, nil, err
	}
	live := found && !cur.deleted
	var prev *store.KeyValue
	if live {
		prev = &store.KeyValue{Key: o.key, Value: cur.value, CreateRevision: cur.created, ModRevision: cur.rev}
	}
	switch o.kind {
	case opCreate:
		if live {
			return result{err: fmt.Errorf("%w: %s", store.ErrExists, o.key), kv: *prev}, nil, nil
		}
	case opUpdate, opDelete:
		if !live {
			return result{err: fmt.Errorf("%w: %s", store.ErrNotFound, o.key)}, nil, nil
		}
		if o.expected != 0 && o.expected != cur.rev {
			return result{err: fmt.Errorf("%w: %s is at revision %d, not %d", store.ErrConflict, o.key, cur.rev, o.expected), kv: *prev}, nil, nil
		}
	}

	rev := a.rev + 1
	created, deleted, value := rev, 0, o.value
	if live {
		created = cur.created
	}
	if o.kind == opDelete {
		deleted, value = 1, nil
	}
	if _, err := a.insertStmt.ExecContext(a.ctx, rev, o.key, created, cur.rev, deleted, value); err != nil {
		return result{}, nil, fmt.Errorf("sqlite: write %q: %w", o.key, err)
	}
	a.rev = rev

	kv := store.KeyValue{Key: o.key, Value: value, CreateRevision: created, ModRevision: rev}
	ev := &store.Event{KV: kv, Prev: prev}
	switch o.kind {
	case opCreate:
		ev.Type = store.Created
		return result{kv: kv, rev: rev}, ev, nil
	case opUpdate:
		ev.Type = store.Updated
		return result{kv: kv, rev: rev}, ev, nil
	default:
		ev.Type = store.Deleted
		return result{kv: *prev, rev: rev}, ev, nil
	}
}

// compactTo discards history up to target. It runs as one operation in a
// batch so that it is ordered with writes (a Raft log will replay it in the
// same place on every server).
func (a *applier) compactTo(target int64) (result, *store.Event, error) {
	if target > a.rev {
		return result{err: fmt.Errorf("%w: compact to %d, current revision is %d", store.ErrFutureRevision, target, a.rev)}, nil, nil
	}
	if target <= a.compact {
		return result{rev: a.compact}, nil, nil
	}
	for _, q := range []string{sqlCompactPrev, sqlCompactTombstones} {
		if _, err := a.tx.ExecContext(a.ctx, q, a.compact, target); err != nil {
			return result{}, nil, fmt.Errorf("sqlite: compact to %d: %w", target, err)
		}
	}
	if _, err := a.tx.ExecContext(a.ctx, sqlSetCompact, target); err != nil {
		return result{}, nil, fmt.Errorf("sqlite: record compaction: %w", err)
	}
	a.compact = target
	return result{rev: target}, nil, nil
}
