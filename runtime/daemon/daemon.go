package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
)

// Config configures the embedded daemon.
type Config struct {
	// Dir holds the config, root, state and sockets
	// (<data-dir>/agent/containerd). The gRPC socket is Dir/containerd.sock,
	// so Dir must be short (unix socket paths are limited to 107 bytes).
	Dir    string
	Logger *slog.Logger
	// Stderr receives the daemon's output; nil means Dir/containerd.log.
	Stderr io.Writer
}

// Timings of the supervisor.
var (
	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
	minBackoff   = time.Second
	maxBackoff   = 30 * time.Second
	// stableRun resets the back-off once the daemon ran that long.
	stableRun = time.Minute
)

// defaultPath is used when the agent has no PATH.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Daemon states.
const (
	stateStarting int32 = iota
	stateReady
	stateFailed
)

// Daemon is a running embedded containerd, supervised until the context
// given to Start ends.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	paths paths
	// state is starting, ready or failed; it moves once, from starting.
	state atomic.Int32
	// pid is the current daemon process (0 while none runs).
	pid atomic.Int64
	// firstExit receives the exit of a daemon that never became ready.
	firstExit chan error
	done      chan struct{}
	// cancel ends the supervision (it also ends with Start's ctx).
	cancel context.CancelFunc
}

// Start links the skiff binary as containerd and its shim under cfg.Dir,
// writes the config, starts the daemon and waits until it answers. The
// daemon is restarted with back-off if it exits while ctx lives and is
// stopped (SIGTERM, SIGKILL after 10 s) when ctx ends; it is also killed if
// the agent process dies. Containers' shims survive both.
func Start(ctx context.Context, cfg Config) (*Daemon, error) {
	p, err := newPaths(cfg.Dir)
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, paths: p, firstExit: make(chan error, 1), done: make(chan struct{})}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.log = d.log.With("component", "containerd")
	for _, dir := range []string{p.dir, p.bin, p.root, p.state} {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
	}
	if err := linkSelf(p.bin); err != nil {
		return nil, err
	}
	if err := writeConfig(p); err != nil {
		return nil, err
	}
	began := time.Now()
	runCtx, cancel := context.WithCancel(ctx)
	d.cancel = cancel
	go d.supervise(runCtx)
	if err := d.waitReady(ctx); err != nil {
		cancel()
		<-d.done
		return nil, err
	}
	d.log.Info("containerd ready", "address", p.address, "took", time.Since(began).Round(time.Millisecond))
	return d, nil
}

// Address returns the gRPC socket path.
func (d *Daemon) Address() string { return d.paths.address }

// Done is closed once the daemon has stopped after the context ended.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// waitReady polls the socket with a Version call until it answers, the
// first daemon exits, or the start timeout passes.
func (d *Daemon) waitReady(ctx context.Context) error {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		select {
		case err := <-d.firstExit:
			return fmt.Errorf("daemon: containerd exited during start: %w%s", err, d.logTail())
		case <-ctx.Done():
			return fmt.Errorf("daemon: waiting for containerd: %w", ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("daemon: containerd not ready after %s: %w%s", startTimeout, lastErr, d.logTail())
		case <-tick.C:
			if lastErr = ping(ctx, d.paths.address); lastErr == nil {
				if d.state.CompareAndSwap(stateStarting, stateReady) {
					return nil
				}
				// The first daemon answered and exited at once.
				return fmt.Errorf("daemon: containerd exited during start: %w%s", <-d.firstExit, d.logTail())
			}
		}
	}
}

// ping asks the daemon for its version.
func ping(ctx context.Context, address string) error {
	if _, err := os.Stat(address); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := client.New(address, client.WithTimeout(2*time.Second))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Version(ctx)
	return err
}

// logTail returns the end of the daemon log file, for error messages.
func (d *Daemon) logTail() string {
	if d.cfg.Stderr != nil {
		return ""
	}
	b, err := os.ReadFile(d.paths.log)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return "\ncontainerd log (" + d.paths.log + "):\n" + strings.TrimSpace(string(b))
}

// supervise runs the daemon until ctx ends, restarting it with back-off.
// It holds its OS thread: the daemon's parent-death signal fires when the
// thread that started it exits, not the process.
func (d *Daemon) supervise(ctx context.Context) {
	runtime.LockOSThread()
	defer close(d.done)
	backoff := minBackoff
	for {
		began := time.Now()
		exited, stop, err := d.spawn()
		if err == nil {
			select {
			case err = <-exited:
				if err == nil {
					err = errors.New("exited with status 0")
				}
			case <-ctx.Done():
				stop()
				return
			}
		}
		if d.state.CompareAndSwap(stateStarting, stateFailed) {
			d.firstExit <- err
			return
		}
		if time.Since(began) > stableRun {
			backoff = minBackoff
		}
		d.log.Error("containerd exited; restarting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// spawn starts one daemon process. exited receives its wait result; stop
// terminates it (SIGTERM, then SIGKILL) and waits for it.
func (d *Daemon) spawn() (exited <-chan error, stop func(), err error) {
	var out io.Writer = d.cfg.Stderr
	var logFile *os.File
	if out == nil {
		logFile, err = os.OpenFile(d.paths.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("daemon: open log: %w", err)
		}
		out = logFile
	}
	cmd := exec.Command(d.paths.bin+"/"+DaemonName, "--config", d.paths.config)
	cmd.Dir = d.paths.dir
	cmd.Env = daemonEnv(os.Environ(), d.paths.bin)
	cmd.Stdout, cmd.Stderr = out, out
	// Shims inherit the daemon's output and outlive it: do not wait for
	// them to close a pipe.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	if logFile != nil {
		logFile.Close()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("daemon: start containerd: %w", err)
	}
	d.log.Debug("containerd started", "pid", cmd.Process.Pid)
	d.pid.Store(int64(cmd.Process.Pid))
	ch := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		d.pid.Store(0)
		ch <- err
	}()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-ch:
		case <-time.After(stopTimeout):
			d.log.Warn("containerd did not stop after SIGTERM; killing it", "pid", cmd.Process.Pid)
			_ = cmd.Process.Kill()
			<-ch
		}
	}
	return ch, stop, nil
}

// daemonEnv puts the linked binaries first in PATH, so the daemon runs our
// own shim (never an OS shim of another containerd version), and drops
// NOTIFY_SOCKET so the daemon does not notify systemd in the agent's name.
func daemonEnv(environ []string, bin string) []string {
	env := make([]string, 0, len(environ)+1)
	path := defaultPath
	for _, kv := range environ {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			if v := strings.TrimPrefix(kv, "PATH="); v != "" {
				path = v
			}
		case strings.HasPrefix(kv, "NOTIFY_SOCKET="):
		default:
			env = append(env, kv)
		}
	}
	return append(env, "PATH="+bin+":"+path)
}
