package flowcontrol

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// Why a request did not get a seat; the reasons are upstream's metric labels.
var (
	errRejected  = errors.New("concurrency-limit")
	errQueueFull = errors.New("queue-full")
	errTimeout   = errors.New("time-out")
)

// levelSettings are what a PriorityLevelConfiguration says about its seats.
type levelSettings struct {
	exempt bool
	// seats is how many requests may execute at once.
	seats int
	// reject: a request that finds every seat taken is rejected at once
	// (limitResponse Reject) instead of queuing.
	reject bool
	// queues, handSize and queueLength shape the queuing: each flow is
	// dealt handSize of the queues and joins the shortest of them, which
	// may hold queueLength requests.
	queues, handSize, queueLength int
}

// level is one priority level's seats and queues. A level outlives its
// API object while requests still use it, so deleting a level lets them
// finish and drains its queues.
type level struct {
	name string

	mu        sync.Mutex
	set       levelSettings
	executing int
	waiting   int
	queues    [][]*waiter
	// cursor is where the round-robin over the queues goes on, so that
	// every flow's queue gets its turn whatever the others hold.
	cursor int
	// changed is closed and replaced whenever executing or waiting moves
	// (for tests that wait for a request to queue).
	changed chan struct{}
	gauges  levelGauges
}

type waiter struct {
	flow    uint64
	ready   chan struct{}
	granted bool // guarded by level.mu
}

func newLevel(name string, gauges levelGauges) *level {
	return &level{name: name, changed: make(chan struct{}), gauges: gauges, queues: make([][]*waiter, 1)}
}

// configure applies new settings. Requests already waiting stay queued
// (dealt again when the number of queues changes), and more of them run
// at once if the level got seats.
func (l *level) configure(s levelSettings) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := max(s.queues, 1)
	if n != len(l.queues) || s.handSize != l.set.handSize {
		var all []*waiter
		for _, q := range l.queues {
			all = append(all, q...)
		}
		l.set = s
		l.queues = make([][]*waiter, n)
		for _, w := range all {
			i := l.pickQueue(w.flow)
			l.queues[i] = append(l.queues[i], w)
		}
		l.cursor = 0
	}
	l.set = s
	l.dispatch()
}

// acquire waits until the request may execute: at once if a seat is free
// and nobody waits, else in its flow's queue until a seat frees or ctx ends.
func (l *level) acquire(ctx context.Context, flow uint64) error {
	l.mu.Lock()
	if l.set.exempt {
		l.mu.Unlock()
		return nil
	}
	if l.executing < l.set.seats && l.waiting == 0 {
		l.executing++
		l.noteChange()
		l.mu.Unlock()
		return nil
	}
	if l.set.reject {
		l.mu.Unlock()
		return errRejected
	}
	i := l.pickQueue(flow)
	if len(l.queues[i]) >= l.set.queueLength {
		l.mu.Unlock()
		return errQueueFull
	}
	w := &waiter{flow: flow, ready: make(chan struct{})}
	l.queues[i] = append(l.queues[i], w)
	l.waiting++
	l.noteChange()
	l.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		return nil // the seat came as the wait ended: use it
	}
	for qi, q := range l.queues {
		if j := slices.Index(q, w); j >= 0 {
			l.queues[qi] = slices.Delete(q, j, j+1)
			break
		}
	}
	l.waiting--
	l.noteChange()
	return errTimeout
}

// release gives a seat back and hands it to the next waiting request.
func (l *level) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set.exempt {
		return
	}
	l.executing--
	l.dispatch()
	l.noteChange()
}

// dispatch starts waiting requests while seats are free, taking the queues
// in turn. Needs l.mu.
func (l *level) dispatch() {
	for l.executing < l.set.seats && l.waiting > 0 {
		for range l.queues {
			l.cursor = (l.cursor + 1) % len(l.queues)
			if len(l.queues[l.cursor]) > 0 {
				break
			}
		}
		q := l.queues[l.cursor]
		w := q[0]
		l.queues[l.cursor] = slices.Delete(q, 0, 1)
		l.waiting--
		l.executing++
		w.granted = true
		close(w.ready)
	}
	l.noteChange()
}

// pickQueue shuffle-shards: the flow's hash deals it handSize distinct
// queues, and it takes the shortest, so a heavy flow fills only its own
// hand. Needs l.mu.
func (l *level) pickQueue(flow uint64) int {
	hand := min(max(l.set.handSize, 1), len(l.queues))
	best := -1
	for _, q := range deal(flow, len(l.queues), hand) {
		if best < 0 || len(l.queues[q]) < len(l.queues[best]) {
			best = q
		}
	}
	return best
}

// deal picks hand distinct cards of a deck from the bits of hash: each
// draw takes a remainder among the cards still in the deck.
func deal(hash uint64, deck, hand int) []int {
	picked := make([]int, 0, hand) // ascending
	cards := make([]int, 0, hand)  // in the order drawn
	for i := 0; i < hand; i++ {
		n := uint64(deck - i)
		card := int(hash % n)
		hash /= n
		for _, p := range picked {
			if p <= card {
				card++
			}
		}
		j, _ := slices.BinarySearch(picked, card)
		picked = slices.Insert(picked, j, card)
		cards = append(cards, card)
	}
	return cards
}

// noteChange wakes observers and updates the gauges. Needs l.mu.
func (l *level) noteChange() {
	close(l.changed)
	l.changed = make(chan struct{})
	l.gauges.set(l.executing, l.waiting)
}

// state reports the executing and waiting requests, and a channel closed
// at the next change.
func (l *level) state() (executing, waiting int, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.executing, l.waiting, l.changed
}
