package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"skiff/store"
)

// This file is the seam between the SQLite layout and whatever orders the
// writes. A Command is a write with its guard and nothing else (no caller,
// no context, no reply), so it can be serialised into a Raft log entry;
// Apply applies a batch of them in one transaction and is the one place
// revisions are assigned. The single-server committer (commit.go) and the
// Raft FSM (store/raft) both call Apply, so the same commands on the same
// state give the same revisions on every server.

// CommandKind says what a Command does.
type CommandKind uint8

const (
	// CmdCreate stores a new key; fails with store.ErrExists.
	CmdCreate CommandKind = iota + 1
	// CmdUpdate replaces a key's value if its ModRevision is Expected (0: any).
	CmdUpdate
	// CmdDelete removes a key if its ModRevision is Expected (0: any).
	CmdDelete
	// CmdCompact discards history at and below Expected.
	CmdCompact
)

// Command is one write. Its JSON form is what store/raft puts in its log.
type Command struct {
	Kind  CommandKind `json:"k"`
	Key   string      `json:"key,omitempty"`
	Value []byte      `json:"v,omitempty"`
	// Expected is the guard of Update and Delete (0 accepts any revision)
	// and the target revision of Compact.
	Expected int64 `json:"e,omitempty"`
}

// Result is what one Command did.
type Result struct {
	// KV is the key after the write (Create, Update), the value it had
	// (Delete), or its current state when an Update or Delete failed with
	// store.ErrConflict (and a Create with store.ErrExists).
	KV store.KeyValue
	// Rev is the revision the write took; for Compact the compacted revision.
	Rev int64
	// Err is a failed guard (wrapping store.ErrExists, ErrNotFound,
	// ErrConflict, ErrFutureRevision): the command took no revision.
	Err error
}

// Batch is a group of commands applied in one transaction.
type Batch struct {
	// Index, when not 0, is the position of the batch in a replicated log
	// (the Raft index). It is recorded in the same transaction as the
	// writes, and a batch whose Index is at or below the recorded one is
	// not applied again: a log replayed after a restart or over a snapshot
	// that already holds some of it applies each entry exactly once.
	Index    uint64
	Commands []Command
}

// ErrReplica is returned by the Store's own write methods when it was
// opened with Config.Replica: its writes come only through Apply.
var ErrReplica = errors.New("sqlite: replica store: writes go through Apply")

// Apply applies b in one transaction, publishes its events to watchers and
// returns one Result per command. The error return is for database
// failures only (nothing of the batch is applied then); failed guards are in
// the results. A batch whose Index was already applied returns
// (nil, nil) and changes nothing. Apply calls are serialised.
func (s *Store) Apply(ctx context.Context, b Batch) ([]Result, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if b.Index != 0 && b.Index <= s.applied.Load() {
		return nil, nil
	}
	results := make([]Result, len(b.Commands))
	rev, compact := s.rev.Load(), s.compact.Load()
	var events []store.Event
	err := func() error {
		tx, err := s.wdb.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sqlite: begin: %w", err)
		}
		defer tx.Rollback()
		a := applier{ctx: ctx, tx: tx, rev: rev, compact: compact,
			latestStmt: tx.StmtContext(ctx, s.wstmt.latest), insertStmt: tx.StmtContext(ctx, s.wstmt.insert)}
		for i, c := range b.Commands {
			r, ev, err := a.apply(c)
			if err != nil {
				return err // a database failure, not a guard: abandon the batch
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
		if b.Index != 0 {
			if _, err := tx.ExecContext(ctx, sqlSetApplied, int64(b.Index)); err != nil {
				return fmt.Errorf("sqlite: record applied index: %w", err)
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
		return nil, err
	}
	// Revision and compaction first, then events: a reader that sees the
	// new revision may wait on a watch for it, never the other way round.
	s.rev.Store(rev)
	s.compact.Store(compact)
	if b.Index != 0 {
		s.applied.Store(b.Index)
	}
	s.hub.publish(events, rev)
	return results, nil
}

// AppliedIndex is the Index of the last batch applied with one (0: none).
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// applier applies commands inside one write transaction. Each successful
// write takes rev+1; a write whose guard fails takes none.
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

// apply runs one command. A guard failure is returned in the result; the
// error return is only for database failures.
func (a *applier) apply(c Command) (Result, *store.Event, error) {
	switch c.Kind {
	case CmdCompact:
		return a.compactTo(c.Expected)
	case CmdCreate, CmdUpdate, CmdDelete:
	default:
		return Result{Err: fmt.Errorf("%w: unknown command kind %d", store.ErrInvalidKey, c.Kind)}, nil, nil
	}
	if c.Key == "" {
		return Result{Err: fmt.Errorf("%w: empty key", store.ErrInvalidKey)}, nil, nil
	}
	cur, found, err := a.latest(c.Key)
	if err != nil {
		return Result{}, nil, err
	}
	live := found && !cur.deleted
	var prev *store.KeyValue
	if live {
		prev = &store.KeyValue{Key: c.Key, Value: cur.value, CreateRevision: cur.created, ModRevision: cur.rev}
	}
	switch c.Kind {
	case CmdCreate:
		if live {
			return Result{Err: fmt.Errorf("%w: %s", store.ErrExists, c.Key), KV: *prev}, nil, nil
		}
	default:
		if !live {
			return Result{Err: fmt.Errorf("%w: %s", store.ErrNotFound, c.Key)}, nil, nil
		}
		if c.Expected != 0 && c.Expected != cur.rev {
			return Result{Err: fmt.Errorf("%w: %s is at revision %d, not %d", store.ErrConflict, c.Key, cur.rev, c.Expected), KV: *prev}, nil, nil
		}
	}

	rev := a.rev + 1
	created, deleted, value := rev, 0, c.Value
	if live {
		created = cur.created
	}
	if c.Kind == CmdDelete {
		deleted, value = 1, nil
	}
	if _, err := a.insertStmt.ExecContext(a.ctx, rev, c.Key, created, cur.rev, deleted, value); err != nil {
		return Result{}, nil, fmt.Errorf("sqlite: write %q: %w", c.Key, err)
	}
	a.rev = rev

	kv := store.KeyValue{Key: c.Key, Value: value, CreateRevision: created, ModRevision: rev}
	ev := &store.Event{KV: kv, Prev: prev}
	switch c.Kind {
	case CmdCreate:
		ev.Type = store.Created
		return Result{KV: kv, Rev: rev}, ev, nil
	case CmdUpdate:
		ev.Type = store.Updated
		return Result{KV: kv, Rev: rev}, ev, nil
	default:
		ev.Type = store.Deleted
		return Result{KV: *prev, Rev: rev}, ev, nil
	}
}

// compactTo discards history up to target. It is a command in a batch so
// that it is ordered with writes (a Raft log replays it in the same place
// on every server).
func (a *applier) compactTo(target int64) (Result, *store.Event, error) {
	if target > a.rev {
		return Result{Err: fmt.Errorf("%w: compact to %d, current revision is %d", store.ErrFutureRevision, target, a.rev)}, nil, nil
	}
	if target <= a.compact {
		return Result{Rev: a.compact}, nil, nil
	}
	for _, q := range []string{sqlCompactPrev, sqlCompactTombstones} {
		if _, err := a.tx.ExecContext(a.ctx, q, a.compact, target); err != nil {
			return Result{}, nil, fmt.Errorf("sqlite: compact to %d: %w", target, err)
		}
	}
	if _, err := a.tx.ExecContext(a.ctx, sqlSetCompact, target); err != nil {
		return Result{}, nil, fmt.Errorf("sqlite: record compaction: %w", err)
	}
	a.compact = target
	return Result{Rev: target}, nil, nil
}
