package raft

import (
	"context"
	"errors"
	"fmt"
	"time"

	hraft "github.com/hashicorp/raft"

	"skiff/store"
	"skiff/store/sqlite"
)

// writeOp is one caller's write waiting for the write loop.
type writeOp struct {
	ctx  context.Context
	cmds []sqlite.Command
	done chan writeReply
}

type writeReply struct {
	results []sqlite.Result
	err     error
}

// writeLoop is the group commit: it gathers whatever writes are queued (up
// to maxBatch commands) into one log entry, or one forwarded batch on a
// follower, while up to maxWritesInFlight earlier entries are being
// committed. The more writers, the fuller the entries: one raft round and
// one fsync per member serve them all.
func (s *Store) writeLoop() {
	sem := make(chan struct{}, maxWritesInFlight)
	for {
		select {
		case sem <- struct{}{}:
		case <-s.closing:
			return
		}
		var batch []*writeOp
		n := 0
		select {
		case op := <-s.writes:
			batch, n = append(batch, op), len(op.cmds)
		case <-s.closing:
			return
		}
	gather:
		for n < maxBatch {
			select {
			case op := <-s.writes:
				batch, n = append(batch, op), n+len(op.cmds)
			default:
				break gather
			}
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-sem }()
			s.commitOps(batch)
		}()
	}
}

// commitOps commits one gathered batch and answers its callers. Writes
// whose caller has gone are left out: they take no revision.
func (s *Store) commitOps(batch []*writeOp) {
	live := batch[:0]
	var cmds []sqlite.Command
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.done <- writeReply{err: err}
			continue
		}
		live = append(live, op)
		cmds = append(cmds, op.cmds...)
	}
	if len(cmds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.bg, s.cfg.ApplyTimeout)
	defer cancel()
	results, err := s.commit(ctx, cmds)
	if err == nil && len(results) != len(cmds) {
		err = fmt.Errorf("%w: %d results for %d commands", store.ErrUnavailable, len(results), len(cmds))
	}
	i := 0
	for _, op := range live {
		if err != nil {
			op.done <- writeReply{err: err}
			continue
		}
		op.done <- writeReply{results: results[i : i+len(op.cmds)]}
		i += len(op.cmds)
	}
}

// commit gets cmds into the log through whoever leads, and returns once
// they are applied to the local replica. It retries only what certainly did
// not reach the log (no leader, a member that was not leader, a connection
// that could not be made); anything else fails with ErrUnavailable.
func (s *Store) commit(ctx context.Context, cmds []sqlite.Command) ([]sqlite.Result, error) {
	for {
		if s.isClosed() {
			return nil, store.ErrClosed
		}
		if s.raft.State() == hraft.Leader {
			results, _, err := s.applyAsLeader(ctx, cmds)
			if !errors.Is(err, errNotLeader) {
				return results, s.asUnavailable(err)
			}
		} else if _, addr := s.leader(); addr != "" {
			results, err := s.forward(ctx, addr, cmds)
			if err == nil {
				return results, nil
			}
			if !errors.Is(err, errNotLeader) && !errors.Is(err, errNotSent) {
				return nil, s.asUnavailable(err)
			}
		}
		if !sleep(ctx, retryDelay) {
			return nil, s.asUnavailable(fmt.Errorf("no leader within %s", s.cfg.ApplyTimeout))
		}
	}
}

// applyAsLeader appends cmds as one entry and waits for this member's FSM
// to apply it. It returns the results and the entry's index.
func (s *Store) applyAsLeader(ctx context.Context, cmds []sqlite.Command) ([]sqlite.Result, uint64, error) {
	if s.raft.State() != hraft.Leader {
		return nil, 0, errNotLeader
	}
	data, err := encodeEntry(cmds)
	if err != nil {
		return nil, 0, err
	}
	f := s.raft.Apply(data, remaining(ctx))
	if err := s.waitFuture(ctx, f); err != nil {
		return nil, 0, err
	}
	r, ok := f.Response().(entryResult)
	switch {
	case !ok:
		return nil, 0, fmt.Errorf("%w: unexpected FSM response %T", store.ErrUnavailable, f.Response())
	case r.err != nil:
		return nil, 0, fmt.Errorf("%w: %w", store.ErrUnavailable, r.err)
	case len(r.results) != len(cmds):
		return nil, 0, fmt.Errorf("%w: %d results for %d commands", store.ErrUnavailable, len(r.results), len(cmds))
	}
	return r.results, f.Index(), nil
}

// forward sends cmds to the leader at addr, then waits until the local
// replica has applied the entry, so that a read here sees the write.
func (s *Store) forward(ctx context.Context, addr string, cmds []sqlite.Command) ([]sqlite.Result, error) {
	var resp rpcResp
	if err := s.rpc.call(ctx, addr, rpcForward, forwardReq{Commands: cmds, TimeoutMS: remainingMS(ctx)}, &resp); err != nil {
		return nil, err
	}
	if err := decodeErr(resp.Code, resp.Msg); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(cmds) {
		return nil, fmt.Errorf("%w: leader returned %d results for %d commands", store.ErrUnavailable, len(resp.Results), len(cmds))
	}
	if err := s.waitApplied(ctx, resp.Index); err != nil {
		return nil, err
	}
	return decodeResults(resp.Results), nil
}

// leader is the current leader's ID and the address to reach it at.
func (s *Store) leader() (id, addr string) {
	a, i := s.raft.LeaderWithID()
	id, addr = string(i), string(a)
	if id != "" && s.cfg.AddressOf != nil {
		if o := s.cfg.AddressOf(id); o != "" {
			addr = o
		}
	}
	return id, addr
}

// submit queues one write and waits for its result, at most ApplyTimeout.
func (s *Store) submit(ctx context.Context, c sqlite.Command) sqlite.Result {
	if s.isClosed() {
		return sqlite.Result{Err: store.ErrClosed}
	}
	op := &writeOp{ctx: ctx, cmds: []sqlite.Command{c}, done: make(chan writeReply, 1)}
	timer := time.NewTimer(s.cfg.ApplyTimeout)
	defer timer.Stop()
	timeout := func() sqlite.Result {
		return sqlite.Result{Err: fmt.Errorf("%w: no commit within %s", store.ErrUnavailable, s.cfg.ApplyTimeout)}
	}
	select {
	case s.writes <- op:
	case <-ctx.Done():
		return sqlite.Result{Err: ctx.Err()}
	case <-s.closing:
		return sqlite.Result{Err: store.ErrClosed}
	case <-timer.C:
		return timeout()
	}
	select {
	case r := <-op.done:
		if r.err != nil {
			return sqlite.Result{Err: r.err}
		}
		return r.results[0]
	case <-ctx.Done():
		return sqlite.Result{Err: ctx.Err()}
	case <-s.closing:
		return sqlite.Result{Err: store.ErrClosed}
	case <-timer.C:
		return timeout()
	}
}

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", store.ErrInvalidKey)
	}
	return nil
}

// Create stores a new key; ErrExists if it exists.
func (s *Store) Create(ctx context.Context, key string, value []byte) (store.KeyValue, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, err
	}
	r := s.submit(ctx, sqlite.Command{Kind: sqlite.CmdCreate, Key: key, Value: value})
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
	r := s.submit(ctx, sqlite.Command{Kind: sqlite.CmdUpdate, Key: key, Value: value, Expected: expectedRev})
	return r.KV, r.Err
}

// Delete removes key if its ModRevision is expectedRev (0: any).
func (s *Store) Delete(ctx context.Context, key string, expectedRev int64) (store.KeyValue, int64, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, 0, err
	}
	return sqlite.DeleteResult(s.submit(ctx, sqlite.Command{Kind: sqlite.CmdDelete, Key: key, Expected: expectedRev}))
}

// Compact discards history at and below rev, in chunks of
// sqlite.CompactChunk revisions, each an entry ordered with the writes
// around it.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	cur, err := s.CurrentRevision(ctx)
	if err != nil {
		return err
	}
	if rev > cur {
		return fmt.Errorf("%w: compact to %d, current revision is %d", store.ErrFutureRevision, rev, cur)
	}
	from, err := s.replica.CompactedRevision(ctx)
	if err != nil {
		return err
	}
	for next := from; next < rev; {
		next = min(next+sqlite.CompactChunk, rev)
		if r := s.submit(ctx, sqlite.Command{Kind: sqlite.CmdCompact, Expected: next}); r.Err != nil {
			return r.Err
		}
	}
	return nil
}
