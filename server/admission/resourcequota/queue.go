package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/apiserver"
	"skiff/server/quota"
)

// The quota checks of one namespace take turns, as upstream's evaluator
// gives each namespace one worker, so this server's own status writes
// never race each other. Instead of a worker goroutine, the requests
// lead: the first request of a namespace leads, takes every request that
// queued meanwhile as one batch, checks and charges the batch with one
// status write per quota, then hands the lead to the next queued request
// (which takes everything queued by then) or, with none, ends the turn.
// Under load the batches grow and the writes per request shrink.

// work is one request waiting for or inside its namespace's turn.
type work struct {
	// An admission check: a, ev. A Release: give.
	a    apiserver.AdmissionAttributes
	ev   quota.Evaluator
	give *charge

	state workState     // guarded by Plugin.mu
	lead  chan struct{} // gets a value when the request is made leader
	done  chan struct{} // closed when err is the batch's result for it
	err   error
	// charged is what the request adds in the current attempt of its
	// batch, by quota name (nil: nothing to write for it).
	charged map[string]corev1.ResourceList
}

type workState int

const (
	queued  workState = iota // in nsQueue.waiting
	leading                  // made leader, not yet leading
	taken                    // in a batch: its result comes through done
)

// nsQueue is a namespace whose turn is taken: a leader is running and
// waiting holds the requests queued behind it. Plugin.queues holds an
// nsQueue exactly while its namespace has a leader.
type nsQueue struct {
	waiting []*work
}

func newWork(a apiserver.AdmissionAttributes, ev quota.Evaluator, give *charge) *work {
	return &work{a: a, ev: ev, give: give, lead: make(chan struct{}, 1), done: make(chan struct{})}
}

// run takes w through its namespace's turn, leading a batch or carried by
// one, and returns w's result.
func (p *Plugin) run(ctx context.Context, ns string, w *work) error {
	p.mu.Lock()
	p.init()
	q := p.queues[ns]
	if q == nil {
		p.queues[ns] = &nsQueue{}
		p.mu.Unlock()
		p.lead(ctx, ns, w)
		return w.err
	}
	q.waiting = append(q.waiting, w)
	p.mu.Unlock()
	return p.await(ctx, ns, w)
}

// await waits while w is queued: for the lead, or for a batch to carry w
// to its result. While only queued, w gives up on ctx and the wait limit
// and leaves the queue; once in a batch it waits for the batch's result,
// which is bounded by the batch's own deadline.
func (p *Plugin) await(ctx context.Context, ns string, w *work) error {
	timer := time.NewTimer(p.waitLimit())
	defer timer.Stop()
	var err error
	select {
	case <-w.done:
		return w.err
	case <-w.lead:
		p.lead(ctx, ns, w)
		return w.err
	case <-ctx.Done():
		err = fmt.Errorf("resource quota evaluation: %w", ctx.Err())
	case <-timer.C:
		err = apierrors.NewInternalError(errors.New("resource quota evaluation timed out"))
	}
	p.mu.Lock()
	switch w.state {
	case queued:
		q := p.queues[ns]
		for i, o := range q.waiting {
			if o == w {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				break
			}
		}
		p.mu.Unlock()
		return err
	case leading:
		// Made leader as it gave up: the lead goes on to the next.
		p.mu.Unlock()
		p.handOff(ns)
		return err
	default:
		p.mu.Unlock()
		<-w.done
		return w.err
	}
}

// lead runs one batch: w and everything queued behind it. The batch runs
// on its own deadline (waitLimit, as upstream bounds an evaluation), not
// on w's context: the leader's client going away must not fail the
// requests it carries.
func (p *Plugin) lead(ctx context.Context, ns string, w *work) {
	p.mu.Lock()
	q := p.queues[ns]
	batch := append([]*work{w}, q.waiting...)
	q.waiting = nil
	for _, b := range batch {
		b.state = taken
	}
	p.mu.Unlock()

	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), waitLimit)
	p.process(bctx, ns, batch)
	cancel()
	for _, b := range batch {
		close(b.done)
	}
	p.handOff(ns)
}

// handOff makes the first queued request of ns the leader, or ends the
// namespace's turn when none is queued.
func (p *Plugin) handOff(ns string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queues[ns]
	if len(q.waiting) == 0 {
		delete(p.queues, ns)
		return
	}
	next := q.waiting[0]
	q.waiting = q.waiting[1:]
	next.state = leading
	next.lead <- struct{}{}
}

// process gives back the released charges of the batch, one by one, then
// checks and charges its admission requests together.
func (p *Plugin) process(ctx context.Context, ns string, batch []*work) {
	p.sweep()
	var admits []*work
	for _, w := range batch {
		if w.give != nil {
			p.giveBack(ctx, w.give)
			continue
		}
		admits = append(admits, w)
	}
	if len(admits) > 0 {
		p.evaluate(ctx, ns, admits)
	}
}

// waitLimit is how long a request may stay queued.
func (p *Plugin) waitLimit() time.Duration {
	if p.wait > 0 {
		return p.wait
	}
	return waitLimit
}
