package storage

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	"skiff/server/registry"
	"skiff/store"
)

// defaultHistory is how many past events each resource keeps for watches
// that resume from a resourceVersion; older ones get 410 Gone and relist.
const defaultHistory = 4096

// waitLimit bounds how long a read waits for the cache to reach a revision
// before answering "too large resource version", as kube-apiserver does.
const waitLimit = 3 * time.Second

// pendingRetry is how often objects a row could not decode are read again.
const pendingRetry = 2 * time.Second

// bookmarkInterval is how often watchers that asked for bookmarks get one.
const bookmarkInterval = 10 * time.Second

// Event is one watch event for one resource.
type Event struct {
	Type  watch.EventType
	Entry *Entry
	// Prev is the object before the change (nil for ADDED), so that watchers
	// with selectors can see objects move in and out of their selection.
	Prev *Entry
	// InitialEventsEnd marks the bookmark that ends a watch-list's initial
	// events (annotation k8s.io/initial-events-end).
	InitialEventsEnd bool
}

// Cache holds every object of every served resource in memory, fed by one
// store watch, so lists and watches do not touch the store. The watch is on
// the whole keyspace, not only /registry/, which gives the cache the store's
// revision itself: every write is seen, so "the cache is at revision R"
// means all of the cluster up to R. Writes outside the served prefixes (the
// allocation keys under /allocations/) only advance the revision; without
// them a consistent read after one would wait for a /registry/ write that
// might never come, and bookmarks would stand still.
type Cache struct {
	st  store.Store
	reg *registry.Registry
	log *slog.Logger

	history int // events kept per resource

	mu      sync.RWMutex
	rev     int64
	advance chan struct{}        // closed and replaced whenever rev moves
	res     map[string]*resCache // by cacheKey
	// byPrefix lists the caches fed by each store prefix: more than one
	// when several versions serve the same stored objects.
	byPrefix map[string][]*resCache
	ready    bool
}

// cacheKey names the cache of one served resource: its store prefix and,
// for a row that converts, its version.
func cacheKey(res *registry.Resource) string {
	if res.Convert != nil {
		return res.KeyPrefix() + "@" + res.Version
	}
	return res.KeyPrefix()
}

type resCache struct {
	res  *registry.Resource
	objs map[string]*Entry
	// pending are keys whose latest value this row could not decode (a
	// conversion webhook that is down): retried until they decode.
	pending  map[string]bool
	history  []Event
	startRev int64 // history holds every event in (startRev, cache rev]
	watchers map[*Watcher]struct{}
}

func newCache(st store.Store, reg *registry.Registry) *Cache {
	return &Cache{st: st, reg: reg, log: slog.Default(), history: defaultHistory, advance: make(chan struct{}), res: map[string]*resCache{}}
}

// SetHistory sets how many past events each resource keeps.
func (c *Cache) SetHistory(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > 0 {
		c.history = n
	}
}

// Run keeps the cache in step with the store until ctx ends, relisting after
// any break in the store watch.
func (c *Cache) Run(ctx context.Context, log *slog.Logger) {
	if log != nil {
		c.log = log
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.runBookmarks(ctx, bookmarkInterval) })
	wg.Go(func() { c.retryPending(ctx, pendingRetry) })
	defer wg.Wait()
	for ctx.Err() == nil {
		err := c.syncOnce(ctx)
		if ctx.Err() != nil {
			break
		}
		c.log.Warn("watch cache restarting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rc := range c.res {
		rc.closeWatchers()
	}
}

// syncOnce lists everything, then follows the store watch until it breaks.
func (c *Cache) syncOnce(ctx context.Context) error {
	list, err := c.st.List(ctx, store.ListOptions{Prefix: "/registry/"})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	fresh := map[string]*resCache{}
	byPrefix := map[string][]*resCache{}
	for _, res := range c.reg.All() {
		rc := &resCache{res: res, objs: map[string]*Entry{}, startRev: list.Revision, watchers: map[*Watcher]struct{}{}}
		fresh[cacheKey(res)] = rc
		byPrefix[res.KeyPrefix()] = append(byPrefix[res.KeyPrefix()], rc)
	}
	for _, kv := range list.Items {
		for _, rc := range byPrefix[keyPrefix(kv.Key)] {
			e, err := Decode(rc.res, kv)
			if err != nil {
				c.log.Warn("cannot decode object; retrying", "key", kv.Key, "err", err)
				if rc.pending == nil {
					rc.pending = map[string]bool{}
				}
				rc.pending[kv.Key] = true
				continue
			}
			rc.objs[kv.Key] = e
		}
	}
	w, err := c.st.Watch(ctx, "", list.Revision) // every key: see Cache
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer w.Stop()
	c.mu.Lock()
	for _, rc := range c.res {
		rc.closeWatchers() // they resume from their resourceVersion against the new state
	}
	c.res, c.byPrefix, c.ready = fresh, byPrefix, true
	c.setRev(list.Revision)
	for _, res := range c.reg.All() { // rows added while the list was read
		if c.res[cacheKey(res)] == nil {
			if err := c.addLocked(ctx, res); err != nil {
				c.mu.Unlock()
				return err
			}
		}
	}
	c.mu.Unlock()

	for ev := range w.Events() {
		c.apply(ev)
	}
	return fmt.Errorf("store watch ended: %w", w.Err())
}

// keyPrefix is "/registry/<group>/<resource>/" of a key.
func keyPrefix(key string) string {
	rest, ok := strings.CutPrefix(key, "/registry/")
	if !ok {
		return ""
	}
	g, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return ""
	}
	r, _, ok := strings.Cut(rest, "/")
	if !ok {
		return ""
	}
	return "/registry/" + g + "/" + r + "/"
}

// setRev records progress and wakes readers waiting for it. Needs c.mu.
func (c *Cache) setRev(rev int64) {
	c.rev = rev
	close(c.advance)
	c.advance = make(chan struct{})
}

func (c *Cache) apply(ev store.Event) {
	c.mu.RLock()
	rcs := c.byPrefix[keyPrefix(ev.KV.Key)] // none outside the served prefixes: only rev moves
	c.mu.RUnlock()
	// history is read under the write lock below
	kv := ev.KV
	if ev.Type == store.Deleted && ev.Prev != nil {
		kv = *ev.Prev
		kv.ModRevision = ev.Revision() // a deleted object is reported at the delete
	}
	entries := make([]*Entry, len(rcs))
	errs := make([]error, len(rcs))
	for i, rc := range rcs { // decode outside the lock: it is the expensive part
		entries[i], errs[i] = Decode(rc.res, kv)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, rc := range rcs {
		if c.res[cacheKey(rc.res)] != rc {
			continue
		}
		if errs[i] != nil {
			c.undecodable(rc, ev, errs[i])
			continue
		}
		delete(rc.pending, ev.KV.Key)
		rc.apply(ev.Type, ev.KV.Key, entries[i], c.history)
	}
	// A resource added (AddResource) since the read above starts at the
	// revision before this event: it must see the event too.
	for _, rc := range c.byPrefix[keyPrefix(ev.KV.Key)] {
		if slices.Contains(rcs, rc) {
			continue
		}
		if e, err := Decode(rc.res, kv); err == nil {
			rc.apply(ev.Type, ev.KV.Key, e, c.history)
		} else {
			c.log.Error("skipping undecodable event", "key", ev.KV.Key, "err", err)
		}
	}
	c.setRev(ev.Revision())
}

// AddResource starts caching a resource served from now on (a
// CustomResourceDefinition's version): its objects are read from the store
// at the cache's revision, under the lock, so no event is missed or seen
// twice. A row that replaces one of the same key keeps its objects and
// watchers and only swaps the row. Watches from before now get 410.
func (c *Cache) AddResource(ctx context.Context, res *registry.Resource) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return nil // the sync lists every row of the registry when it ends
	}
	return c.addLocked(ctx, res)
}

func (c *Cache) addLocked(ctx context.Context, res *registry.Resource) error {
	key := cacheKey(res)
	if rc := c.res[key]; rc != nil {
		rc.res = res
		return nil
	}
	rc := &resCache{res: res, objs: map[string]*Entry{}, startRev: c.rev, watchers: map[*Watcher]struct{}{}}
	opts := store.ListOptions{Prefix: res.KeyPrefix(), Revision: c.rev}
	for {
		page, err := c.st.List(ctx, opts)
		if err != nil {
			return fmt.Errorf("cache %s: %w", res.GVR(), err)
		}
		for _, kv := range page.Items {
			e, err := Decode(res, kv)
			if err != nil {
				c.log.Warn("cannot decode object; retrying", "key", kv.Key, "err", err)
				if rc.pending == nil {
					rc.pending = map[string]bool{}
				}
				rc.pending[kv.Key] = true
				continue
			}
			rc.objs[kv.Key] = e
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	c.res[key] = rc
	c.byPrefix[res.KeyPrefix()] = append(c.byPrefix[res.KeyPrefix()], rc)
	return nil
}

// RemoveResource stops caching a resource no longer served; its watchers
// end.
func (c *Cache) RemoveResource(res *registry.Resource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := cacheKey(res)
	rc := c.res[key]
	if rc == nil {
		return
	}
	rc.closeWatchers()
	delete(c.res, key)
	prefix := res.KeyPrefix()
	c.byPrefix[prefix] = slices.DeleteFunc(c.byPrefix[prefix], func(x *resCache) bool { return x == rc })
	if len(c.byPrefix[prefix]) == 0 {
		delete(c.byPrefix, prefix)
	}
}

func (rc *resCache) apply(t store.EventType, key string, cur *Entry, historySize int) {
	prev := rc.objs[key]
	e := Event{Entry: cur, Prev: prev}
	switch {
	case t == store.Deleted:
		e.Type = watch.Deleted
		delete(rc.objs, key)
	case prev == nil:
		e.Type = watch.Added
		rc.objs[key] = cur
	default:
		e.Type = watch.Modified
		rc.objs[key] = cur
	}
	rc.history = append(rc.history, e)
	if len(rc.history) > historySize+historySize/4 { // trim in steps, not per event
		drop := len(rc.history) - historySize
		rc.startRev = rc.history[drop-1].Entry.Rev
		rc.history = append(rc.history[:0:0], rc.history[drop:]...)
	}
	for w := range rc.watchers {
		w.offer(rc.res, e)
	}
}

func (rc *resCache) closeWatchers() {
	for w := range rc.watchers {
		w.close()
	}
	rc.watchers = map[*Watcher]struct{}{}
}

// Revision is the revision the cache has caught up to.
func (c *Cache) Revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// WaitFor waits until the cache has every write up to rev.
func (c *Cache) WaitFor(ctx context.Context, rev int64) error {
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		c.mu.RLock()
		ok, advance := c.ready && c.rev >= rev, c.advance
		c.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-advance:
		case <-ctx.Done():
			return apierrors.NewTimeoutError("request canceled while waiting for the watch cache", 1)
		case <-deadline.C:
			return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rev, c.Revision()), 1)
		}
	}
}

// WaitCurrent waits until the cache has every write the store has made so
// far: a consistent read from memory.
func (c *Cache) WaitCurrent(ctx context.Context) error {
	rev, err := c.st.CurrentRevision(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return c.WaitFor(ctx, rev)
}

// List returns the entries of res selected by p, sorted by key, and the
// revision they are current at.
func (c *Cache) List(res *registry.Resource, p Predicate) ([]*Entry, int64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	rc := c.res[cacheKey(res)]
	if rc == nil {
		return nil, 0, apierrors.NewServiceUnavailable(fmt.Sprintf("%s are not cached yet", res.Name))
	}
	return rc.list(p), c.rev, nil
}

// list returns the selected entries in key order; needs the cache lock.
func (rc *resCache) list(p Predicate) []*Entry {
	res := rc.res
	prefix := res.ListPrefix(p.Namespace)
	keys := make([]string, 0, len(rc.objs))
	for k := range rc.objs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]*Entry, 0, len(keys))
	for _, k := range keys {
		if e := rc.objs[k]; p.Matches(res, e) {
			out = append(out, e)
		}
	}
	return out
}

// Get returns one cached entry (nil if absent).
func (c *Cache) Get(res *registry.Resource, namespace, name string) *Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if rc := c.res[cacheKey(res)]; rc != nil {
		return rc.objs[res.Key(namespace, name)]
	}
	return nil
}

// undecodable handles an event a row cannot decode, as for a custom
// resource whose conversion webhook is down: the object leaves the row's
// view (a watcher sees it DELETED, as it would a relist without it) and its
// key is retried until it decodes, so the row is never left stale. Needs
// c.mu.
func (c *Cache) undecodable(rc *resCache, ev store.Event, err error) {
	key := ev.KV.Key
	c.log.Warn("cannot decode object; retrying", "key", key, "version", rc.res.Version, "err", err)
	if prev := rc.objs[key]; prev != nil {
		gone := &Entry{Obj: prev.Obj, Raw: prev.Raw, Rev: ev.Revision()}
		rc.apply(store.Deleted, key, gone, c.history)
	}
	if rc.pending == nil {
		rc.pending = map[string]bool{}
	}
	if ev.Type != store.Deleted {
		rc.pending[key] = true
	} else {
		delete(rc.pending, key)
	}
}

// retryPending re-reads the keys rows could not decode, until ctx ends.
func (c *Cache) retryPending(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.RLock()
		var work []*resCache
		for _, rc := range c.res {
			if len(rc.pending) > 0 {
				work = append(work, rc)
			}
		}
		c.mu.RUnlock()
		for _, rc := range work {
			c.retryRow(ctx, rc)
		}
	}
}

func (c *Cache) retryRow(ctx context.Context, rc *resCache) {
	c.mu.RLock()
	keys := make([]string, 0, len(rc.pending))
	for k := range rc.pending {
		keys = append(keys, k)
	}
	c.mu.RUnlock()
	for _, key := range keys {
		res, err := c.st.List(ctx, store.ListOptions{Prefix: key, Limit: 1})
		if err != nil {
			return
		}
		var e *Entry
		if len(res.Items) == 1 && res.Items[0].Key == key {
			if e, err = Decode(rc.res, res.Items[0]); err != nil {
				continue // still undecodable
			}
		}
		c.mu.Lock()
		if rc.pending[key] && c.res[cacheKey(rc.res)] == rc {
			delete(rc.pending, key)
			if e != nil && (rc.objs[key] == nil || rc.objs[key].Rev < e.Rev) {
				rc.apply(store.Created, key, e, c.history)
			}
		}
		c.mu.Unlock()
	}
}
