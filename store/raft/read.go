package raft

import (
	"context"
	"errors"
	"fmt"

	hraft "github.com/hashicorp/raft"

	"skiff/store"
)

// Linearizable reads use a read index, as etcd does. The leader confirms it
// still leads (a heartbeat round with a quorum: VerifyLeader) after the
// read arrived, takes its commit index and waits for its FSM to have
// applied that far; the read index is then its replica's applied index.
// Any write acknowledged before the read began is at or below it. A
// follower asks the leader for the read index and waits for its own
// replica to reach it. Concurrent reads share one round.
//
// Two raft details matter. A new leader's commit index may lag behind what
// the previous leader committed until an entry of its own term commits, so
// a leader serves reads only after a barrier committed in its term
// (barrierTerm). And the FSM never sees raft's no-op and barrier entries,
// so "applied that far" is the FSM's last index or a completed barrier's,
// whichever is higher (fsm.seen). The index handed out is the replica's
// applied index, which moves only with entries the replica holds, so a
// follower can wait for it.

type readOp struct {
	// leaderOnly: a follower's request; if this member does not lead, it
	// says so instead of asking the leader itself.
	leaderOnly bool
	done       chan readReply
}

type readReply struct {
	index uint64
	err   error
}

// readIndex returns an index the local replica must reach for a read to be
// linearizable.
func (s *Store) readIndex(ctx context.Context, leaderOnly bool) (uint64, error) {
	op := &readOp{leaderOnly: leaderOnly, done: make(chan readReply, 1)}
	select {
	case s.reads <- op:
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	case <-s.closing:
		return 0, store.ErrClosed
	}
	select {
	case r := <-op.done:
		return r.index, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	case <-s.closing:
		return 0, store.ErrClosed
	}
}

// readLoop serves read index requests in rounds: a round takes every
// request queued when it starts. Requests arriving during a round wait for
// the next one, whose leadership check comes after them.
func (s *Store) readLoop() {
	for {
		var ops []*readOp
		select {
		case op := <-s.reads:
			ops = append(ops, op)
		case <-s.closing:
			return
		}
	gather:
		for {
			select {
			case op := <-s.reads:
				ops = append(ops, op)
			default:
				break gather
			}
		}
		s.readRound(ops)
	}
}

func (s *Store) readRound(ops []*readOp) {
	ctx, cancel := context.WithTimeout(s.bg, s.cfg.ApplyTimeout)
	defer cancel()
	var rest []*readOp
	if s.raft.State() == hraft.Leader {
		index, err := s.leaderReadIndex(ctx)
		if !errors.Is(err, errNotLeader) {
			reply(ops, index, err)
			return
		}
	}
	for _, op := range ops {
		if op.leaderOnly {
			op.done <- readReply{err: errNotLeader}
		} else {
			rest = append(rest, op)
		}
	}
	if len(rest) > 0 {
		index, err := s.followerReadIndex(ctx)
		reply(rest, index, err)
	}
}

func reply(ops []*readOp, index uint64, err error) {
	for _, op := range ops {
		op.done <- readReply{index: index, err: err}
	}
}

func (s *Store) leaderReadIndex(ctx context.Context) (uint64, error) {
	if err := s.ensureTermBarrier(ctx); err != nil {
		return 0, err
	}
	term := s.raft.CurrentTerm()
	if err := s.waitFuture(ctx, s.raft.VerifyLeader()); err != nil {
		return 0, err
	}
	if s.raft.CurrentTerm() != term || s.barrierTerm.Load() != term {
		return 0, errNotLeader // a new term began meanwhile
	}
	commit := s.raft.CommitIndex()
	for {
		ch := s.fsm.applied.wait()
		if s.fsm.seen.Load() >= commit {
			return s.replica.AppliedIndex(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: the FSM did not reach the commit index %d: %w", store.ErrUnavailable, commit, ctx.Err())
		case <-s.closing:
			return 0, store.ErrClosed
		}
	}
}

// ensureTermBarrier commits a barrier in the current term unless one was.
func (s *Store) ensureTermBarrier(ctx context.Context) error {
	term := s.raft.CurrentTerm()
	if s.barrierTerm.Load() == term {
		return nil
	}
	if s.raft.State() != hraft.Leader {
		return errNotLeader
	}
	f := s.raft.Barrier(remaining(ctx))
	if err := s.waitFuture(ctx, f); err != nil {
		return err
	}
	// The FSM has applied everything before the barrier.
	if idx, ok := f.(hraft.IndexFuture); ok {
		storeMax(&s.fsm.seen, idx.Index())
		s.fsm.applied.notify()
	}
	if s.raft.CurrentTerm() == term {
		s.barrierTerm.Store(term)
	}
	return nil
}

// followerReadIndex asks the leader. A read index request changes nothing,
// so any failure short of the deadline is retried.
func (s *Store) followerReadIndex(ctx context.Context) (uint64, error) {
	var last error = errors.New("no leader")
	for {
		if s.isClosed() {
			return 0, store.ErrClosed
		}
		if s.raft.State() == hraft.Leader {
			index, err := s.leaderReadIndex(ctx)
			if !errors.Is(err, errNotLeader) {
				return index, err
			}
		} else if _, addr := s.leader(); addr != "" {
			var resp rpcResp
			err := s.rpc.call(ctx, addr, rpcReadIndex, struct{}{}, &resp)
			if err == nil {
				err = decodeErr(resp.Code, resp.Msg)
			}
			if err == nil {
				return resp.Index, nil
			}
			last = err
		}
		if !sleep(ctx, retryDelay) {
			return 0, fmt.Errorf("%w: no read index within %s: %w", store.ErrUnavailable, s.cfg.ApplyTimeout, last)
		}
	}
}

// waitApplied waits until the local replica has applied index.
func (s *Store) waitApplied(ctx context.Context, index uint64) error {
	for {
		ch := s.fsm.applied.wait()
		if s.replica.AppliedIndex() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: the local replica did not reach index %d: %w", store.ErrUnavailable, index, ctx.Err())
		case <-s.closing:
			return store.ErrClosed
		}
	}
}

// linearize returns once the local replica reflects every write
// acknowledged before it was called.
func (s *Store) linearize(ctx context.Context) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	c, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
	defer cancel()
	index, err := s.readIndex(c, false)
	if err == nil {
		err = s.waitApplied(c, index)
	}
	return s.unavailable(ctx, err)
}

// Get returns the current value of key (linearizable).
func (s *Store) Get(ctx context.Context, key string) (store.KeyValue, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, err
	}
	if err := s.linearize(ctx); err != nil {
		return store.KeyValue{}, err
	}
	return s.replica.Get(ctx, key)
}

// List reads a page. At the current revision (Revision 0, no Continue) it
// is linearizable; at a given revision it is served by the local replica,
// which first catches up if it has not got that revision yet.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
	if opts.Revision == 0 && opts.Continue == "" {
		if err := s.linearize(ctx); err != nil {
			return store.ListResult{}, err
		}
		return s.replica.List(ctx, opts)
	}
	if s.isClosed() {
		return store.ListResult{}, store.ErrClosed
	}
	res, err := s.replica.List(ctx, opts)
	if errors.Is(err, store.ErrFutureRevision) {
		// Maybe only this member has not got it yet.
		if err := s.linearize(ctx); err != nil {
			return store.ListResult{}, err
		}
		return s.replica.List(ctx, opts)
	}
	return res, err
}

// CurrentRevision is the revision of the last write (linearizable).
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	if err := s.linearize(ctx); err != nil {
		return 0, err
	}
	return s.replica.CurrentRevision(ctx)
}

// CompactedRevision is the local replica's compacted revision.
func (s *Store) CompactedRevision(ctx context.Context) (int64, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	return s.replica.CompactedRevision(ctx)
}

// Watch is served by the local replica.
func (s *Store) Watch(ctx context.Context, prefix string, afterRev int64) (store.Watcher, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	return s.replica.Watch(ctx, prefix, afterRev)
}
