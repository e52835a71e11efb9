package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
)

// Stop sends the image's stop signal (SIGTERM by default), waits up to
// grace, then SIGKILLs every process of the container; it returns once the
// task exited and its output is in the log. Stopping a container that is not
// running does nothing.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	ctx = r.nsctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	t, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("containers: stop %s: %w", id, err)
	}
	st, err := t.Status(ctx)
	if err != nil {
		return fmt.Errorf("containers: stop %s: %w", id, err)
	}
	if st.Status == client.Stopped {
		return nil
	}
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	exitC, err := t.Wait(waitCtx)
	if err != nil {
		return fmt.Errorf("containers: stop %s: %w", id, err)
	}
	if grace > 0 {
		sig, err := client.GetStopSignal(ctx, c, syscall.SIGTERM)
		if err != nil {
			sig = syscall.SIGTERM
		}
		if err := t.Kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("containers: stop %s: %w", id, err)
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-exitC:
			r.waitOutput(id, outputDrainTimeout)
			return nil
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("containers: stop %s: %w", id, ctx.Err())
		}
	}
	if err := t.Kill(ctx, syscall.SIGKILL, client.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("containers: kill %s: %w", id, err)
	}
	select {
	case <-exitC:
		r.waitOutput(id, outputDrainTimeout)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("containers: stop %s: %w", id, ctx.Err())
	}
}

// runningTask returns the running task of container id.
func (r *Runtime) runningTask(ctx context.Context, id string) (client.Container, client.Task, error) {
	c, err := r.load(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	t, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil, nil, fmt.Errorf("containers: %s: %w", id, ErrNotRunning)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("containers: task %s: %w", id, err)
	}
	st, err := t.Status(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("containers: task %s: %w", id, err)
	}
	if st.Status != client.Running {
		return nil, nil, fmt.Errorf("containers: %s is %s: %w", id, st.Status, ErrNotRunning)
	}
	return c, t, nil
}

// Exec runs req.Cmd in the running container (with the container's
// process settings: user, env, cwd, capabilities) and returns its exit code.
// The end of req.Stdin closes the process's stdin; when ctx ends the process
// is killed.
func (r *Runtime) Exec(ctx context.Context, id string, req ExecRequest) (int, error) {
	ctx = r.nsctx(ctx)
	if len(req.Cmd) == 0 {
		return -1, fmt.Errorf("containers: exec %s: empty command", id)
	}
	c, t, err := r.runningTask(ctx, id)
	if err != nil {
		return -1, err
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return -1, fmt.Errorf("containers: exec %s: %w", id, err)
	}
	pspec := *spec.Process
	pspec.Args, pspec.Terminal = req.Cmd, req.TTY
	pspec.ConsoleSize = nil
	pspec.Env = slices.Clone(pspec.Env)
	if req.TTY && !slices.ContainsFunc(pspec.Env, func(e string) bool { return strings.HasPrefix(e, "TERM=") }) {
		pspec.Env = append(pspec.Env, "TERM=xterm")
	}

	bg := context.WithoutCancel(ctx)
	sctx, cancelStdin := context.WithCancel(bg)
	defer cancelStdin()
	ready := make(chan client.Process, 1)
	p, err := t.Exec(ctx, "exec-"+newID()[:24], &pspec, cio.NewCreator(r.execStreams(sctx, req, ready)...))
	if err != nil {
		return -1, fmt.Errorf("containers: exec %s: %w", id, err)
	}
	// The exit code goes back without waiting for the deletion: the
	// shim takes up to 10 s to delete a process whose output a child
	// left behind still holds open (containerd v2).
	defer func() {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if _, err := p.Delete(bg); err != nil && !errdefs.IsNotFound(err) {
				r.log.Warn("delete exec process", "id", id, "err", err)
			}
		}()
	}()
	waitCtx, cancelWait := context.WithCancel(bg)
	defer cancelWait()
	exitC, err := p.Wait(waitCtx)
	if err != nil {
		return -1, fmt.Errorf("containers: exec %s: %w", id, err)
	}
	if err := p.Start(ctx); err != nil {
		return -1, fmt.Errorf("containers: exec %s: %w", id, err)
	}
	ready <- p
	if req.Resize != nil && req.TTY {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go resizeLoop(rctx, p, req.Resize)
	}
	select {
	case es := <-exitC:
		if !waitTimeout(p.IO().Wait, outputDrainTimeout) {
			// A process left behind (`sh -c 'sleep 60 & echo hi'`) holds
			// the output open: stop copying to req's writers, which the
			// caller may close once Exec returned.
			p.IO().Cancel()
			_ = p.IO().Close()
			waitTimeout(p.IO().Wait, time.Second)
		}
		code, _, err := es.Result()
		if err != nil {
			return -1, fmt.Errorf("containers: exec %s: %w", id, err)
		}
		return int(code), nil
	case <-ctx.Done():
		_ = p.Kill(bg, syscall.SIGKILL)
		select {
		case <-exitC:
		case <-time.After(10 * time.Second):
		}
		return -1, fmt.Errorf("containers: exec %s: %w", id, ctx.Err())
	}
}

// execStreams connects an exec's FIFOs to req; the process arrives on ready
// once started, for closing its stdin at the end of req.Stdin.
func (r *Runtime) execStreams(ctx context.Context, req ExecRequest, ready <-chan client.Process) []cio.Opt {
	var stdin io.Reader
	if req.Stdin != nil {
		stdin = &stdinEOF{r: req.Stdin, ready: ready, ctx: ctx}
	}
	var stdout, stderr io.Writer = io.Discard, io.Discard
	if req.Stdout != nil {
		stdout = req.Stdout
	}
	if req.Stderr != nil {
		stderr = req.Stderr
	}
	opts := []cio.Opt{cio.WithFIFODir(r.cfg.fifoDir())}
	if req.TTY {
		return append(opts, cio.WithStreams(stdin, stdout, nil), cio.WithTerminal)
	}
	return append(opts, cio.WithStreams(stdin, stdout, stderr))
}

// stdinEOF reads an exec's stdin and closes the process's stdin at EOF.
type stdinEOF struct {
	r     io.Reader
	ready <-chan client.Process
	ctx   context.Context
	once  sync.Once
}

func (s *stdinEOF) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if errors.Is(err, io.EOF) {
		s.once.Do(func() {
			select {
			case p := <-s.ready:
				_ = p.CloseIO(s.ctx, client.WithStdinCloser)
			case <-s.ctx.Done():
			}
		})
	}
	return n, err
}
