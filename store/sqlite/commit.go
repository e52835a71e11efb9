package sqlite

import (
	"context"

	"skiff/store"
)

// op is one write waiting for the committer: the command plus its caller.
type op struct {
	ctx  context.Context
	cmd  Command
	done chan Result
}

// submit queues c for the committer and waits for its result. If ctx ends
// first the caller gets ctx.Err(), but an operation already taken into a
// batch may still be applied — as with etcd, a timeout is not a rollback.
func (s *Store) submit(ctx context.Context, c Command) Result {
	if s.cfg.Replica {
		return Result{Err: ErrReplica}
	}
	o := &op{ctx: ctx, cmd: c, done: make(chan Result, 1)}
	select {
	case <-s.closing:
		return Result{Err: store.ErrClosed}
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	case s.ops <- o:
	}
	select {
	case r := <-o.done:
		return r
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	case <-s.stopped:
		select {
		case r := <-o.done:
			return r
		default:
			return Result{Err: store.ErrClosed}
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
			o.done <- Result{Err: store.ErrClosed}
		default:
			return
		}
	}
}

// commit applies one batch through Apply. Operations whose caller has gone
// are left out (they take no revision). A failed commit fails every
// operation in it: nothing is acknowledged or published that is not on disk.
func (s *Store) commit(ctx context.Context, batch []*op) {
	live := make([]*op, 0, len(batch))
	cmds := make([]Command, 0, len(batch))
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.done <- Result{Err: err}
			continue
		}
		live = append(live, o)
		cmds = append(cmds, o.cmd)
	}
	if len(cmds) == 0 {
		return
	}
	results, err := s.Apply(ctx, Batch{Commands: cmds})
	if err != nil {
		s.log.Error("commit failed", "ops", len(cmds), "err", err)
		for _, o := range live {
			o.done <- Result{Err: err}
		}
		return
	}
	for i, o := range live {
		o.done <- results[i]
	}
}
