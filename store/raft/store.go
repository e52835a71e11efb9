package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"skiff/store"
	"skiff/store/sqlite"
)

// Store is one member of a replicated store. It implements store.Store.
type Store struct {
	cfg     Config
	log     *slog.Logger
	replica *sqlite.Store
	fsm     *fsm
	raft    *hraft.Raft
	stream  *streamLayer
	rpc     *rpcClient
	logs    *raftboltdb.BoltStore

	writes chan *writeOp
	reads  chan *readOp
	notify chan bool // raft's leadership changes

	// barrierTerm is the term in which this member, as leader, committed a
	// barrier: from then on its commit index covers every entry an earlier
	// leader committed, and reads may rely on it.
	barrierTerm atomic.Uint64

	bg      context.Context // ends when Close begins
	cancel  context.CancelFunc
	closing chan struct{}
	wg      sync.WaitGroup
	trackMu sync.Mutex
	stopped bool // no more goroutines join wg or futures
	// futures counts the goroutines waiting on raft futures. Raft does not
	// answer every future when it shuts down mid-operation (hashicorp/raft
	// #498: an Apply racing a stop can wait forever), so Close waits for
	// them only for futureGrace.
	futures  sync.WaitGroup
	once     sync.Once
	closeErr error
}

var _ store.Store = (*Store)(nil)

const (
	raftDBFile  = "raft.db"
	stateDBFile = "state.db"
	// convertingFile marks a bootstrap that turns an existing state.db into
	// the cluster's first snapshot; if it is found, that bootstrap was
	// interrupted and is done again from scratch.
	convertingFile = "bootstrap-converting"
)

// storage is raft's persistent state.
type storage struct {
	logs  *raftboltdb.BoltStore
	snaps *hraft.FileSnapshotStore
}

func openStorage(cfg Config) (*storage, error) {
	logs, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.Dir, raftDBFile),
		BoltOptions: &bbolt.Options{Timeout: 5 * time.Second}, // another process holds it: fail, do not hang
	})
	if err != nil {
		return nil, fmt.Errorf("raft: open %s: %w", raftDBFile, err)
	}
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, newHCLog(cfg.Logger, "raft-snapshots"))
	if err != nil {
		logs.Close()
		return nil, fmt.Errorf("raft: snapshot store: %w", err)
	}
	return &storage{logs: logs, snaps: snaps}, nil
}

func (st *storage) hasState() (bool, error) {
	ok, err := hraft.HasExistingState(st.logs, st.logs, st.snaps)
	if err != nil {
		return false, fmt.Errorf("raft: read raft state: %w", err)
	}
	return ok, nil
}

// Open starts this member: it opens the replica and raft's state, listens
// on cfg.BindAddr and joins whatever cluster its state names (or
// bootstraps one, see Config.Bootstrap). It does not wait for a leader.
func Open(ctx context.Context, cfg Config) (_ *Store, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("raft: create %s: %w", cfg.Dir, err)
	}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	st, bootstrap, err := prepareStorage(ctx, cfg)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { st.logs.Close() })
	hasState, err := st.hasState()
	if err != nil {
		return nil, err
	}
	statePath := filepath.Join(cfg.Dir, stateDBFile)
	if err := prepareReplica(ctx, cfg, statePath, hasState, bootstrap); err != nil {
		return nil, err
	}
	replica, err := sqlite.Open(ctx, sqlite.Config{Path: statePath, Replica: true, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("raft: open replica: %w", err)
	}
	undo = append(undo, func() { replica.Close() })

	bg, cancel := context.WithCancel(context.Background())
	undo = append(undo, cancel)
	s := &Store{
		cfg:     cfg,
		log:     cfg.Logger,
		replica: replica,
		logs:    st.logs,
		writes:  make(chan *writeOp, maxBatch),
		reads:   make(chan *readOp, maxBatch),
		notify:  make(chan bool, 16),
		bg:      bg,
		cancel:  cancel,
		closing: make(chan struct{}),
	}
	s.fsm = &fsm{replica: replica, dir: cfg.Dir, log: cfg.Logger, ctx: bg, applied: newNotifier()}

	s.stream, err = newStreamLayer(cfg.BindAddr, cfg.AdvertiseAddr, cfg.ServerTLS, cfg.ClientTLS, s.serveRPC)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { s.stream.Close() })
	s.rpc = newRPCClient(s.stream)
	tcfg := &hraft.NetworkTransportConfig{
		Stream:  s.stream,
		MaxPool: 4,
		Timeout: 10 * time.Second,
		Logger:  newHCLog(cfg.Logger, "raft-net"),
	}
	if cfg.AddressOf != nil {
		tcfg.ServerAddressProvider = addressProvider(cfg.AddressOf)
	}
	trans := hraft.NewNetworkTransportWithConfig(tcfg)
	undo = append(undo, func() { trans.Close() })

	rc := s.raftConfig()
	if !hasState && bootstrap {
		if err := s.bootstrap(ctx, rc, st, trans); err != nil {
			return nil, err
		}
	}
	restore, err := needRestore(replica, st)
	if err != nil {
		return nil, err
	}
	rc.NoSnapshotRestoreOnStart = !restore
	cache, err := hraft.NewLogCache(512, st.logs)
	if err != nil {
		return nil, fmt.Errorf("raft: log cache: %w", err)
	}
	s.raft, err = hraft.NewRaft(rc, s.fsm, cache, st.logs, st.snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("raft: start: %w", err)
	}
	s.start()
	return s, nil
}

// prepareStorage opens raft's state, first discarding what an interrupted
// conversion left (it ran before raft ever started, so no other member
// has seen it). It reports whether to bootstrap.
func prepareStorage(ctx context.Context, cfg Config) (*storage, bool, error) {
	marker := filepath.Join(cfg.Dir, convertingFile)
	bootstrap := cfg.Bootstrap
	if _, err := os.Stat(marker); err == nil {
		cfg.Logger.Warn("raft: redoing an interrupted bootstrap from the existing state.db", "dir", cfg.Dir)
		for _, p := range []string{raftDBFile, "snapshots"} {
			if err := os.RemoveAll(filepath.Join(cfg.Dir, p)); err != nil {
				return nil, false, fmt.Errorf("raft: %w", err)
			}
		}
		bootstrap = true
	}
	st, err := openStorage(cfg)
	return st, bootstrap, err
}

// prepareReplica makes state.db fit a member without raft state: a joiner
// must start empty (its state comes from the cluster; an old state.db is
// moved aside, not deleted), and a bootstrapping member's data must not
// claim log indexes the new log has not got.
func prepareReplica(ctx context.Context, cfg Config, path string, hasState, bootstrap bool) error {
	if hasState {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	m, err := sqlite.ReadMeta(ctx, path)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	switch {
	case !bootstrap && (m.Revision > 1 || m.AppliedIndex > 0):
		aside := fmt.Sprintf("%s.before-join-%d", path, time.Now().Unix())
		cfg.Logger.Warn("raft: joining a cluster: moving the existing state.db aside", "path", aside, "revision", m.Revision)
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("raft: %w", err)
			}
		}
	case bootstrap && m.AppliedIndex > 0:
		if err := sqlite.ResetAppliedIndex(ctx, path); err != nil {
			return fmt.Errorf("raft: %w", err)
		}
	}
	return nil
}

func (s *Store) raftConfig() *hraft.Config {
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(s.cfg.ID)
	rc.HeartbeatTimeout = s.cfg.HeartbeatTimeout
	rc.ElectionTimeout = s.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = s.cfg.LeaderLeaseTimeout
	rc.CommitTimeout = commitTimeout
	rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	rc.TrailingLogs = s.cfg.TrailingLogs
	rc.SnapshotInterval = s.cfg.SnapshotInterval
	rc.NotifyCh = s.notify
	rc.Logger = newHCLog(s.cfg.Logger, "raft")
	return rc
}

// bootstrap writes the first configuration: this member alone. A replica
// that already holds data becomes the cluster's first snapshot (at index
// 1, the configuration's), with an empty log: a member that joins later
// then needs entries the log does not have and is sent the snapshot,
// instead of replaying a log that never contained that data.
func (s *Store) bootstrap(ctx context.Context, rc *hraft.Config, st *storage, trans hraft.Transport) error {
	conf := hraft.Configuration{Servers: []hraft.Server{{
		Suffrage: hraft.Voter, ID: hraft.ServerID(s.cfg.ID), Address: trans.LocalAddr(),
	}}}
	if s.replica.AppliedIndex() == 0 && mustRev(s.replica) <= 1 {
		if err := hraft.BootstrapCluster(rc, st.logs, st.logs, st.snaps, trans, conf); err != nil {
			return fmt.Errorf("raft: bootstrap: %w", err)
		}
		return nil
	}
	marker := filepath.Join(s.cfg.Dir, convertingFile)
	if err := writeMarker(marker); err != nil {
		return err
	}
	s.log.Info("raft: bootstrapping a cluster from the existing state.db", "revision", mustRev(s.replica))
	// The replica holds index 1: the snapshot made of it is at index 1.
	if _, err := s.replica.Apply(ctx, sqlite.Batch{Index: 1}); err != nil {
		return fmt.Errorf("raft: bootstrap: %w", err)
	}
	if err := hraft.BootstrapCluster(rc, st.logs, st.logs, st.snaps, trans, conf); err != nil {
		return fmt.Errorf("raft: bootstrap: %w", err)
	}
	if err := hraft.RecoverCluster(rc, s.fsm, st.logs, st.logs, st.snaps, trans, conf); err != nil {
		return fmt.Errorf("raft: bootstrap: snapshot the existing state: %w", err)
	}
	if err := os.Remove(marker); err != nil {
		return fmt.Errorf("raft: bootstrap: %w", err)
	}
	return syncDir(s.cfg.Dir)
}

func mustRev(r *sqlite.Store) int64 {
	rev, _ := r.CurrentRevision(context.Background())
	return rev
}

func writeMarker(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("raft: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("raft: sync %s: %w", dir, err)
	}
	return nil
}

// needRestore says whether raft must load the newest snapshot into the
// replica on start: only when the replica is behind it. The replica records
// the last index it applied, but raft's snapshot index may be a later
// entry that changed nothing (a configuration, a barrier); the entries
// between are looked at in the log, and if they are all such, the
// replica is up to date.
func needRestore(replica *sqlite.Store, st *storage) (bool, error) {
	list, err := st.snaps.List()
	if err != nil {
		return false, fmt.Errorf("raft: list snapshots: %w", err)
	}
	if len(list) == 0 {
		return false, nil
	}
	snap, applied := list[0].Index, replica.AppliedIndex()
	if applied >= snap {
		return false, nil
	}
	if snap-applied > 4096 {
		return true, nil
	}
	for i := applied + 1; i <= snap; i++ {
		var l hraft.Log
		if err := st.logs.GetLog(i, &l); err != nil || l.Type == hraft.LogCommand {
			return true, nil
		}
	}
	return false, nil
}

func (s *Store) start() {
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.writeLoop() }()
	go func() { defer s.wg.Done(); s.readLoop() }()
	go func() { defer s.wg.Done(); s.leaderLoop() }()
	if s.cfg.CompactInterval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			store.AutoCompact(s.bg, leaderCompacter{s}, s.cfg.CompactInterval, func(err error) {
				s.log.Error("raft: automatic compaction failed", "err", err)
			})
		}()
	}
}

// Close stops this member: pending calls fail with store.ErrClosed, raft
// shuts down (the cluster sees the member as down), the replica closes.
func (s *Store) Close() error {
	s.once.Do(func() {
		close(s.closing)
		s.cancel()
		errRaft := s.raft.Shutdown().Error()
		s.stream.Close()
		s.rpc.close()
		s.trackMu.Lock()
		s.stopped = true
		s.trackMu.Unlock()
		s.wg.Wait()
		s.awaitFutures(futureGrace)
		s.closeErr = errors.Join(errRaft, s.logs.Close(), s.replica.Close())
	})
	return s.closeErr
}

func (s *Store) isClosed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// leaderLoop consumes raft's leadership notifications (raft blocks until
// they are read). On becoming leader it commits a barrier at once, so the
// first read of the term need not wait for one; every few seconds it
// checks that the configuration records this member's current address.
func (s *Store) leaderLoop() {
	kick := make(chan struct{}, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.closing:
				return
			case <-kick:
				ctx, cancel := context.WithTimeout(s.bg, s.cfg.ApplyTimeout)
				s.ensureTermBarrier(ctx)
				cancel()
			case <-t.C:
				s.fixOwnAddress()
			}
		}
	}()
	for {
		select {
		case <-s.closing:
			return
		case leader := <-s.notify:
			if leader {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}
	}
}

// leaderCompacter lets store.AutoCompact run on every member while only
// the leader compacts: the revision it remembers from its previous tick is
// the same on every member.
type leaderCompacter struct{ s *Store }

func (c leaderCompacter) CurrentRevision(ctx context.Context) (int64, error) {
	return c.s.replica.CurrentRevision(ctx)
}

func (c leaderCompacter) Compact(ctx context.Context, rev int64) error {
	if c.s.raft.State() != hraft.Leader {
		return nil
	}
	return c.s.Compact(ctx, rev)
}

// Backup writes a consistent copy of the local replica to path (which must
// not exist): a sqlite database that RestoreSnapshot accepts.
func (s *Store) Backup(ctx context.Context, path string) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	return s.replica.Backup(ctx, path)
}

// unavailable turns a failure to reach a leader or quorum into the error a
// caller gets: its own context's error if that ended, store.ErrClosed if
// the store closed, otherwise one wrapping store.ErrUnavailable.
func (s *Store) unavailable(parent context.Context, err error) error {
	if err != nil && parent.Err() != nil && !s.isClosed() {
		return parent.Err()
	}
	return s.asUnavailable(err)
}

// asUnavailable is unavailable for a failure under the store's own
// deadline.
func (s *Store) asUnavailable(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrClosed) || s.isClosed():
		return store.ErrClosed
	case errors.Is(err, store.ErrUnavailable):
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// raftErr maps raft's errors: those meaning "not sent to the log" to
// errNotLeader (the caller may retry with the new leader), shutdown to
// store.ErrClosed, the rest (the outcome is unknown) to ErrUnavailable.
func raftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, hraft.ErrNotLeader), errors.Is(err, hraft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %w", errNotLeader, err)
	case errors.Is(err, hraft.ErrRaftShutdown):
		return store.ErrClosed
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// waitFuture waits for a raft future or ctx. Raft resolves every future
// eventually (at the latest on shutdown), so the waiting goroutine ends.
func (s *Store) waitFuture(ctx context.Context, f hraft.Future) error {
	done := make(chan error, 1)
	if !s.goTracked(func() { done <- f.Error() }) {
		// Close is past raft's shutdown: a future made before it may never
		// be answered, so do not wait on it.
		return store.ErrClosed
	}
	select {
	case err := <-done:
		return raftErr(err)
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	}
}

// goTracked runs fn in a goroutine Close waits for (up to futureGrace), unless Close is past
// the point of waiting (false).
func (s *Store) goTracked(fn func()) bool {
	s.trackMu.Lock()
	defer s.trackMu.Unlock()
	if s.stopped {
		return false
	}
	s.futures.Add(1)
	go func() {
		defer s.futures.Done()
		fn()
	}()
	return true
}

// futureGrace bounds how long Close waits for raft to answer the futures
// still pending after its shutdown.
const futureGrace = 2 * time.Second

// awaitFutures waits for the future waiters up to grace; the ones raft
// never answers are left behind (their channels are buffered, they hold
// nothing Close releases) and logged.
func (s *Store) awaitFutures(grace time.Duration) {
	done := make(chan struct{})
	go func() { s.futures.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.log.Warn("raft: futures still unanswered after shutdown; leaving their waiters", "grace", grace)
	}
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func remainingMS(ctx context.Context) int64 {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl).Milliseconds(), 1)
	}
	return 0
}

func remaining(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return 0
}
