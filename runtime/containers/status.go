package containers

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
)

// Reasons for an exited container, as the kubelet reports them.
const (
	ReasonCompleted = "Completed"
	ReasonError     = "Error"
	ReasonOOMKilled = "OOMKilled"
	// ReasonUnknown is a container whose task was lost with its shim (power
	// loss, reboot, killed shim): how it ended is unknown.
	ReasonUnknown = "Unknown"
)

// ExitCodeUnknown is the exit code of a container whose task was lost, as
// the CRI plugin reports it.
const ExitCodeUnknown = 255

// Status reports what containerd knows about the container.
func (r *Runtime) Status(ctx context.Context, id string) (ContainerStatus, error) {
	ctx = r.nsctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return ContainerStatus{}, err
	}
	return r.status(ctx, c)
}

// List reports every container in the runtime's namespace.
func (r *Runtime) List(ctx context.Context) ([]ContainerStatus, error) {
	ctx = r.nsctx(ctx)
	cs, err := r.client.Containers(ctx)
	if err != nil {
		return nil, fmt.Errorf("containers: list: %w", err)
	}
	out := make([]ContainerStatus, 0, len(cs))
	for _, c := range cs {
		st, err := r.status(ctx, c)
		if errdefs.IsNotFound(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (r *Runtime) status(ctx context.Context, c client.Container) (ContainerStatus, error) {
	info, err := c.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return ContainerStatus{}, fmt.Errorf("containers: status %s: %w", c.ID(), err)
	}
	l := info.Labels
	attempt, _ := strconv.ParseUint(l[LabelAttempt], 10, 32)
	st := ContainerStatus{
		ID: c.ID(), PodUID: l[LabelPodUID], PodNamespace: l[LabelPodNamespace], PodName: l[LabelPodName],
		Name: l[LabelContainerName], Attempt: uint32(attempt), Image: info.Image, ImageID: l[labelImageID],
		CreatedAt: info.CreatedAt, StartedAt: parseTime(l[labelStartedAt]), LogPath: l[LabelLogPath],
		Labels: l, State: StateCreated,
	}
	t, err := c.Task(ctx, nil)
	switch {
	case errdefs.IsNotFound(err):
		r.statusWithoutTask(ctx, c, &st, l)
	case err != nil:
		return ContainerStatus{}, fmt.Errorf("containers: status %s: %w", c.ID(), err)
	default:
		ts, err := t.Status(ctx)
		if err != nil {
			return ContainerStatus{}, fmt.Errorf("containers: status %s: %w", c.ID(), err)
		}
		switch ts.Status {
		case client.Running, client.Paused, client.Pausing:
			st.State, st.Pid = StateRunning, t.Pid()
		case client.Created:
			st.State = StateCreated
		case client.Stopped:
			st.State, st.ExitCode, st.FinishedAt = StateExited, int32(ts.ExitStatus), ts.ExitTime
		default:
			st.State = StateUnknown
		}
	}
	if st.State == StateExited {
		st.Reason = r.exitReason(ctx, c, st.ExitCode, l)
	}
	return st, nil
}

// statusWithoutTask fills in an exit recorded in labels (the task is gone,
// e.g. after containerd lost it). A container that started but whose exit
// was never recorded lost its task with its shim: the shim was killed, or
// the machine lost power or rebooted, and containerd cleaned up after the
// dead shim when it started again (before anyone could watch). It exited
// then, how is unknown (ExitCodeUnknown, ReasonUnknown); that is recorded
// at once, so that the exit (and its time) stays the same from now on.
func (r *Runtime) statusWithoutTask(ctx context.Context, c client.Container, st *ContainerStatus, l map[string]string) {
	if l[labelStartedAt] == "" {
		return
	}
	if l[labelExitCode] == "" {
		lost := map[string]string{
			labelExitCode:   strconv.Itoa(ExitCodeUnknown),
			labelFinishedAt: time.Now().UTC().Format(time.RFC3339Nano),
			labelExitReason: ReasonUnknown,
		}
		if _, err := c.SetLabels(ctx, lost); err != nil && !errdefs.IsNotFound(err) {
			r.log.Warn("record the lost task of a container", "id", c.ID(), "err", err)
		}
		for k, v := range lost {
			l[k] = v
		}
	}
	code, err := strconv.ParseInt(l[labelExitCode], 10, 32)
	if err != nil {
		st.State = StateUnknown
		return
	}
	st.State, st.ExitCode, st.FinishedAt = StateExited, int32(code), parseTime(l[labelFinishedAt])
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// exitReason is "OOMKilled" when an OOM kill was seen (event, label or the
// cgroup's oom_kill counter), else "Completed" or "Error".
func (r *Runtime) exitReason(ctx context.Context, c client.Container, code int32, l map[string]string) string {
	r.mu.Lock()
	oom := r.oom[c.ID()]
	r.mu.Unlock()
	if oom || l[labelOOM] == "true" || (code != 0 && r.cgroupOOMKilled(ctx, c)) {
		return ReasonOOMKilled
	}
	if reason := l[labelExitReason]; reason != "" {
		return reason
	}
	if code == 0 {
		return ReasonCompleted
	}
	return ReasonError
}

// cgroupOOMKilled reads the oom_kill counter of the container's memory
// cgroup (it stays until the task is deleted).
func (r *Runtime) cgroupOOMKilled(ctx context.Context, c client.Container) bool {
	spec, err := c.Spec(ctx)
	if err != nil || spec.Linux == nil || spec.Linux.CgroupsPath == "" || strings.Contains(spec.Linux.CgroupsPath, ":") {
		return false
	}
	p := spec.Linux.CgroupsPath
	for _, f := range []string{
		filepath.Join("/sys/fs/cgroup/memory", p, "memory.oom_control"), // v1
		filepath.Join("/sys/fs/cgroup", p, "memory.events"),             // v2
	} {
		if n, ok := readCounter(f, "oom_kill"); ok {
			return n > 0
		}
	}
	return false
}

// readCounter reads "<key> <n>" from a cgroup stat file.
func readCounter(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// recordExit stores the exit (and an OOM kill) in the container's labels,
// so that it is known after the task is gone or the agent restarted.
func (r *Runtime) recordExit(id string, st client.ExitStatus) {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return
	}
	labels := map[string]string{
		labelExitCode:   strconv.FormatUint(uint64(st.ExitCode()), 10),
		labelFinishedAt: st.ExitTime().UTC().Format(time.RFC3339Nano),
	}
	r.mu.Lock()
	oom := r.oom[id]
	r.mu.Unlock()
	if oom || (st.ExitCode() != 0 && r.cgroupOOMKilled(ctx, c)) {
		labels[labelOOM] = "true"
	}
	if _, err := c.SetLabels(ctx, labels); err != nil && !errdefs.IsNotFound(err) {
		r.log.Warn("record container exit", "id", id, "err", err)
	}
}
