package containers

import (
	"context"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"
)

// Event topics the runtime watches.
const (
	topicTaskExit = "/tasks/exit"
	topicTaskOOM  = "/tasks/oom"
)

// eventBuffer is each subscriber's channel size; when it is full, further
// IDs are dropped (subscribers also resync periodically).
const eventBuffer = 256

// Events returns the IDs of containers whose task exited or was OOM-killed;
// the channel is closed when ctx ends or the runtime closes.
func (r *Runtime) Events(ctx context.Context) <-chan string {
	ch := make(chan string, eventBuffer)
	r.mu.Lock()
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-r.ctx.Done():
		}
		r.mu.Lock()
		delete(r.subs, ch)
		close(ch)
		r.mu.Unlock()
	}()
	return ch
}

// publish sends id to every subscriber without blocking.
func (r *Runtime) publish(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.subs {
		select {
		case ch <- id:
		default:
			r.log.Warn("container event dropped: subscriber is slow", "id", id)
		}
	}
}

// watchEvents follows containerd's task exit and OOM events until the
// runtime closes, re-subscribing after errors.
func (r *Runtime) watchEvents() {
	defer r.wg.Done()
	filters := []string{`topic=="` + topicTaskExit + `"`, `topic=="` + topicTaskOOM + `"`}
	for r.ctx.Err() == nil {
		ctx, cancel := context.WithCancel(r.ctx)
		evc, errc := r.client.Subscribe(ctx, filters...)
		r.consume(evc, errc)
		cancel()
		select {
		case <-r.ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (r *Runtime) consume(evc <-chan *events.Envelope, errc <-chan error) {
	for {
		select {
		case <-r.ctx.Done():
			return
		case err := <-errc:
			if err != nil && r.ctx.Err() == nil {
				r.log.Warn("containerd events", "err", err)
			}
			return
		case env, ok := <-evc:
			if !ok {
				return
			}
			r.handleEvent(env)
		}
	}
}

func (r *Runtime) handleEvent(env *events.Envelope) {
	if env.Namespace != r.cfg.Namespace || env.Event == nil {
		return
	}
	ev, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		r.log.Warn("decode containerd event", "topic", env.Topic, "err", err)
		return
	}
	switch e := ev.(type) {
	case *apievents.TaskExit:
		if e.ID == e.ContainerID { // the init process, not an exec
			r.publish(e.ContainerID)
		}
	case *apievents.TaskOOM:
		r.mu.Lock()
		r.oom[e.ContainerID] = true
		r.mu.Unlock()
		r.wg.Add(1) // watchEvents holds the group open, so Add cannot race Wait
		go r.recordOOM(e.ContainerID)
		r.publish(e.ContainerID)
	}
}

// recordOOM keeps an OOM kill in the container's labels.
func (r *Runtime) recordOOM(id string) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return
	}
	if _, err := c.SetLabels(ctx, map[string]string{labelOOM: "true"}); err != nil {
		r.log.Debug("record OOM kill", "id", id, "err", err)
	}
}
