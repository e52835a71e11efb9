package kubelet

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"

	"skiff/runtime/containers"
	"skiff/runtime/images"
	"skiff/runtime/podnet"
)

// callLog is one ordered log shared by every fake, to check orderings.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(format string, args ...any) {
	l.mu.Lock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *callLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// matching are the calls that start with prefix.
func (l *callLog) matching(prefix string) []string {
	var out []string
	for _, c := range l.all() {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// fakeRuntime keeps containers in memory; tests make them exit.
type fakeRuntime struct {
	log    *callLog
	clock  *testingclock.FakeClock
	events chan string

	mu        sync.Mutex
	next      int
	ctrs      map[string]*containers.ContainerStatus
	cfgs      map[string]containers.ContainerConfig
	exec      func(id string, cmd []string) (int, error)
	stopDelay time.Duration
	startErr  map[string]error // by container name
}

func newFakeRuntime(log *callLog, clk *testingclock.FakeClock) *fakeRuntime {
	return &fakeRuntime{log: log, clock: clk, events: make(chan string, 1000),
		ctrs: map[string]*containers.ContainerStatus{}, cfgs: map[string]containers.ContainerConfig{}, startErr: map[string]error{}}
}

func (r *fakeRuntime) Create(_ context.Context, cfg containers.ContainerConfig) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	id := fmt.Sprintf("c%03d", r.next)
	r.ctrs[id] = &containers.ContainerStatus{ID: id, PodUID: cfg.PodUID, PodNamespace: cfg.PodNamespace, PodName: cfg.PodName,
		Name: cfg.Name, Attempt: cfg.Attempt, Image: cfg.Image, ImageID: "sha256:" + cfg.Image, State: containers.StateCreated,
		CreatedAt: r.clock.Now(), LogPath: cfg.LogPath, Labels: cfg.Labels}
	r.cfgs[id] = cfg
	r.log.add("create %s/%s#%d", cfg.PodName, cfg.Name, cfg.Attempt)
	return id, nil
}

func (r *fakeRuntime) Start(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.ctrs[id]
	if !ok {
		return containers.ErrNotFound
	}
	r.log.add("start %s/%s#%d", c.PodName, c.Name, c.Attempt)
	if err := r.startErr[c.Name]; err != nil {
		c.State, c.ExitCode, c.Reason, c.FinishedAt = containers.StateExited, 128, "StartError", r.clock.Now()
		return err
	}
	c.State, c.StartedAt = containers.StateRunning, r.clock.Now()
	return nil
}

func (r *fakeRuntime) Stop(_ context.Context, id string, grace time.Duration) error {
	r.mu.Lock()
	c, ok := r.ctrs[id]
	delay := r.stopDelay
	r.mu.Unlock()
	if !ok {
		return containers.ErrNotFound
	}
	r.log.add("stop %s/%s#%d grace=%s", c.PodName, c.Name, c.Attempt, grace)
	time.Sleep(delay)
	r.mu.Lock()
	running := c.State == containers.StateRunning
	if running {
		c.State, c.ExitCode, c.Reason, c.FinishedAt = containers.StateExited, 137, "Error", r.clock.Now()
	}
	r.mu.Unlock()
	if running {
		r.events <- id
	}
	return nil
}

func (r *fakeRuntime) Remove(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.ctrs[id]; ok {
		r.log.add("remove %s/%s#%d", c.PodName, c.Name, c.Attempt)
	}
	delete(r.ctrs, id)
	return nil
}

func (r *fakeRuntime) Status(_ context.Context, id string) (containers.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.ctrs[id]
	if !ok {
		return containers.ContainerStatus{}, fmt.Errorf("%s: %w", id, containers.ErrNotFound)
	}
	return *c, nil
}

func (r *fakeRuntime) List(context.Context) ([]containers.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []containers.ContainerStatus
	for _, c := range r.ctrs {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (r *fakeRuntime) Events(ctx context.Context) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-r.events:
				select {
				case out <- id:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

func (r *fakeRuntime) Exec(ctx context.Context, id string, req containers.ExecRequest) (int, error) {
	r.mu.Lock()
	c, ok := r.ctrs[id]
	fn := r.exec
	r.mu.Unlock()
	if !ok {
		return -1, containers.ErrNotFound
	}
	r.log.add("exec %s/%s %s", c.PodName, c.Name, strings.Join(req.Cmd, " "))
	if fn == nil {
		return 0, nil
	}
	return fn(id, req.Cmd)
}

func (r *fakeRuntime) setExec(fn func(id string, cmd []string) (int, error)) {
	r.mu.Lock()
	r.exec = fn
	r.mu.Unlock()
}

// exit makes a running container exit with code (reason "OOMKilled" etc.).
func (r *fakeRuntime) exit(id string, code int32, reason string) {
	r.mu.Lock()
	c := r.ctrs[id]
	if reason == "" {
		reason = "Error"
		if code == 0 {
			reason = "Completed"
		}
	}
	c.State, c.ExitCode, c.Reason, c.FinishedAt = containers.StateExited, code, reason, r.clock.Now()
	r.mu.Unlock()
	r.events <- id
}

// find is the newest container of pod/name (nil when none).
func (r *fakeRuntime) find(pod, name string) *containers.ContainerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best *containers.ContainerStatus
	for _, c := range r.ctrs {
		if c.PodName == pod && c.Name == name && (best == nil || c.Attempt > best.Attempt) {
			cp := *c
			best = &cp
		}
	}
	return best
}

// add puts a container in the runtime as a previous run left it.
func (r *fakeRuntime) add(st containers.ContainerStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := st
	r.ctrs[st.ID] = &cp
}

func (r *fakeRuntime) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ctrs)
}

// fakeNetwork hands out addresses from 10.42.0.0/24.
type fakeNetwork struct {
	log  *callLog
	mu   sync.Mutex
	next int
	pods map[string]podnet.PodNetwork
}

func newFakeNetwork(log *callLog) *fakeNetwork {
	return &fakeNetwork{log: log, next: 10, pods: map[string]podnet.PodNetwork{}}
}

func (n *fakeNetwork) SetupPod(_ context.Context, req podnet.PodRequest) (podnet.PodNetwork, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.pods[req.UID]; ok {
		return p, nil
	}
	n.next++
	p := podnet.PodNetwork{UID: req.UID, NetNSPath: "/run/skiff/netns/" + req.UID, IP: net.IPv4(10, 42, 0, byte(n.next))}
	n.pods[req.UID] = p
	n.log.add("net setup %s", req.Name)
	return p, nil
}

func (n *fakeNetwork) TeardownPod(_ context.Context, uid string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.log.add("net teardown %s", uid)
	delete(n.pods, uid)
	return nil
}

func (n *fakeNetwork) Pods() ([]podnet.PodNetwork, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []podnet.PodNetwork
	for _, p := range n.pods {
		out = append(out, p)
	}
	return out, nil
}

func (n *fakeNetwork) has(uid string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.pods[uid]
	return ok
}

// fakeImages has every image except those listed as absent or failing.
type fakeImages struct {
	mu      sync.Mutex
	absent  map[string]bool
	failing map[string]error
	pulls   int
}

func (f *fakeImages) Ensure(_ context.Context, ref string, policy corev1.PullPolicy, _ []images.Credential) (images.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls++
	if err := f.failing[ref]; err != nil {
		return images.Image{}, fmt.Errorf("%w: %v", images.ErrPull, err)
	}
	if f.absent[ref] && policy == corev1.PullNever {
		return images.Image{}, images.ErrNotPresent
	}
	return images.Image{Ref: "docker.io/library/" + ref, ID: "sha256:" + ref}, nil
}

func (f *fakeImages) setFailing(ref string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.failing, ref)
		return
	}
	f.failing[ref] = err
}

// fakeVolumes records calls; PodUIDsOnDisk lists set-up pods.
type fakeVolumes struct {
	log  *callLog
	mu   sync.Mutex
	disk map[string]bool
}

func (v *fakeVolumes) Setup(_ context.Context, pod *corev1.Pod) (map[string]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.disk[string(pod.UID)] = true
	return map[string]string{}, nil
}

func (v *fakeVolumes) Mounts(*corev1.Pod, *corev1.Container, map[string]string) ([]containers.Mount, error) {
	return nil, nil
}

func (v *fakeVolumes) WritePodFiles(pod *corev1.Pod, podIP string, _ DNSConfig) error {
	v.log.add("files %s %s", pod.Name, podIP)
	return nil
}

func (v *fakeVolumes) Teardown(_ context.Context, uid string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.log.add("volumes teardown %s", uid)
	delete(v.disk, uid)
	return nil
}

func (v *fakeVolumes) PodUIDsOnDisk() ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for uid := range v.disk {
		out = append(out, uid)
	}
	return out, nil
}

func (v *fakeVolumes) has(uid string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.disk[uid]
}

// fakeRecorder keeps events as "Reason: message".
type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *fakeRecorder) Event(_ runtime.Object, _, reason, msg string) {
	r.mu.Lock()
	r.events = append(r.events, reason+": "+msg)
	r.mu.Unlock()
}

func (r *fakeRecorder) Eventf(o runtime.Object, t, reason, format string, args ...any) {
	r.Event(o, t, reason, fmt.Sprintf(format, args...))
}

func (r *fakeRecorder) AnnotatedEventf(o runtime.Object, _ map[string]string, t, reason, format string, args ...any) {
	r.Eventf(o, t, reason, format, args...)
}

func (r *fakeRecorder) has(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}
