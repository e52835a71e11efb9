package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff/store"
)

// watcher forwards one etcd watch. Events up to the revision that was
// current when the watch began (the history asked for) are handed over at
// the consumer's pace; later ones go into a buffer of Config.WatchBuffer
// events, and a consumer that lets it fill is cut off with
// store.ErrWatcherTooSlow — the etcd client buffers without bound, so
// without the cut a stuck consumer would grow the server's memory.
type watcher struct {
	out    chan store.Event
	cancel context.CancelFunc
	err    error // why out was closed; written before the close
	once   sync.Once
}

func (w *watcher) Events() <-chan store.Event { return w.out }
func (w *watcher) Err() error                 { return w.err }
func (w *watcher) Stop()                      { w.once.Do(w.cancel) }

// Watch streams every event under prefix with revision > afterRev.
//
// Before watching, one linearizable read at afterRev checks the revision
// against compaction (ErrCompacted when afterRev is below the compacted
// revision, which etcd itself only refuses for a start below it, one
// revision later) and learns the current revision. afterRev 0 starts
// after that current revision: a watch started with no revision would
// begin wherever the member is when the watch request reaches it, which
// may be after a write the caller made before calling Watch.
func (s *Store) Watch(ctx context.Context, prefix string, afterRev int64) (store.Watcher, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if afterRev < 0 {
		return nil, fmt.Errorf("etcd: negative watch revision %d", afterRev)
	}
	current, err := s.watchStart(ctx, afterRev)
	if err != nil {
		return nil, err
	}
	if afterRev == 0 {
		afterRev = current
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	key := prefix
	opts := []clientv3.OpOption{clientv3.WithRev(afterRev + 1), clientv3.WithPrevKV()}
	if prefix == "" {
		// Every key: etcd's [\x00, end of keyspace).
		key = "\x00"
		opts = append(opts, clientv3.WithFromKey())
	} else {
		opts = append(opts, clientv3.WithPrefix())
	}
	// WithRequireLeader: a member cut off from its leader ends the watch
	// (ErrUnavailable) instead of keeping it open with no events coming.
	wch := s.cli.Watch(clientv3.WithRequireLeader(wctx), key, opts...)
	w := &watcher{out: make(chan store.Event, s.cfg.WatchBuffer), cancel: cancel}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer stop()
		defer cancel()
		defer close(w.out)
		w.err = s.forward(wctx, wch, w.out, current)
	}()
	return w, nil
}

// watchStart returns the current revision, checking that afterRev is not
// compacted.
func (s *Store) watchStart(ctx context.Context, afterRev int64) (int64, error) {
	rctx, done, err := s.reqCtx(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var opts []clientv3.OpOption
	opts = append(opts, clientv3.WithCountOnly())
	if afterRev > 0 {
		opts = append(opts, clientv3.WithRev(afterRev))
	}
	resp, err := s.cli.Get(rctx, revProbeKey, opts...)
	switch err = s.mapErr(ctx, fmt.Sprintf("watch from %d", afterRev), err); {
	case err == nil:
		return resp.Header.Revision, nil
	case errors.Is(err, store.ErrFutureRevision):
		// Watching from the future is allowed: the events come when the
		// writes do. Nothing is history then.
		return afterRev, nil
	}
	return 0, err
}

// forward copies events from wch to out until the watch ends and returns
// why: nil when ctx ended (Stop or the caller's context), ErrClosed, or
// the watch's error.
func (s *Store) forward(ctx context.Context, wch clientv3.WatchChan, out chan<- store.Event, history int64) error {
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case resp, ok = <-wch:
		case <-ctx.Done():
			return s.watchEnd()
		}
		if !ok {
			if ctx.Err() != nil {
				return s.watchEnd()
			}
			return fmt.Errorf("%w: etcd watch closed", store.ErrUnavailable)
		}
		if err := resp.Err(); err != nil {
			return s.watchErr(ctx, resp, err)
		}
		for _, e := range resp.Events {
			ev, err := toEvent(e)
			if err != nil {
				return err
			}
			if ev.Revision() <= history {
				select {
				case out <- ev:
				case <-ctx.Done():
					return s.watchEnd()
				}
				continue
			}
			select {
			case out <- ev:
			default:
				return fmt.Errorf("%w (at revision %d)", store.ErrWatcherTooSlow, ev.Revision())
			}
		}
	}
}

// watchEnd is why a watch whose context ended stopped.
func (s *Store) watchEnd() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

func (s *Store) watchErr(ctx context.Context, resp clientv3.WatchResponse, err error) error {
	if resp.CompactRevision > 0 {
		s.noteCompacted(resp.CompactRevision)
		return fmt.Errorf("%w: etcd watch: compacted at %d", store.ErrCompacted, resp.CompactRevision)
	}
	if end := s.watchEnd(); end != nil || ctx.Err() != nil {
		return end
	}
	return s.mapErr(ctx, "watch", err)
}

// toEvent maps an etcd event. A put whose key was created at this very
// revision is a creation (etcd has no separate kind for it). A delete's KV
// keeps the creation revision of the incarnation it ended, as the other
// backends do.
func toEvent(e *clientv3.Event) (store.Event, error) {
	ev := store.Event{KV: toKV(e.Kv)}
	if e.PrevKv != nil {
		prev := toKV(e.PrevKv)
		ev.Prev = &prev
	}
	switch {
	case e.Type == mvccpb.DELETE:
		ev.Type, ev.KV.Value = store.Deleted, nil
		if ev.Prev != nil {
			ev.KV.CreateRevision = ev.Prev.CreateRevision
		}
	case e.Kv.CreateRevision == e.Kv.ModRevision:
		ev.Type, ev.Prev = store.Created, nil
	default:
		ev.Type = store.Updated
	}
	if ev.Type != store.Created && ev.Prev == nil {
		// etcd reads the previous value at the event's revision - 1 and
		// leaves it out when compaction has removed it: the event cannot
		// be delivered as the contract wants, so the consumer must re-list.
		return store.Event{}, fmt.Errorf("%w: etcd watch: previous value of %s at revision %d is compacted",
			store.ErrCompacted, ev.KV.Key, ev.Revision())
	}
	return ev, nil
}
