package storage

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	"skiff/server/registry"
)

// watchBuffer is how far a watcher may fall behind before it is cut off; the
// client then resumes from the last resourceVersion it got.
const watchBuffer = 1024

// WatchOptions say where a watch starts and what it sees.
type WatchOptions struct {
	Predicate
	// Rev resumes after that resourceVersion. 0 starts with the current
	// state as ADDED events (resourceVersion "" or "0", or sendInitialEvents).
	Rev int64
	// InitialEvents forces the current state first even with Rev set
	// (sendInitialEvents=true), ending with an initial-events-end bookmark.
	InitialEvents bool
	// Bookmarks asks for periodic BOOKMARK events.
	Bookmarks bool
}

// Watcher is one watch on the cache.
type Watcher struct {
	initial   []Event
	ch        chan Event
	pred      Predicate
	bookmarks bool
	cache     *Cache
	rc        *resCache
	once      sync.Once
	closed    bool // guarded by cache.mu
}

// Initial is what the watch sends before live events: the current state or
// the history since Rev.
func (w *Watcher) Initial() []Event { return w.initial }

// Events delivers live events; it is closed when the watcher is stopped or
// cut off for falling behind.
func (w *Watcher) Events() <-chan Event { return w.ch }

// Stop ends the watch.
func (w *Watcher) Stop() {
	w.cache.mu.Lock()
	defer w.cache.mu.Unlock()
	delete(w.rc.watchers, w)
	w.close()
}

// close closes the channel once; needs cache.mu.
func (w *Watcher) close() {
	w.once.Do(func() {
		w.closed = true
		close(w.ch)
	})
}

// offer hands a live event to the watcher, translated for its selection;
// needs cache.mu. A full buffer cuts the watcher off rather than waiting.
func (w *Watcher) offer(res *registry.Resource, e Event) {
	if w.closed {
		return
	}
	out, ok := w.translate(res, e)
	if !ok {
		return
	}
	select {
	case w.ch <- out:
	default:
		delete(w.rc.watchers, w)
		w.close()
	}
}

// translate applies the selection: an object that starts matching is ADDED
// to this watcher, one that stops matching is DELETED, as upstream does.
func (w *Watcher) translate(res *registry.Resource, e Event) (Event, bool) {
	if e.Type == watch.Bookmark {
		return e, w.bookmarks
	}
	if w.pred.Everything() && w.pred.Namespace == "" {
		return e, true
	}
	now := w.pred.Matches(res, e.Entry)
	if e.Type == watch.Deleted {
		return e, now
	}
	before := e.Prev != nil && w.pred.Matches(res, e.Prev)
	switch {
	case now && before:
		return e, true
	case now:
		return Event{Type: watch.Added, Entry: e.Entry, Prev: e.Prev}, true
	case before:
		return Event{Type: watch.Deleted, Entry: e.Entry, Prev: e.Prev}, true
	}
	return e, false
}

// Watch starts a watch on res.
func (c *Cache) Watch(ctx context.Context, res *registry.Resource, opts WatchOptions) (*Watcher, error) {
	if err := c.WaitFor(ctx, opts.Rev); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rc := c.res[cacheKey(res)]
	if rc == nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("%s are not cached yet", res.Name))
	}
	w := &Watcher{ch: make(chan Event, watchBuffer), pred: opts.Predicate, bookmarks: opts.Bookmarks, cache: c, rc: rc}
	switch {
	case opts.Rev == 0 || opts.InitialEvents:
		w.initial = rc.snapshot(opts.Predicate)
		if opts.InitialEvents {
			w.initial = append(w.initial, Event{Type: watch.Bookmark, Entry: &Entry{Rev: c.rev}, InitialEventsEnd: true})
		}
	case opts.Rev < rc.startRev:
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", opts.Rev, rc.startRev))
	default:
		for _, e := range rc.history {
			if e.Entry.Rev <= opts.Rev {
				continue
			}
			if out, ok := w.translate(res, e); ok {
				w.initial = append(w.initial, out)
			}
		}
	}
	rc.watchers[w] = struct{}{}
	return w, nil
}

// snapshot is the current state as ADDED events, in key order; needs c.mu.
func (rc *resCache) snapshot(p Predicate) []Event {
	entries := rc.list(p)
	out := make([]Event, len(entries))
	for i, e := range entries {
		out[i] = Event{Type: watch.Added, Entry: e}
	}
	return out
}

// runBookmarks sends bookmarks every interval until ctx ends.
func (c *Cache) runBookmarks(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.sendBookmarks()
	}
}

// sendBookmarks gives every watcher that asked for them a BOOKMARK at the
// cache's revision, so clients can resume close to now. That revision is
// the store's, moved by writes of any key (see Cache), so a watcher of a
// quiet resource still gets bookmarks that progress, as upstream's
// progress-notify based ones do; every event of its resource up to the
// revision has already been offered to it under the same lock.
func (c *Cache) sendBookmarks() {
	c.mu.Lock()
	defer c.mu.Unlock()
	mark := Event{Type: watch.Bookmark, Entry: &Entry{Rev: c.rev}}
	for _, rc := range c.res {
		for w := range rc.watchers {
			if w.bookmarks && !w.closed {
				select {
				case w.ch <- mark:
				default: // a full buffer is not worth a bookmark
				}
			}
		}
	}
}
