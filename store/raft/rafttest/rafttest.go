// Package rafttest builds store/raft clusters in one process for tests:
// members on 127.0.0.1 with a throwaway CA, every pair connected through a
// proxy so that a member can be isolated from the others (Isolate, Heal),
// members killed and restarted on fresh ports (Kill, Restart), and a
// cluster persisted in a directory reopened (Start on the same dir).
package rafttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"skiff/store"
	"skiff/store/raft"
)

// Options tune a cluster.
type Options struct {
	// Config adjusts member i's configuration before each open.
	Config func(i int, cfg *raft.Config)
	// Logger receives the members' logs (default: discarded, or stderr at
	// warn when SKIFF_RAFTTEST_LOG is set).
	Logger *slog.Logger
	// Start is how many members a fresh cluster starts with (default all);
	// the others join later with Join.
	Start int
}

// Cluster is n members of one raft cluster.
type Cluster struct {
	// Members are the running members; a killed member's entry is nil.
	Members []*raft.Store

	dir  string
	opts Options
	ca   *CA
	net  *network

	mu     sync.Mutex
	addrs  []string // each member's own listener address
	closed bool
}

// NewCluster starts a fresh cluster of n members in a temporary directory,
// waits until every member is ready and closes it when the test ends.
func NewCluster(t testing.TB, n int, opts ...Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Start(ctx, t.TempDir(), n, opts...)
	if err != nil {
		t.Fatalf("rafttest: start cluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ID is member i's ID.
func ID(i int) string { return fmt.Sprintf("m%d", i) }

// Start opens the cluster persisted in dir, or creates one of n members
// there: member 0 bootstraps and adds the others with AddVoter. Members
// get fresh ports at every start; AddressOf tells them where the others
// are now. It returns once every member is ready.
func Start(ctx context.Context, dir string, n int, opts ...Options) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("rafttest: a cluster needs a member")
	}
	c := &Cluster{Members: make([]*raft.Store, n), dir: dir, addrs: make([]string, n)}
	if len(opts) > 0 {
		c.opts = opts[0]
	}
	if c.opts.Logger == nil {
		c.opts.Logger = defaultLogger()
	}
	var err error
	if c.ca, err = NewCA(); err != nil {
		return nil, err
	}
	if c.net, err = newNetwork(n); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(filepath.Join(c.memberDir(0), "raft.db"))
	fresh := errors.Is(statErr, os.ErrNotExist)
	if err := c.start(ctx, fresh); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, fresh bool) error {
	n := len(c.Members)
	if !fresh {
		for i := range n {
			if _, err := os.Stat(filepath.Join(c.memberDir(i), "raft.db")); err != nil {
				continue // never joined
			}
			if err := c.open(ctx, i, false); err != nil {
				return err
			}
		}
		return c.WaitReady(ctx)
	}
	if err := c.open(ctx, 0, true); err != nil {
		return err
	}
	if err := ready(ctx, c.Members[0]); err != nil {
		return err
	}
	start := c.opts.Start
	if start <= 0 || start > n {
		start = n
	}
	for i := 1; i < start; i++ {
		if err := c.Join(ctx, i); err != nil {
			return err
		}
	}
	return c.WaitReady(ctx)
}

// Join starts member i, which has never run, and adds it as a voter
// through a running member (which forwards to the leader). It returns once
// the member is ready.
func (c *Cluster) Join(ctx context.Context, i int) error {
	if c.Member(i) != nil {
		return fmt.Errorf("rafttest: %s is running", ID(i))
	}
	if err := c.open(ctx, i, false); err != nil {
		return err
	}
	var via *raft.Store
	c.mu.Lock()
	for k, s := range c.Members {
		if s != nil && k != i {
			via = s
			break
		}
	}
	c.mu.Unlock()
	if via == nil {
		return errors.New("rafttest: no running member to join through")
	}
	if err := via.AddVoter(ctx, ID(i), c.Members[i].Addr()); err != nil {
		return fmt.Errorf("rafttest: add %s: %w", ID(i), err)
	}
	return ready(ctx, c.Members[i])
}

// Dir is member i's data directory (Config.Dir).
func (c *Cluster) Dir(i int) string { return filepath.Join(c.dir, ID(i)) }

func (c *Cluster) memberDir(i int) string { return c.Dir(i) }

// Config is the configuration member i opens with.
func (c *Cluster) Config(i int) (raft.Config, error) {
	server, client, err := c.ca.Member(ID(i))
	if err != nil {
		return raft.Config{}, err
	}
	cfg := raft.Config{
		Dir:       c.memberDir(i),
		ID:        ID(i),
		BindAddr:  "127.0.0.1:0",
		ServerTLS: server,
		ClientTLS: client,
		Logger:    c.opts.Logger.With("member", ID(i)),
		AddressOf: func(id string) string {
			for k := range c.Members {
				if ID(k) == id {
					return c.net.addr(i, k)
				}
			}
			return ""
		},
	}
	if c.opts.Config != nil {
		c.opts.Config(i, &cfg)
	}
	return cfg, nil
}

func (c *Cluster) open(ctx context.Context, i int, bootstrap bool) error {
	cfg, err := c.Config(i)
	if err != nil {
		return err
	}
	cfg.Bootstrap = bootstrap
	s, err := raft.Open(ctx, cfg)
	if err != nil {
		return fmt.Errorf("rafttest: open %s: %w", ID(i), err)
	}
	c.mu.Lock()
	c.Members[i] = s
	c.addrs[i] = s.Addr()
	c.mu.Unlock()
	c.net.setTarget(i, s.Addr())
	return nil
}

// Kill stops member i (Close: its data stays for Restart).
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	s := c.Members[i]
	c.Members[i] = nil
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close()
}

// Restart starts the killed member i again from its data, on a new port.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if c.Member(i) != nil {
		return fmt.Errorf("rafttest: %s is running", ID(i))
	}
	return c.open(ctx, i, false)
}

// Isolate cuts member i off from every other member, both ways.
func (c *Cluster) Isolate(i int) { c.net.setBlocked(i, true) }

// Heal reconnects member i.
func (c *Cluster) Heal(i int) { c.net.setBlocked(i, false) }

// Leader is the index of a running member that considers itself leader
// (-1 if none does).
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.Members {
		if s == nil {
			continue
		}
		if id, _ := s.Leader(); id == ID(i) {
			return i
		}
	}
	return -1
}

// WaitLeader waits for a running member other than those in except to
// consider itself leader and be ready.
func (c *Cluster) WaitLeader(ctx context.Context, except ...int) (int, error) {
	for {
		c.mu.Lock()
		members := append([]*raft.Store(nil), c.Members...)
		c.mu.Unlock()
	next:
		for i, s := range members {
			for _, e := range except {
				if i == e {
					continue next
				}
			}
			if s == nil {
				continue
			}
			if id, _ := s.Leader(); id == ID(i) {
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				err := s.Ready(rctx)
				cancel()
				if err == nil {
					return i, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("rafttest: no leader: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitReady waits until every running member is Ready.
func (c *Cluster) WaitReady(ctx context.Context) error {
	for i, s := range c.Members {
		if s == nil {
			continue
		}
		if err := ready(ctx, s); err != nil {
			return fmt.Errorf("rafttest: %s: %w", ID(i), err)
		}
	}
	return nil
}

func ready(ctx context.Context, s *raft.Store) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.Ready(rctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (%w)", err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops every member and the proxies.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	members := append([]*raft.Store(nil), c.Members...)
	for i := range c.Members {
		c.Members[i] = nil
	}
	c.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range members {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if c.net != nil {
		c.net.close()
	}
	return errors.Join(errs...)
}

// AsStore is member i as a store.Store whose Close closes the whole
// cluster: what storetest.OpenFunc returns.
func (c *Cluster) AsStore(i int) store.Store { return clusterStore{Store: c.Members[i], c: c} }

type clusterStore struct {
	*raft.Store
	c *Cluster
}

func (s clusterStore) Close() error { return s.c.Close() }

func defaultLogger() *slog.Logger {
	if os.Getenv("SKIFF_RAFTTEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Member is member i's current Store, nil while it is killed.
func (c *Cluster) Member(i int) *raft.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Members[i]
}

// Follow is a store.Store that sends every call to member i's current
// Store, so a client stays usable across Kill and Restart; while the member
// is down a call waits for it to come back, as a client retrying its
// connection would, and fails with store.ErrUnavailable when its context
// ends first. Its Close does nothing (the cluster owns the members).
func (c *Cluster) Follow(i int) store.Store { return follower{c: c, i: i} }

type follower struct {
	c *Cluster
	i int
}

func (f follower) member(ctx context.Context) (*raft.Store, error) {
	for {
		if s := f.c.Member(f.i); s != nil {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("rafttest: %s is down: %w", ID(f.i), store.ErrUnavailable)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (f follower) Get(ctx context.Context, key string) (store.KeyValue, error) {
	s, err := f.member(ctx)
	if err != nil {
		return store.KeyValue{}, err
	}
	return s.Get(ctx, key)
}

func (f follower) List(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
	s, err := f.member(ctx)
	if err != nil {
		return store.ListResult{}, err
	}
	return s.List(ctx, opts)
}

func (f follower) Create(ctx context.Context, key string, value []byte) (store.KeyValue, error) {
	s, err := f.member(ctx)
	if err != nil {
		return store.KeyValue{}, err
	}
	return s.Create(ctx, key, value)
}

func (f follower) Update(ctx context.Context, key string, value []byte, expectedRev int64) (store.KeyValue, error) {
	s, err := f.member(ctx)
	if err != nil {
		return store.KeyValue{}, err
	}
	return s.Update(ctx, key, value, expectedRev)
}

func (f follower) Delete(ctx context.Context, key string, expectedRev int64) (store.KeyValue, int64, error) {
	s, err := f.member(ctx)
	if err != nil {
		return store.KeyValue{}, 0, err
	}
	return s.Delete(ctx, key, expectedRev)
}

func (f follower) Watch(ctx context.Context, prefix string, afterRev int64) (store.Watcher, error) {
	s, err := f.member(ctx)
	if err != nil {
		return nil, err
	}
	return s.Watch(ctx, prefix, afterRev)
}

func (f follower) Compact(ctx context.Context, rev int64) error {
	s, err := f.member(ctx)
	if err != nil {
		return err
	}
	return s.Compact(ctx, rev)
}

func (f follower) CurrentRevision(ctx context.Context) (int64, error) {
	s, err := f.member(ctx)
	if err != nil {
		return 0, err
	}
	return s.CurrentRevision(ctx)
}

func (f follower) CompactedRevision(ctx context.Context) (int64, error) {
	s, err := f.member(ctx)
	if err != nil {
		return 0, err
	}
	return s.CompactedRevision(ctx)
}

func (f follower) Close() error { return nil }
