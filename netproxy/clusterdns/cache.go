package clusterdns

import (
	"container/list"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// cacheKey is what makes two questions the same answer. The DO bit is in
// it because a DNSSEC-aware client's answer carries signatures the others'
// does not.
type cacheKey struct {
	name   string // lowercase
	qtype  uint16
	qclass uint16
	do     bool
}

type cacheEntry struct {
	key     cacheKey
	msg     *dns.Msg // never modified once cached: readers copy it
	stored  time.Time
	expires time.Time
}

// answerCache is a size-bounded LRU of upstream answers.
type answerCache struct {
	size int

	mu      sync.Mutex
	entries map[cacheKey]*list.Element
	lru     list.List // front: most recently used
}

func newAnswerCache(size int) *answerCache {
	return &answerCache{size: size, entries: make(map[cacheKey]*list.Element)}
}

// get returns a live answer and how long it has been cached.
func (c *answerCache) get(k cacheKey, now time.Time) (*dns.Msg, time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return nil, 0, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.lru.Remove(el)
		delete(c.entries, k)
		return nil, 0, false
	}
	c.lru.MoveToFront(el)
	return e.msg, now.Sub(e.stored), true
}

// put keeps msg for ttl, evicting the least recently used entry when full.
func (c *answerCache) put(k cacheKey, msg *dns.Msg, ttl time.Duration, now time.Time) {
	if ttl <= 0 || c.size <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &cacheEntry{key: k, msg: msg, stored: now, expires: now.Add(ttl)}
	if el, ok := c.entries[k]; ok {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.entries[k] = c.lru.PushFront(e)
	for c.lru.Len() > c.size {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*cacheEntry).key)
	}
}

func (c *answerCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// cacheTTL is how long an upstream answer may be kept: the smallest TTL of
// its records, or for a negative answer its SOA's negative TTL (RFC 2308),
// capped at maxTTL. Zero means not cacheable (failures, negative answers
// without SOA, truncated answers).
func cacheTTL(m *dns.Msg, maxTTL time.Duration) time.Duration {
	if m.Truncated {
		return 0
	}
	var ttl uint32
	switch {
	case m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0:
		ttl = ^uint32(0)
		for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
			for _, rr := range sec {
				ttl = min(ttl, rr.Header().Ttl)
			}
		}
	case m.Rcode == dns.RcodeSuccess || m.Rcode == dns.RcodeNameError:
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				ttl = min(soa.Hdr.Ttl, soa.Minttl)
				break
			}
		}
	}
	return min(time.Duration(ttl)*time.Second, maxTTL)
}

// flight makes concurrent identical cache misses share one upstream query.
type flight struct {
	mu    sync.Mutex
	calls map[cacheKey]*flightCall
}

type flightCall struct {
	done    chan struct{}
	msg     *dns.Msg
	err     error
	waiters int // callers sharing the leader's query
}

// do runs fn once for all callers asking for k at the same time; all get
// its result, which they must not modify. shared reports whether this
// caller waited for another's query.
func (f *flight) do(k cacheKey, fn func() (*dns.Msg, error)) (msg *dns.Msg, shared bool, err error) {
	f.mu.Lock()
	if c, ok := f.calls[k]; ok {
		c.waiters++
		f.mu.Unlock()
		<-c.done
		return c.msg, true, c.err
	}
	if f.calls == nil {
		f.calls = make(map[cacheKey]*flightCall)
	}
	c := &flightCall{done: make(chan struct{})}
	f.calls[k] = c
	f.mu.Unlock()

	defer func() {
		f.mu.Lock()
		delete(f.calls, k)
		f.mu.Unlock()
		close(c.done)
	}()
	c.msg, c.err = fn()
	return c.msg, false, c.err
}

// waiters is how many callers wait on the query in flight for k.
func (f *flight) waiters(k cacheKey) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.calls[k]; ok {
		return c.waiters
	}
	return 0
}
