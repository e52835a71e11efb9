package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"

	"skiff/runtime/crilog"
)

// outputDrainTimeout bounds the wait for a container's output copy to end
// after its task exited (a leftover process may hold the pipe open).
const outputDrainTimeout = 5 * time.Second

// containerIO copies one container's output into its CRI log and to the
// clients attached to it, and feeds its stdin from attached clients.
type containerIO struct {
	id        string
	tty       bool
	stdinOnce bool
	log       *crilog.Writer // nil without a log path
	stdout    *fanout
	stderr    *fanout // nil with a TTY
	stdinR    *io.PipeReader
	stdinW    *io.PipeWriter // nil without stdin

	task client.Task
	io   cio.IO

	done           chan struct{} // closed once output ended (or the runtime closed)
	closeOnce      sync.Once
	stdinOnceClose sync.Once
}

func (r *Runtime) newContainerIO(id string, labels map[string]string) (*containerIO, error) {
	x := &containerIO{
		id:        id,
		tty:       labels[labelTTY] == "true",
		stdinOnce: labels[labelStdinOnce] == "true",
		done:      make(chan struct{}),
	}
	x.stdout, x.stderr = &fanout{}, &fanout{}
	if p := labels[LabelLogPath]; p != "" {
		w, err := crilog.NewWriter(p, r.cfg.LogMaxSize, r.cfg.LogMaxFiles)
		if err != nil {
			return nil, fmt.Errorf("containers: log of %s: %w", id, err)
		}
		x.log = w
		x.stdout.log, x.stderr.log = w.Stream(crilog.Stdout), w.Stream(crilog.Stderr)
	}
	if x.tty {
		x.stderr = nil
	}
	if labels[labelStdin] == "true" {
		x.stdinR, x.stdinW = io.Pipe()
	}
	return x, nil
}

// streams are the cio options that connect the task's FIFOs to x.
func (x *containerIO) streams() []cio.Opt {
	var stdin io.Reader
	if x.stdinR != nil {
		stdin = x.stdinR
	}
	var stderr io.Writer
	if x.stderr != nil {
		stderr = x.stderr
	}
	opts := []cio.Opt{cio.WithStreams(stdin, x.stdout, stderr)}
	if x.tty {
		opts = append(opts, cio.WithTerminal)
	}
	return opts
}

// finish ends x after the task exited: the output is drained, the FIFOs
// removed and the log closed.
func (x *containerIO) finish() {
	x.closeOnce.Do(func() {
		if x.io != nil {
			waitTimeout(x.io.Wait, outputDrainTimeout)
		}
		if x.stdinW != nil {
			_ = x.stdinW.Close()
		}
		if x.io != nil {
			x.io.Cancel()
			_ = x.io.Close()
		}
		x.closeLog()
		close(x.done)
	})
}

// detach stops copying while the task keeps running: the FIFOs stay for
// the next Runtime to re-attach.
func (x *containerIO) detach() {
	x.closeOnce.Do(func() {
		if x.stdinW != nil {
			_ = x.stdinW.Close()
		}
		if x.io != nil {
			x.io.Cancel()
			waitTimeout(x.io.Wait, time.Second)
		}
		if x.log != nil {
			_ = x.log.Detach() // the next Runtime's writer continues the lines
		}
		close(x.done)
	})
}

func (x *containerIO) closeLog() {
	if x.log != nil {
		_ = x.log.Close()
	}
}

// waitTimeout runs wait, giving up after d; it reports whether wait
// returned in time.
func waitTimeout(wait func(), d time.Duration) bool {
	ch := make(chan struct{})
	go func() {
		wait()
		close(ch)
	}()
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// fanout writes a stream to the log and to every attached client; a client
// whose write fails is dropped.
type fanout struct {
	mu      sync.Mutex
	log     io.Writer
	clients map[*io.Writer]struct{}
}

// Write never fails: the container must not block on a broken client.
func (f *fanout) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.log != nil {
		_, _ = f.log.Write(p)
	}
	for c := range f.clients {
		if _, err := (*c).Write(p); err != nil {
			delete(f.clients, c)
		}
	}
	return len(p), nil
}

// add attaches w and returns the function that detaches it.
func (f *fanout) add(w io.Writer) func() {
	key := &w
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clients == nil {
		f.clients = map[*io.Writer]struct{}{}
	}
	f.clients[key] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.clients, key)
	}
}

// Start starts the container's task with its output going to the CRI log
// at its LogPath.
func (r *Runtime) Start(ctx context.Context, id string) error {
	ctx = r.nsctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	r.mu.Lock()
	x := r.ios[id]
	r.mu.Unlock()
	if x != nil {
		return r.startAttached(ctx, x)
	}
	if t, err := c.Task(ctx, nil); err == nil {
		st, err := t.Status(ctx)
		if err != nil {
			return fmt.Errorf("containers: start %s: %w", id, err)
		}
		if st.Status != client.Created {
			return fmt.Errorf("containers: start %s: task already %s: %w", id, st.Status, errdefs.ErrFailedPrecondition)
		}
		// Created by an earlier runtime that could not re-attach: redo it.
		if _, err := t.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("containers: start %s: %w", id, err)
		}
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		return fmt.Errorf("containers: start %s: %w", id, err)
	}
	if x, err = r.newContainerIO(id, labels); err != nil {
		return err
	}
	creator := cio.NewCreator(append(x.streams(), cio.WithFIFODir(r.cfg.fifoDir()))...)
	t, err := c.NewTask(ctx, creator)
	if err != nil {
		x.closeLog()
		return fmt.Errorf("containers: create task %s: %w", id, err)
	}
	x.task, x.io = t, t.IO()
	started := time.Now()
	if err := t.Start(ctx); err != nil {
		_, _ = t.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
		x.finish()
		return fmt.Errorf("containers: start %s: %w", id, err)
	}
	r.track(x)
	if _, err := c.SetLabels(ctx, map[string]string{labelStartedAt: started.UTC().Format(time.RFC3339Nano)}); err != nil {
		r.log.Warn("record container start", "id", id, "err", err)
	}
	return nil
}

// startAttached starts a created task whose output is already attached;
// starting a running one does nothing.
func (r *Runtime) startAttached(ctx context.Context, x *containerIO) error {
	st, err := x.task.Status(ctx)
	if err != nil {
		return fmt.Errorf("containers: start %s: %w", x.id, err)
	}
	switch st.Status {
	case client.Created:
	case client.Running, client.Paused, client.Pausing:
		return nil
	default:
		return fmt.Errorf("containers: start %s: task already %s: %w", x.id, st.Status, errdefs.ErrFailedPrecondition)
	}
	started := time.Now()
	if err := x.task.Start(ctx); err != nil {
		return fmt.Errorf("containers: start %s: %w", x.id, err)
	}
	if c, err := r.load(ctx, x.id); err == nil {
		_, _ = c.SetLabels(ctx, map[string]string{labelStartedAt: started.UTC().Format(time.RFC3339Nano)})
	}
	return nil
}

// track registers x and supervises its task until it exits.
func (r *Runtime) track(x *containerIO) {
	r.mu.Lock()
	r.ios[x.id] = x
	r.mu.Unlock()
	r.wg.Add(1)
	go r.supervise(x)
}

// supervise waits for the task to exit, then drains and closes its output
// and records the exit.
func (r *Runtime) supervise(x *containerIO) {
	defer r.wg.Done()
	st, ok := r.waitExit(x.task)
	if !ok {
		return // runtime closing: Close detaches
	}
	x.finish()
	if st != nil {
		r.recordExit(x.id, *st)
	}
	r.mu.Lock()
	if r.ios[x.id] == x {
		delete(r.ios, x.id)
	}
	r.mu.Unlock()
}

// waitExit waits for t to exit, retrying while containerd is unreachable.
// It returns ok=false when the runtime closes, and a nil status when the
// task was deleted.
func (r *Runtime) waitExit(t client.Task) (*client.ExitStatus, bool) {
	for {
		ch, err := t.Wait(r.ctx)
		if err == nil {
			select {
			case st := <-ch:
				if err = st.Error(); err == nil {
					return &st, true
				}
			case <-r.ctx.Done():
				return nil, false
			}
		}
		if r.ctx.Err() != nil {
			return nil, false
		}
		if errdefs.IsNotFound(err) {
			return nil, true
		}
		r.log.Warn("wait for container task", "id", t.ID(), "err", err)
		select {
		case <-r.ctx.Done():
			return nil, false
		case <-time.After(time.Second):
		}
	}
}

// reattachAll re-attaches to the output of every live task (after an agent
// restart) and supervises it.
func (r *Runtime) reattachAll(ctx context.Context) error {
	ctx = r.nsctx(ctx)
	cs, err := r.client.Containers(ctx)
	if err != nil {
		return fmt.Errorf("containers: list: %w", err)
	}
	for _, c := range cs {
		if err := r.reattach(ctx, c); err != nil {
			r.log.Warn("re-attach container output", "id", c.ID(), "err", err)
		}
	}
	return nil
}

func (r *Runtime) reattach(ctx context.Context, c client.Container) error {
	t, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := t.Status(ctx)
	if err != nil {
		return err
	}
	switch st.Status {
	case client.Running, client.Created, client.Paused, client.Pausing:
	default:
		return nil
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		return err
	}
	x, err := r.newContainerIO(c.ID(), labels)
	if err != nil {
		return err
	}
	if t, err = c.Task(ctx, cio.NewAttach(x.streams()...)); err != nil {
		x.closeLog()
		return err
	}
	x.task, x.io = t, t.IO()
	r.track(x)
	return nil
}

// waitOutput waits (at most d) until the output copy of id has ended.
func (r *Runtime) waitOutput(id string, d time.Duration) {
	r.mu.Lock()
	x := r.ios[id]
	r.mu.Unlock()
	if x == nil {
		return
	}
	select {
	case <-x.done:
	case <-time.After(d):
	}
}

// Attach streams the running container's output to req's writers (the log
// copy continues) and req.Stdin to its stdin, until ctx ends (ctx.Err() is
// returned) or the container's output ends (nil).
func (r *Runtime) Attach(ctx context.Context, id string, req AttachRequest) error {
	r.mu.Lock()
	x := r.ios[id]
	r.mu.Unlock()
	if x == nil {
		if _, err := r.load(r.nsctx(ctx), id); err != nil {
			return err
		}
		return fmt.Errorf("containers: attach %s: %w", id, ErrNotRunning)
	}
	select {
	case <-x.done:
		return fmt.Errorf("containers: attach %s: %w", id, ErrNotRunning)
	default:
	}
	if req.Stdout != nil {
		defer x.stdout.add(req.Stdout)()
	}
	if req.Stderr != nil && x.stderr != nil {
		defer x.stderr.add(req.Stderr)()
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	if req.Resize != nil && x.tty {
		go resizeLoop(r.nsctx(actx), x.task, req.Resize)
	}
	if req.Stdin != nil && x.stdinW != nil {
		if x.stdinOnce {
			defer r.closeStdin(x)
		}
		go r.feedStdin(actx, x, req.Stdin)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-x.done:
		return nil
	}
}

// feedStdin copies in to the container's stdin until in ends or ctx ends;
// with StdinOnce, the end of in closes the container's stdin.
func (r *Runtime) feedStdin(ctx context.Context, x *containerIO, in io.Reader) {
	buf := make([]byte, 32*1024)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if ctx.Err() != nil {
				return
			}
			if _, werr := x.stdinW.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && x.stdinOnce {
				r.closeStdin(x)
			}
			return
		}
	}
}

// closeStdin gives the container's stdin EOF (once).
func (r *Runtime) closeStdin(x *containerIO) {
	x.stdinOnceClose.Do(func() {
		_ = x.stdinW.Close() // the copier flushes and closes its FIFO end
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		defer cancel()
		if err := x.task.CloseIO(ctx, client.WithStdinCloser); err != nil && !errdefs.IsNotFound(err) {
			r.log.Warn("close container stdin", "id", x.id, "err", err)
		}
	})
}

// resizer is a process with a terminal.
type resizer interface {
	// Resize sets the terminal size of the process.
	Resize(ctx context.Context, w, h uint32) error
}

// resizeLoop applies terminal sizes until the channel closes or ctx ends.
func resizeLoop(ctx context.Context, p resizer, sizes <-chan TermSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-sizes:
			if !ok {
				return
			}
			_ = p.Resize(ctx, uint32(sz.Width), uint32(sz.Height))
		}
	}
}
