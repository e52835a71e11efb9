package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"skiff/store"
)

// hub fans committed events out to watchers in-process: the committer hands
// it each batch's events right after the commit, so delivery has no polling
// delay. Sends never block: a watcher whose buffer is full is cut off with
// store.ErrWatcherTooSlow, so one stuck reader cannot hold up writers.
type hub struct {
	mu   sync.Mutex
	rev  int64 // revision of the last batch published
	subs map[*sub]struct{}
}

type sub struct {
	prefix, end string
	ch          chan store.Event
	err         error // why ch was closed; written under hub.mu before close
}

func newHub(rev int64) *hub {
	return &hub{rev: rev, subs: make(map[*sub]struct{})}
}

func (s *sub) matches(key string) bool {
	return len(key) >= len(s.prefix) && key[:len(s.prefix)] == s.prefix
}

// subscribe registers a subscriber for keys under prefix and returns the
// revision it starts after: every event above it will reach the subscriber.
func (h *hub) subscribe(prefix string, buffer int) (*sub, int64) {
	sb := &sub{prefix: prefix, end: store.PrefixEnd(prefix), ch: make(chan store.Event, buffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		sb.err = store.ErrClosed
		close(sb.ch)
		return sb, h.rev
	}
	h.subs[sb] = struct{}{}
	return sb, h.rev
}

func (h *hub) unsubscribe(sb *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[sb]; ok {
		delete(h.subs, sb)
		close(sb.ch)
	}
}

// publish delivers a committed batch's events (in revision order) and records
// rev as published.
func (h *hub) publish(events []store.Event, rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rev = rev
	for sb := range h.subs {
		for _, ev := range events {
			if !sb.matches(ev.KV.Key) {
				continue
			}
			select {
			case sb.ch <- ev:
			default:
				sb.err = store.ErrWatcherTooSlow
				delete(h.subs, sb)
				close(sb.ch)
			}
			if sb.err != nil {
				break
			}
		}
	}
}

// closeAll ends every subscription with err; later subscriptions end at once.
func (h *hub) closeAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sb := range h.subs {
		sb.err = err
		close(sb.ch)
	}
	h.subs = nil
}

// watcher replays history from the database, then forwards live events.
type watcher struct {
	s      *Store
	sub    *sub
	after  int64 // last revision delivered (or the starting point)
	upto   int64 // history to replay from the database ends here
	out    chan store.Event
	cancel context.CancelFunc
	err    error // set before out is closed
	once   sync.Once
}

// historyPage is how many rows one replay query reads.
const historyPage = 1000

// Watch streams events under prefix with revision > afterRev.
func (s *Store) Watch(ctx context.Context, prefix string, afterRev int64) (store.Watcher, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	if afterRev < 0 {
		return nil, fmt.Errorf("sqlite: negative watch revision %d", afterRev)
	}
	sb, published := s.hub.subscribe(prefix, s.cfg.WatchBuffer)
	if afterRev == 0 {
		afterRev = published
	}
	if c := s.compact.Load(); afterRev < c {
		s.hub.unsubscribe(sb)
		return nil, fmt.Errorf("%w: watch from revision %d, compacted at %d", store.ErrCompacted, afterRev, c)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{s: s, sub: sb, after: afterRev, upto: published, out: make(chan store.Event), cancel: cancel}
	go w.run(ctx)
	return w, nil
}

func (w *watcher) Events() <-chan store.Event { return w.out }
func (w *watcher) Err() error                 { return w.err }
func (w *watcher) Stop()                      { w.cancel() }

func (w *watcher) run(ctx context.Context) {
	defer close(w.out)
	defer w.s.hub.unsubscribe(w.sub)
	defer w.cancel()
	if err := w.replay(ctx); err != nil {
		if ctx.Err() == nil {
			w.err = err
		}
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.sub.ch:
			if !ok {
				w.s.hub.mu.Lock()
				w.err = w.sub.err
				w.s.hub.mu.Unlock()
				return
			}
			if ev.Revision() <= w.after {
				continue // already replayed from the database
			}
			if !w.send(ctx, ev) {
				return
			}
		}
	}
}

func (w *watcher) send(ctx context.Context, ev store.Event) bool {
	select {
	case w.out <- ev:
		w.after = ev.Revision()
		return true
	case <-ctx.Done():
		return false
	}
}

// replay sends the history in (after, upto] from the database, page by page.
// Each page is read in its own transaction and checks that compaction has
// not overtaken the watcher, which would have removed rows it still needs.
func (w *watcher) replay(ctx context.Context) error {
	end := store.PrefixEnd(w.sub.prefix)
	for w.after < w.upto {
		events, err := w.readPage(ctx, end)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil // nothing else under the prefix up to upto
		}
		for _, ev := range events {
			if !w.send(ctx, ev) {
				return ctx.Err()
			}
		}
	}
	return nil
}

func (w *watcher) readPage(ctx context.Context, end string) ([]store.Event, error) {
	tx, err := w.s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: watch replay: %w", err)
	}
	defer tx.Rollback()
	var cur, compacted int64
	if err := tx.QueryRowContext(ctx, sqlMeta).Scan(&cur, &compacted); err != nil {
		return nil, fmt.Errorf("sqlite: watch replay: %w", err)
	}
	if w.after < compacted {
		return nil, fmt.Errorf("%w: watch at revision %d, compacted at %d", store.ErrCompacted, w.after, compacted)
	}
	rows, err := tx.StmtContext(ctx, w.s.rstmt.history[bound(end)]).QueryContext(ctx, w.after, w.upto, w.sub.prefix, end, historyPage)
	if err != nil {
		return nil, fmt.Errorf("sqlite: watch replay: %w", err)
	}
	defer rows.Close()
	var events []store.Event
	for rows.Next() {
		var (
			kv             store.KeyValue
			deleted        bool
			pRev, pCreated sql.NullInt64
			pDeleted       sql.NullBool
			pValue         []byte
		)
		if err := rows.Scan(&kv.ModRevision, &kv.Key, &kv.CreateRevision, &deleted, &kv.Value,
			&pRev, &pCreated, &pDeleted, &pValue); err != nil {
			return nil, fmt.Errorf("sqlite: watch replay: %w", err)
		}
		ev := store.Event{KV: kv}
		if pRev.Valid && !pDeleted.Bool {
			ev.Prev = &store.KeyValue{Key: kv.Key, Value: pValue, CreateRevision: pCreated.Int64, ModRevision: pRev.Int64}
		}
		switch {
		case deleted:
			ev.Type, ev.KV.Value = store.Deleted, nil
		case ev.Prev == nil:
			ev.Type = store.Created
		default:
			ev.Type = store.Updated
		}
		events = append(events, ev)
	}
	return events, rows.Err()
}

// reset ends every subscription with err and restarts the published
// revision at rev (after a Restore, whose history no watcher saw).
func (h *hub) reset(rev int64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		return
	}
	for sb := range h.subs {
		sb.err = err
		close(sb.ch)
		delete(h.subs, sb)
	}
	h.rev = rev
}
