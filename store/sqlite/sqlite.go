// Package sqlite is skiff's default state store: a log-structured table in
// SQLite (mattn/go-sqlite3) with group commit, in-process watch fan-out and
// scheduled compaction. It implements store.Store.
//
// Durability: the database runs in WAL mode with synchronous=FULL, so a write
// is acknowledged only after its WAL frames are fsynced. synchronous=NORMAL
// would survive a crash of the process but could lose the last commits on a
// power cut or kernel panic, and an edge box loses power; group commit
// (many writers' operations in one transaction, one fsync) pays for FULL.
//
// Revisions are assigned in exactly one place, Apply (apply.go), in the
// order commands are applied: the same sequence of commands on the same
// state always yields the same revisions. The single-server committer calls
// it with the writes it gathers; a Raft FSM (store/raft) opens the store as
// a Replica and calls it with the log's entries.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver

	"skiff/store"
)

// Config says where the database lives and how it behaves.
type Config struct {
	// Path of the database file; its directory is created if missing.
	Path string
	// CompactInterval is how often history is compacted; each compaction keeps
	// at least one interval of history. 0 disables automatic compaction.
	CompactInterval time.Duration
	// MaxBatch caps how many operations one commit groups (default 512).
	MaxBatch int
	// WatchBuffer is how many events a watcher may fall behind before it is
	// cut off with store.ErrWatcherTooSlow (default 1024).
	WatchBuffer int
	// Logger receives background errors (default slog.Default()).
	Logger *slog.Logger
	// Replica opens the store for a replicated log: no committer runs, the
	// store's own Create, Update, Delete and Compact fail with ErrReplica,
	// and writes come only through Apply.
	Replica bool
}

// Store is the SQLite backend. It implements store.Store.
type Store struct {
	cfg Config
	log *slog.Logger

	wdb *sql.DB // one connection: the committer's
	rdb *sql.DB // readers: WAL lets them run beside the writer

	ops     chan *op
	closing chan struct{} // closed when Close begins
	stopped chan struct{} // closed when the committer has exited
	cancel  context.CancelFunc
	bg      sync.WaitGroup
	once    sync.Once

	wstmt writeStmts
	rstmt readStmts

	applyMu sync.Mutex    // serialises Apply and Restore
	rev     atomic.Int64  // last committed revision
	compact atomic.Int64  // last compacted revision
	applied atomic.Uint64 // Index of the last batch applied with one
	hub     *hub
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path and starts the
// committer and, if configured, automatic compaction. Close releases it.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlite: Config.Path is empty")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.WatchBuffer <= 0 {
		cfg.WatchBuffer = 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory: %w", err)
	}
	params := "_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_foreign_keys=0"
	wdb, err := sql.Open("sqlite3", "file:"+cfg.Path+"?"+params+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if err := migrate(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: create schema in %s: %w", cfg.Path, err)
	}
	var cur, cmp, applied int64
	if err := wdb.QueryRowContext(ctx, sqlMetaAll).Scan(&cur, &cmp, &applied); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: read revisions: %w", err)
	}
	rdb, err := sql.Open("sqlite3", "file:"+cfg.Path+"?"+params+"&_query_only=1")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open readers on %s: %w", cfg.Path, err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)

	ws, rs, err := prepare(ctx, wdb, rdb)
	if err != nil {
		rdb.Close()
		wdb.Close()
		return nil, err
	}
	bgCtx, cancel := context.WithCancel(context.Background())
	s := &Store{
		wstmt:   ws,
		rstmt:   rs,
		cfg:     cfg,
		log:     cfg.Logger,
		wdb:     wdb,
		rdb:     rdb,
		ops:     make(chan *op, cfg.MaxBatch),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
		cancel:  cancel,
		hub:     newHub(cur),
	}
	s.rev.Store(cur)
	s.compact.Store(cmp)
	s.applied.Store(uint64(applied))
	if cfg.Replica {
		close(s.stopped) // no committer
	} else {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			s.commitLoop(bgCtx)
		}()
	}
	if cfg.CompactInterval > 0 && !cfg.Replica {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			store.AutoCompact(bgCtx, s, cfg.CompactInterval, func(err error) {
				s.log.Error("automatic compaction failed", "err", err)
			})
		}()
	}
	return s, nil
}

// Close stops the committer (queued writes fail with store.ErrClosed), ends
// every watch with store.ErrClosed and closes the database.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closing)
		s.cancel()
		s.bg.Wait()
		s.hub.closeAll(store.ErrClosed)
		err = errors.Join(s.rdb.Close(), s.wdb.Close())
	})
	return err
}

// CurrentRevision is the revision of the last committed write.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	return s.rev.Load(), nil
}

// CompactedRevision is the revision of the last compaction.
func (s *Store) CompactedRevision(ctx context.Context) (int64, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	return s.compact.Load(), nil
}

func (s *Store) isClosed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// Statements are prepared once; database/sql then keeps one prepared copy
// per connection, so the hot paths skip SQLite's parser.
type writeStmts struct {
	latest, insert, setRev *sql.Stmt
}

// readStmts hold each query twice: [0] for a prefix with no upper bound (the
// empty prefix), [1] with one.
type readStmts struct {
	latest               *sql.Stmt
	list, count, history [2]*sql.Stmt
}

func prepare(ctx context.Context, wdb, rdb *sql.DB) (writeStmts, readStmts, error) {
	var ws writeStmts
	var rs readStmts
	var errs []error
	prep := func(db *sql.DB, dst **sql.Stmt, q string) {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			errs = append(errs, fmt.Errorf("sqlite: prepare %q: %w", q, err))
		}
		*dst = st
	}
	prep(wdb, &ws.latest, sqlLatest)
	prep(wdb, &ws.insert, sqlInsert)
	prep(wdb, &ws.setRev, sqlSetRev)
	prep(rdb, &rs.latest, sqlLatest)
	for i, upper := range []string{"", "x"} {
		listUpper, histUpper := "", ""
		if upper != "" {
			listUpper, histUpper = sqlKeyUpper, sqlHistoryUpper
		}
		prep(rdb, &rs.list[i], fmt.Sprintf(sqlListLive, listUpper))
		prep(rdb, &rs.count[i], fmt.Sprintf(sqlCountLive, listUpper))
		prep(rdb, &rs.history[i], fmt.Sprintf(sqlHistory, histUpper))
	}
	return ws, rs, errors.Join(errs...)
}

// bound is the index into readStmts for a prefix's upper bound.
func bound(end string) int {
	if end == "" {
		return 0
	}
	return 1
}

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", store.ErrInvalidKey)
	}
	return nil
}
