// Package kinebench runs kine (github.com/k3s-io/kine, the SQLite layer k3s
// uses in place of etcd) through skiff's store.Store contract, so that the
// shared benchmarks in store/storetest measure kine and skiff's own store with
// the very same operations. It is a separate Go module so that kine's
// dependency tree (etcd, grpc, prometheus, ...) never enters skiff's build.
//
// The adapter calls kine's own server.Backend in process, as built by kine's
// sqlite driver (the same constructor `sqlite://` endpoints reach), with no
// gRPC/etcd layer in between. It is written for a fair, like-for-like
// measurement, not for conformance. Where kine differs from the store
// contract:
//
//   - SQLite settings: kine's defaults (sqlite.DefaultParams):
//     _journal_mode=WAL, _synchronous=NORMAL, _busy_timeout=30000,
//     _txlock=immediate, _stmt_cache_size=20, cache=shared. In WAL mode
//     synchronous=NORMAL does not fsync on commit (only at checkpoints), so a
//     kine write is acknowledged before it is durable against power loss;
//     skiff's store runs synchronous=FULL. Options.Params can override them.
//   - Every write is its own SQLite transaction (no group commit). Create,
//     Update and Delete are one INSERT ... SELECT ... WHERE guarded by the
//     key's latest row id; a failed guard costs an extra read.
//   - Watch: kine has one poll loop per backend that reads new rows
//     (SELECT ... WHERE id > last, batches of 500) when woken. A write made
//     through this process's backend wakes it at once through an in-process
//     channel (sqllog.notifyRevision); otherwise it polls every PollInterval
//     (kine's default 1s). Events are fanned out to every watcher and the
//     prefix filter is applied here in the adapter (kine's gRPC layer does
//     the same). A watcher that falls 100 batches behind is dropped by kine's
//     broadcaster; the adapter reports that as store.ErrWatcherTooSlow.
//   - Update/Delete with expectedRev 0 ("any revision"): kine's backend has no
//     such mode (revision 0 means "only if the key does not exist"), so the
//     adapter reads the key and retries the guarded write on conflict.
//   - Update returns CreateRevision 0 when expectedRev != 0: kine's Update
//     does not return it and the adapter adds no extra read for it.
//   - Delete with expectedRev != 0 returns prev with only Key and ModRevision:
//     kine's Delete does not return the deleted value (the Kubernetes API
//     server reads the object before deleting it). Watch events do carry the
//     previous value (kine stores it in the old_value column).
//   - Compact is kine's own: with automatic compaction off (kine's default
//     compact-interval 0), Backend.Compact compacts synchronously but always
//     keeps the newest CompactMinRetain (1000) revisions, so the compacted
//     revision can be lower than asked. CompactedRevision reads kine's
//     compact_rev_key row.
//   - kine keeps internal rows in the same key space: "compact_rev_key",
//     "/registry/health" (written at start, so revisions start at 3) and
//     "gap-N" fill rows; a List or Watch of prefix "" sees the first two.
//     List of prefix "" at an explicit revision scans keys in
//     ["\x00", "\xff\xff\xff\xff") because kine's "all keys" query has no
//     revision form.
package kinebench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k3s-io/kine/pkg/drivers"
	"github.com/k3s-io/kine/pkg/drivers/generic"
	kinesqlite "github.com/k3s-io/kine/pkg/drivers/sqlite"
	"github.com/k3s-io/kine/pkg/server"

	"skiff/store"
)

// Options configures Open. Zero values take kine's own defaults (those of
// kine's command line, which k3s keeps for SQLite).
type Options struct {
	// Dir holds the database file state.db.
	Dir string
	// Params is the DSN query string; "" is kine's sqlite.DefaultParams.
	Params string
	// PollInterval is how often the watch poll loop reads new rows when it is
	// not woken by a local write; 0 is kine's default, 1s.
	PollInterval time.Duration
}

// DefaultParams is the DSN query kine uses for SQLite when none is given.
var DefaultParams = kinesqlite.DefaultParams

// Store adapts kine's SQLite server.Backend to store.Store.
type Store struct {
	backend server.Backend
	dialect *generic.Generic
	cancel  context.CancelFunc
	wg      *sync.WaitGroup
	closed  atomic.Bool
	once    sync.Once
}

var _ store.Store = (*Store)(nil)

// errNotSupported is returned for what kine cannot express at all.
var errNotSupported = errors.New("kinebench: not supported by this adapter")

// Open starts kine's SQLite backend on dir/state.db with kine's defaults.
func Open(dir string) (*Store, error) { return OpenWith(Options{Dir: dir}) }

// OpenWith starts kine's SQLite backend with opts.
func OpenWith(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("kinebench: Options.Dir is empty")
	}
	params := opts.Params
	if params == "" {
		params = kinesqlite.DefaultParams
	}
	poll := opts.PollInterval
	if poll <= 0 {
		poll = time.Second
	}
	// The values below are the defaults of kine's command line
	// (pkg/app/app.go), which endpoint.Listen passes on to the driver.
	cfg := &drivers.Config{
		// What drivers.New derives from the endpoint "sqlite://<dir>/state.db?<params>".
		DataSourceName: filepath.Join(opts.Dir, "state.db") + "?" + params,
		ConnectionPoolConfig: generic.ConnectionPoolConfig{
			MaxIdle:     20,
			MaxOpen:     0,
			MaxLifetime: 0,
			MaxIdleTime: 2 * time.Minute,
		},
		CompactInterval:       0, // off: compaction is left to the API server (here: Compact)
		CompactIntervalJitter: 0,
		CompactTimeout:        5 * time.Second,
		CompactMinRetain:      1000,
		CompactBatchSize:      1000,
		PollInterval:          poll,
		PollBatchSize:         500,
	}
	ctx, cancel := context.WithCancel(context.Background())
	wg := &sync.WaitGroup{}
	// NewVariant is what kine's "sqlite" driver constructor (sqlite.New)
	// calls; it also hands back the dialect, used for CompactedRevision.
	backend, dialect, err := kinesqlite.NewVariant(ctx, wg, "sqlite3", cfg)
	if err != nil {
		cancel()
		wg.Wait()
		return nil, fmt.Errorf("kinebench: open kine sqlite: %w", err)
	}
	if err := backend.Start(ctx); err != nil {
		cancel()
		wg.Wait()
		return nil, fmt.Errorf("kinebench: start kine backend: %w", err)
	}
	return &Store{backend: backend, dialect: dialect, cancel: cancel, wg: wg}, nil
}

// Close stops kine's goroutines (poll loop, TTL loop, DB closer) and waits
// for those kine tracks in its WaitGroup.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		s.cancel()
		s.wg.Wait()
	})
	return nil
}

// mapErr translates kine's errors into the store sentinels.
func (s *Store) mapErr(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, server.ErrKeyExists):
		return fmt.Errorf("%w: %v", store.ErrExists, err)
	case errors.Is(err, server.ErrCompacted):
		return fmt.Errorf("%w: %v", store.ErrCompacted, err)
	case errors.Is(err, server.ErrFutureRev):
		return fmt.Errorf("%w: %v", store.ErrFutureRevision, err)
	}
	if s.closed.Load() && (errors.Is(err, sql.ErrConnDone) || errors.Is(err, context.Canceled) ||
		strings.Contains(err.Error(), "database is closed")) {
		return fmt.Errorf("%w: %v", store.ErrClosed, err)
	}
	return err
}

func (s *Store) check(key string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if key == "" {
		return store.ErrInvalidKey
	}
	return nil
}

func toKV(kv *server.KeyValue) store.KeyValue {
	return store.KeyValue{Key: kv.Key, Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision}
}

// Get reads the current value (kine Backend.Get at revision 0).
func (s *Store) Get(ctx context.Context, key string) (store.KeyValue, error) {
	if err := s.check(key); err != nil {
		return store.KeyValue{}, err
	}
	_, kv, err := s.backend.Get(ctx, key, 0, false)
	if err != nil {
		return store.KeyValue{}, s.mapErr(err)
	}
	if kv == nil {
		return store.KeyValue{}, store.ErrNotFound
	}
	return toKV(kv), nil
}

// Create is kine Backend.Create with lease 0.
func (s *Store) Create(ctx context.Context, key string, value []byte) (store.KeyValue, error) {
	if err := s.check(key); err != nil {
		return store.KeyValue{}, err
	}
	rev, err := s.backend.Create(ctx, key, value, 0)
	if err != nil {
		return store.KeyValue{}, s.mapErr(err)
	}
	return store.KeyValue{Key: key, Value: value, CreateRevision: rev, ModRevision: rev}, nil
}

// Update is kine Backend.Update guarded by expectedRev (see the package doc
// for expectedRev 0).
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedRev int64) (store.KeyValue, error) {
	if err := s.check(key); err != nil {
		return store.KeyValue{}, err
	}
	if expectedRev != 0 {
		rev, kv, ok, err := s.backend.Update(ctx, key, value, expectedRev, 0)
		if err != nil {
			return store.KeyValue{}, s.mapErr(err)
		}
		if ok {
			return store.KeyValue{Key: key, Value: value, ModRevision: rev}, nil
		}
		if kv == nil {
			return store.KeyValue{}, store.ErrNotFound
		}
		return toKV(kv), store.ErrConflict
	}
	for {
		cur, err := s.Get(ctx, key)
		if err != nil {
			return store.KeyValue{}, err
		}
		rev, kv, ok, err := s.backend.Update(ctx, key, value, cur.ModRevision, 0)
		if err != nil {
			return store.KeyValue{}, s.mapErr(err)
		}
		if ok {
			return store.KeyValue{Key: key, Value: value, CreateRevision: cur.CreateRevision, ModRevision: rev}, nil
		}
		if kv == nil {
			return store.KeyValue{}, store.ErrNotFound
		}
		if err := ctx.Err(); err != nil {
			return store.KeyValue{}, err
		}
	}
}

// Delete is kine Backend.Delete guarded by expectedRev (see the package doc
// for expectedRev 0 and for the prev value).
func (s *Store) Delete(ctx context.Context, key string, expectedRev int64) (store.KeyValue, int64, error) {
	if err := s.check(key); err != nil {
		return store.KeyValue{}, 0, err
	}
	prev := store.KeyValue{Key: key, ModRevision: expectedRev}
	for {
		if expectedRev == 0 {
			cur, err := s.Get(ctx, key)
			if err != nil {
				return store.KeyValue{}, 0, err
			}
			prev = cur
		}
		rev, kv, ok, err := s.backend.Delete(ctx, key, prev.ModRevision)
		if err != nil {
			return store.KeyValue{}, 0, s.mapErr(err)
		}
		switch {
		case kv == nil:
			// kine: the key never existed (ok=true) or is already deleted.
			return store.KeyValue{}, 0, store.ErrNotFound
		case ok:
			return prev, rev, nil
		case expectedRev != 0:
			return toKV(kv), 0, store.ErrConflict
		}
		if err := ctx.Err(); err != nil {
			return store.KeyValue{}, 0, err
		}
	}
}

// List is kine Backend.List over [start, PrefixEnd(prefix)) with limit+1 to
// detect more, and Backend.Count for RemainingCount, as kine's gRPC layer
// does for an etcd range request.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
	if s.closed.Load() {
		return store.ListResult{}, store.ErrClosed
	}
	rev, start := opts.Revision, opts.Prefix
	if opts.Continue != "" {
		var err error
		if rev, start, err = store.DecodeContinue(opts.Continue, opts.Prefix); err != nil {
			return store.ListResult{}, err
		}
	}
	if rev < 0 {
		return store.ListResult{}, fmt.Errorf("%w: negative revision %d", store.ErrFutureRevision, rev)
	}
	end := store.PrefixEnd(opts.Prefix)
	if end == "" && (start != "" || rev != 0) {
		// kine's all-keys query has no revision form: use a range instead.
		if start == "" {
			start = "\x00"
		}
		end = "\xff\xff\xff\xff"
	}
	limit := opts.Limit
	if limit > 0 {
		limit++
	}
	current, kvs, err := s.backend.List(ctx, start, end, limit, rev, false)
	if err != nil {
		return store.ListResult{}, s.mapErr(err)
	}
	readRev := rev
	if readRev == 0 {
		readRev = current
	}
	res := store.ListResult{Revision: readRev}
	if opts.Limit > 0 && int64(len(kvs)) > opts.Limit {
		kvs = kvs[:opts.Limit]
		next := kvs[len(kvs)-1].Key + "\x00"
		res.Continue = store.EncodeContinue(readRev, next)
		_, n, err := s.backend.Count(ctx, next, end, readRev)
		if err != nil {
			return store.ListResult{}, s.mapErr(err)
		}
		res.RemainingCount = n
	}
	res.Items = make([]store.KeyValue, len(kvs))
	for i, kv := range kvs {
		res.Items[i] = toKV(kv)
	}
	return res, nil
}

// CurrentRevision is kine's (cached) current revision.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	rev, err := s.backend.CurrentRevision(ctx)
	return rev, s.mapErr(err)
}

// Compact is kine's Backend.Compact; see the package doc.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if rev <= 0 {
		return fmt.Errorf("%w: compact to revision %d", errNotSupported, rev)
	}
	_, err := s.backend.Compact(ctx, rev)
	return s.mapErr(err)
}

// CompactedRevision reads kine's compact_rev_key row.
func (s *Store) CompactedRevision(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	rev, err := s.dialect.GetCompactRevision(ctx)
	return rev, s.mapErr(err)
}

// Watch is kine Backend.Watch, filtered to prefix and translated to
// store.Event. kine's Watch(rev) delivers revisions >= rev (etcd's
// convention), so afterRev R maps to rev R+1; afterRev 0 maps to kine's 0
// (from the current revision).
func (s *Store) Watch(ctx context.Context, prefix string, afterRev int64) (store.Watcher, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if afterRev < 0 {
		return nil, fmt.Errorf("%w: negative revision %d", store.ErrFutureRevision, afterRev)
	}
	start := int64(0)
	if afterRev > 0 {
		start = afterRev + 1
	}
	wctx, cancel := context.WithCancel(ctx)
	wr := s.backend.Watch(wctx, start)
	if wr.CompactRevision != 0 {
		cancel()
		return nil, fmt.Errorf("%w: watch after %d, compacted at %d", store.ErrCompacted, afterRev, wr.CompactRevision)
	}
	select {
	case err := <-wr.Errorc:
		cancel()
		return nil, s.mapErr(err)
	default:
	}
	w := &watcher{
		s:      s,
		ctx:    wctx,
		cancel: cancel,
		prefix: prefix,
		out:    make(chan store.Event, 128),
		in:     wr,
	}
	go w.run()
	return w, nil
}

type watcher struct {
	s       *Store
	ctx     context.Context
	cancel  context.CancelFunc
	prefix  string
	out     chan store.Event
	in      server.WatchResult
	stopped atomic.Bool
	err     error // set before out is closed
}

func (w *watcher) Events() <-chan store.Event { return w.out }
func (w *watcher) Err() error                 { return w.err }

func (w *watcher) Stop() {
	w.stopped.Store(true)
	w.cancel()
}

func (w *watcher) run() {
	defer close(w.out)
	defer w.cancel()
	for {
		select {
		case err := <-w.in.Errorc:
			if w.ctx.Err() == nil {
				w.err = w.s.mapErr(err)
			}
			return
		case batch, ok := <-w.in.Eventc:
			if !ok {
				// kine closes the channel when our context ends, when the
				// backend stops, or when its broadcaster drops a slow
				// subscriber.
				switch {
				case w.stopped.Load() || w.ctx.Err() != nil:
				case w.s.closed.Load():
					w.err = store.ErrClosed
				default:
					w.err = store.ErrWatcherTooSlow
				}
				return
			}
			for _, e := range batch.Events {
				if e == nil || e.KV == nil || !strings.HasPrefix(e.KV.Key, w.prefix) {
					continue
				}
				select {
				case w.out <- toEvent(e):
				case <-w.ctx.Done():
					return
				}
			}
		}
	}
}

func toEvent(e *server.Event) store.Event {
	ev := store.Event{Type: store.Updated, KV: toKV(e.KV)}
	switch {
	case e.Create:
		ev.Type = store.Created
	case e.Delete:
		ev.Type = store.Deleted
		ev.KV.Value = nil
	}
	if !e.Create && e.PrevKV != nil {
		p := toKV(e.PrevKV)
		ev.Prev = &p
	}
	return ev
}
