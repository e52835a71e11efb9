// Package etcd implements store.Store on an external etcd v3 cluster (k3s's
// --datastore-endpoint https://...), through go.etcd.io/etcd/client/v3.
//
// The mapping is direct, because the store contract was modelled on etcd:
// revisions are etcd's own (a fresh etcd is at revision 1), Create, Update
// and Delete are single transactions comparing the key's CreateRevision or
// ModRevision (a refused transaction only reads, so it takes no revision),
// reads are linearizable (etcd's default), List pages with the shared
// store continue tokens, and Watch is an etcd watch with previous values.
//
// The etcd keyspace must be skiff's alone. Watch("") is a watch of every
// key, and the API server's watch cache relies on it seeing every revision
// exactly once: any other writer of the cluster (another application, or
// bookkeeping keys such as kube-apiserver's compact_rev_key) would show up
// as events under foreign keys. So this package writes nothing but the
// caller's keys; in particular the compacted revision is learned from etcd
// itself (see CompactedRevision), not kept in a key.
package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"skiff/store"
)

// Config says which etcd cluster to use and how.
type Config struct {
	// Endpoints are the members' client URLs (https://host:2379 or
	// http://host:2379; host:port is taken as plain http). An entry may hold
	// several URLs separated by commas, as k3s's --datastore-endpoint does.
	Endpoints []string
	// CAFile is the CA bundle that verifies the members' certificates; empty
	// uses the system roots for https endpoints.
	CAFile string
	// CertFile and KeyFile are the client certificate presented to etcd
	// (both or neither).
	CertFile, KeyFile string
	// CompactInterval is how often history is compacted (store.AutoCompact:
	// each compaction keeps at least one interval of history). 0 disables it.
	CompactInterval time.Duration
	// DialTimeout bounds the client's own set-up calls (default 5s); client
	// creation itself does not wait for a connection.
	DialTimeout time.Duration
	// RequestTimeout bounds every request: one that has no answer by then
	// (no reachable member, no leader, no quorum) fails with
	// store.ErrUnavailable (default 5s).
	RequestTimeout time.Duration
	// WatchBuffer is how many events a watcher may fall behind, once it has
	// caught up with the history it asked for, before it is cut off with
	// store.ErrWatcherTooSlow (default 1024).
	WatchBuffer int
	// Logger receives background errors and the etcd client's warnings
	// (default slog.Default()).
	Logger *slog.Logger
}

// Store is the etcd backend. It implements store.Store.
type Store struct {
	cfg Config
	log *slog.Logger
	cli *clientv3.Client

	ctx       context.Context // ends when Close begins
	cancel    context.CancelFunc
	closed    atomic.Bool
	bg        sync.WaitGroup // AutoCompact and every watcher's goroutine
	closeOnce sync.Once
	closeErr  error

	// compacted is the highest compacted revision this store has seen: the
	// one its own Compact set, or one etcd reported.
	compacted atomic.Int64
}

var _ store.Store = (*Store)(nil)

// Open creates the client and starts automatic compaction if configured.
// It does not wait for the cluster: a server may start before its
// datastore; calls fail with store.ErrUnavailable until etcd answers, and
// Ready says when it does.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.Endpoints = splitEndpoints(cfg.Endpoints)
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.WatchBuffer <= 0 {
		cfg.WatchBuffer = 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tlsCfg, err := clientTLS(cfg)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		// Find a dead connection (a partitioned member) rather than wait on
		// it; a killed member's connection is reset at once anyway.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		TLS:                  tlsCfg,
		Logger:               newZapLogger(cfg.Logger),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: client for %v: %w", cfg.Endpoints, err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Store{cfg: cfg, log: cfg.Logger, cli: cli, ctx: sctx, cancel: cancel}
	if cfg.CompactInterval > 0 {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			store.AutoCompact(sctx, s, cfg.CompactInterval, func(err error) {
				s.log.Warn("etcd: scheduled compaction failed", "err", err)
			})
		}()
	}
	return s, nil
}

// splitEndpoints flattens comma-separated lists and drops empty entries.
func splitEndpoints(in []string) []string {
	var out []string
	for _, e := range in {
		for _, p := range strings.Split(e, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// clientTLS builds the client's TLS configuration, or nil when no file is
// given (clientv3 then uses the system roots for https endpoints).
func clientTLS(cfg Config) (*tls.Config, error) {
	if cfg.CAFile == "" && cfg.CertFile == "" && cfg.KeyFile == "" {
		return nil, nil
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, errors.New("etcd: CertFile and KeyFile go together")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd: CA file %s holds no PEM certificate", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Close ends every watch with store.ErrClosed, fails calls in flight with
// it, waits for the store's goroutines and closes the client.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		s.bg.Wait()
		if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = fmt.Errorf("etcd: close client: %w", err)
		}
	})
	return s.closeErr
}

// Ready is nil iff a linearizable read succeeds within ctx (and the
// request timeout): the cluster has a leader and a quorum that this client
// reaches. Otherwise the error wraps store.ErrUnavailable (or ErrClosed).
func (s *Store) Ready(ctx context.Context) error {
	_, err := s.CurrentRevision(ctx)
	if err != nil && !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// reqCtx bounds one request by the caller's ctx, RequestTimeout and the
// store's life.
func (s *Store) reqCtx(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, store.ErrClosed
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	stop := context.AfterFunc(s.ctx, cancel)
	return rctx, func() { stop(); cancel() }, nil
}

// mapErr turns a client error into the store's sentinels. caller is the
// caller's context, so that its own end is told apart from the store's
// request timeout (which means etcd did not answer: ErrUnavailable).
func (s *Store) mapErr(caller context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case s.closed.Load():
		return fmt.Errorf("etcd: %s: %w", op, store.ErrClosed)
	case caller.Err() != nil:
		return fmt.Errorf("etcd: %s: %w", op, caller.Err())
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("etcd: %s: %w", op, store.ErrCompacted)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("etcd: %s: %w", op, store.ErrFutureRevision)
	case errors.Is(err, rpctypes.ErrEmptyKey):
		return fmt.Errorf("etcd: %s: %w", op, store.ErrInvalidKey)
	case unavailable(err):
		return fmt.Errorf("%w: etcd %s: %w", store.ErrUnavailable, op, err)
	}
	return fmt.Errorf("etcd: %s: %w", op, err)
}

// unavailable says whether err means etcd could not serve the request now:
// our request timeout ran out (no member answered, or no leader to commit
// or confirm a read), the member said it has no leader, timed out or is
// stopping (all gRPC Unavailable), or it refuses writes until an operator
// frees space (the NOSPACE alarm) or sheds load.
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrTooManyRequests) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) && ee.Code() == codes.Unavailable {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
