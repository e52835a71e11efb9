package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// Labels the runtime stores on every container.
const (
	LabelPodUID        = "io.skiff.pod.uid"
	LabelPodNamespace  = "io.skiff.pod.namespace"
	LabelPodName       = "io.skiff.pod.name"
	LabelContainerName = "io.skiff.container.name"
	LabelAttempt       = "io.skiff.container.attempt"
	LabelLogPath       = "io.skiff.log-path"

	// Internal labels: how stdio was set up, the image ID, and what the
	// runtime learnt about the container's life (kept across restarts).
	labelImageID    = "io.skiff.image-id"
	labelTTY        = "io.skiff.tty"
	labelStdin      = "io.skiff.stdin"
	labelStdinOnce  = "io.skiff.stdin-once"
	labelStartedAt  = "io.skiff.started-at"
	labelFinishedAt = "io.skiff.finished-at"
	labelExitCode   = "io.skiff.exit-code"
	labelOOM        = "io.skiff.oom-killed"
	labelExitReason = "io.skiff.exit-reason"
)

// ErrNotRunning is returned (wrapped) by Attach and Exec when the
// container's task is not running.
var ErrNotRunning = errors.New("container not running")

// Defaults for Config fields left empty.
const (
	DefaultNamespace   = "skiff"
	DefaultSnapshotter = "overlayfs"
	DefaultRuntimeName = "io.containerd.runc.v2"
	DefaultLogMaxSize  = 10 << 20
	DefaultLogMaxFiles = 5
)

// Runtime runs containers in containerd.
type Runtime struct {
	cfg    Config
	client *client.Client
	log    *slog.Logger
	// swapAccounting: cgroup v1 memory.memsw exists, so memory limits also
	// cap swap.
	swapAccounting bool

	ctx    context.Context // namespaced; ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	mu   sync.Mutex
	ios  map[string]*containerIO // containers whose output is being copied
	oom  map[string]bool         // OOM kills seen in events
	subs map[chan string]struct{}
}

// New connects to containerd, re-attaches to the output of every running
// container (so logs continue after an agent restart) and starts watching
// task events.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Snapshotter == "" {
		cfg.Snapshotter = DefaultSnapshotter
	}
	if cfg.RuntimeName == "" {
		cfg.RuntimeName = DefaultRuntimeName
	}
	if cfg.LogMaxSize == 0 {
		cfg.LogMaxSize = DefaultLogMaxSize
	}
	if cfg.LogMaxFiles == 0 {
		cfg.LogMaxFiles = DefaultLogMaxFiles
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StateDir == "" {
		return nil, errors.New("containers: StateDir is required")
	}
	if err := os.MkdirAll(cfg.fifoDir(), 0o700); err != nil {
		return nil, fmt.Errorf("containers: state dir: %w", err)
	}
	c, err := client.New(cfg.Address, client.WithDefaultNamespace(cfg.Namespace),
		client.WithDefaultRuntime(cfg.RuntimeName))
	if err != nil {
		return nil, fmt.Errorf("containers: connect %s: %w", cfg.Address, err)
	}
	pingCtx, cancelPing := context.WithTimeout(ctx, 30*time.Second)
	defer cancelPing()
	if _, err := c.Version(namespaces.WithNamespace(pingCtx, cfg.Namespace)); err != nil {
		c.Close()
		return nil, fmt.Errorf("containers: containerd at %s: %w", cfg.Address, err)
	}
	rctx, cancel := context.WithCancel(namespaces.WithNamespace(context.Background(), cfg.Namespace))
	r := &Runtime{
		cfg: cfg, client: c, log: cfg.Logger,
		swapAccounting: fileExists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"),
		ctx:            rctx, cancel: cancel,
		ios: map[string]*containerIO{}, oom: map[string]bool{}, subs: map[chan string]struct{}{},
	}
	r.wg.Add(1)
	go r.watchEvents()
	if err := r.reattachAll(ctx); err != nil {
		r.Close()
		return nil, err
	}
	r.removeStaleFIFOs(ctx)
	return r, nil
}

// removeStaleFIFOs removes the stdio FIFO directories no task uses: those
// of tasks lost with their shims while no runtime ran (removing such a
// container finds no task whose IO it could close). It runs before the
// runtime starts any task.
func (r *Runtime) removeStaleFIFOs(ctx context.Context) {
	ctx = r.nsctx(ctx)
	entries, err := os.ReadDir(r.cfg.fifoDir())
	if err != nil || len(entries) == 0 {
		return
	}
	cs, err := r.client.Containers(ctx)
	if err != nil {
		return // keep everything rather than guess
	}
	inUse := map[string]bool{}
	for _, c := range cs {
		t, err := c.Task(ctx, cio.Load)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil || t.IO() == nil {
			return // a task whose FIFOs are unknown: keep everything
		}
		cfg := t.IO().Config()
		for _, p := range []string{cfg.Stdin, cfg.Stdout, cfg.Stderr} {
			if p != "" {
				inUse[filepath.Dir(p)] = true
			}
		}
	}
	for _, e := range entries {
		dir := filepath.Join(r.cfg.fifoDir(), e.Name())
		if inUse[dir] {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			r.log.Warn("remove stale stdio FIFOs", "dir", dir, "err", err)
		}
	}
}

func (cfg Config) fifoDir() string { return filepath.Join(cfg.StateDir, "fifo") }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Client returns the containerd client (for image management).
func (r *Runtime) Client() *client.Client { return r.client }

// Close stops copying output and watching events. Containers keep running
// and their stdio FIFOs stay in place for the next Runtime to re-attach.
// Closing twice is harmless.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() { r.closeErr = r.close() })
	return r.closeErr
}

func (r *Runtime) close() error {
	r.cancel()
	r.mu.Lock()
	ios := make([]*containerIO, 0, len(r.ios))
	for _, cio := range r.ios {
		ios = append(ios, cio)
	}
	r.mu.Unlock()
	for _, cio := range ios {
		cio.detach()
	}
	r.wg.Wait()
	return r.client.Close()
}

// nsctx puts the runtime's namespace on a caller's context.
func (r *Runtime) nsctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.cfg.Namespace)
}

// load finds a container, mapping "not found" to ErrNotFound.
func (r *Runtime) load(ctx context.Context, id string) (client.Container, error) {
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("containers: %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("containers: load %s: %w", id, err)
	}
	return c, nil
}

func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// containerLabels are the labels stored on a new container.
func containerLabels(cc ContainerConfig, imageID string) map[string]string {
	l := make(map[string]string, len(cc.Labels)+10)
	for k, v := range cc.Labels {
		l[k] = v
	}
	l[LabelPodUID] = cc.PodUID
	l[LabelPodNamespace] = cc.PodNamespace
	l[LabelPodName] = cc.PodName
	l[LabelContainerName] = cc.Name
	l[LabelAttempt] = strconv.FormatUint(uint64(cc.Attempt), 10)
	l[LabelLogPath] = cc.LogPath
	l[labelImageID] = imageID
	l[labelTTY] = strconv.FormatBool(cc.TTY)
	l[labelStdin] = strconv.FormatBool(cc.Stdin)
	l[labelStdinOnce] = strconv.FormatBool(cc.StdinOnce)
	return l
}

// Create makes the container (snapshot, spec, labels) without starting it.
func (r *Runtime) Create(ctx context.Context, cc ContainerConfig) (string, error) {
	ctx = r.nsctx(ctx)
	img, err := r.client.GetImage(ctx, cc.Image)
	if err != nil {
		return "", fmt.Errorf("containers: image %s: %w", cc.Image, err)
	}
	unpacked, err := img.IsUnpacked(ctx, r.cfg.Snapshotter)
	if err != nil {
		return "", fmt.Errorf("containers: image %s: %w", cc.Image, err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, r.cfg.Snapshotter); err != nil {
			return "", fmt.Errorf("containers: unpack %s: %w", cc.Image, err)
		}
	}
	imgSpec, err := img.Spec(ctx)
	if err != nil {
		return "", fmt.Errorf("containers: image %s config: %w", cc.Image, err)
	}
	cfgDesc, err := img.Config(ctx)
	if err != nil {
		return "", fmt.Errorf("containers: image %s config: %w", cc.Image, err)
	}
	id := newID()
	runtimeName := r.cfg.RuntimeName
	if cc.RuntimeName != "" {
		runtimeName = cc.RuntimeName
	}
	_, err = r.client.NewContainer(ctx, id,
		client.WithContainerLabels(containerLabels(cc, cfgDesc.Digest.String())),
		client.WithImage(img),
		client.WithImageStopSignal(img, "SIGTERM"),
		client.WithSnapshotter(r.cfg.Snapshotter),
		client.WithNewSnapshot(id, img),
		client.WithRuntime(runtimeName, nil),
		client.WithNewSpec(specOptions(img, imgSpec.Config, cc, id, r.swapAccounting)...),
	)
	if err != nil {
		return "", fmt.Errorf("containers: create %s/%s %s: %w", cc.PodName, cc.Name, id, err)
	}
	return id, nil
}

// Remove deletes the task (killing it if needed), the container and its
// snapshot. Removing an unknown container is not an error.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	ctx = r.nsctx(ctx)
	c, err := r.load(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := r.deleteTask(ctx, c); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.oom, id)
	r.mu.Unlock()
	err = c.Delete(ctx, client.WithSnapshotCleanup)
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("containers: delete %s: %w", id, err)
	}
	return nil
}

// deleteTask kills and deletes c's task, waits for its output copy to end
// and removes its FIFOs.
func (r *Runtime) deleteTask(ctx context.Context, c client.Container) error {
	t, err := c.Task(ctx, cio.Load)
	if errdefs.IsNotFound(err) {
		r.waitOutput(c.ID(), 0)
		return nil
	}
	if err != nil {
		return fmt.Errorf("containers: task %s: %w", c.ID(), err)
	}
	if _, err := t.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("containers: delete task %s: %w", c.ID(), err)
	}
	r.waitOutput(c.ID(), outputDrainTimeout)
	if tio := t.IO(); tio != nil {
		_ = tio.Close() // removes the FIFOs
	}
	return nil
}
