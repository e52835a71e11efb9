package kubelet

import (
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Back-off of container restarts and image pulls, as upstream: 10 s doubling
// to 5 min, forgotten after 10 min without a restart.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
)

type backoffEntry struct {
	delay time.Duration
	last  time.Time
}

// backoff tracks one delay per key ("<pod uid>/<container>").
type backoff struct {
	clock   clock.PassiveClock
	mu      sync.Mutex
	entries map[string]*backoffEntry
}

func newBackoff(c clock.PassiveClock) *backoff {
	return &backoff{clock: c, entries: map[string]*backoffEntry{}}
}

func (b *backoff) expired(e *backoffEntry, now time.Time) bool {
	return now.Sub(e.last) > 2*backoffMax
}

// next records a restart now and grows the delay.
func (b *backoff) next(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	e, ok := b.entries[key]
	switch {
	case !ok || b.expired(e, now):
		e = &backoffEntry{delay: backoffInitial}
		b.entries[key] = e
	default:
		e.delay *= 2
		if e.delay > backoffMax {
			e.delay = backoffMax
		}
	}
	e.last = now
	return e.delay
}

// inBackoffSince reports whether the delay since event has not passed yet,
// with the delay and what remains of it.
func (b *backoff) inBackoffSince(key string, event time.Time) (bool, time.Duration, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	e, ok := b.entries[key]
	if !ok || b.expired(e, now) {
		return false, 0, 0
	}
	if passed := now.Sub(event); passed < e.delay {
		return true, e.delay, e.delay - passed
	}
	return false, e.delay, 0
}

// lastUpdate is when next was last called for key.
func (b *backoff) lastUpdate(key string) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return time.Time{}, false
	}
	return e.last, true
}

// forget drops every key of a pod.
func (b *backoff) forget(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if strings.HasPrefix(k, prefix) {
			delete(b.entries, k)
		}
	}
}
