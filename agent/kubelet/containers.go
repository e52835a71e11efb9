package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"skiff/agent/podenv"
	"skiff/agent/probe"
	"skiff/agent/volumes"
	"skiff/runtime/containers"
	"skiff/runtime/images"
	"skiff/runtime/podnet"
)

// Waiting reasons, as upstream.
const (
	reasonCrashLoopBackOff      = "CrashLoopBackOff"
	reasonContainerCreating     = "ContainerCreating"
	reasonPodInitializing       = "PodInitializing"
	reasonCreateContainerConfig = "CreateContainerConfigError"
	reasonCreateContainer       = "CreateContainerError"
)

// labelHash is the container label holding a hash of its spec: a running
// container whose spec changed (a new image) is restarted, as upstream.
const labelHash = "io.skiff.container.hash"

func specHash(c *corev1.Container) string {
	// Resources are left out, as upstream's hash: a resize is applied in
	// place (resize.go), not by a restart for a changed definition.
	c = c.DeepCopy()
	c.Resources, c.ResizePolicy = corev1.ResourceRequirements{}, nil
	b, _ := json.Marshal(c)
	h := fnv.New32a()
	h.Write(b)
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

func podRequest(pod *corev1.Pod) podnet.PodRequest {
	return podnet.PodRequest{UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name}
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// runContainers performs the kills asked by probes, then runs init
// containers in order and, once they are done, the app containers.
func (w *podWorker) runContainers(ctx context.Context, pod *corev1.Pod) {
	w.handleKills(ctx, pod)
	w.syncResize(ctx, pod)    // resize.go
	w.syncEphemeral(ctx, pod) // ephemeral.go
	if w.syncInit(ctx, pod) {
		w.syncSidecars(ctx, pod)
		for i := range pod.Spec.Containers {
			if ctx.Err() != nil {
				return
			}
			w.syncContainer(ctx, pod, &pod.Spec.Containers[i], pod.Spec.RestartPolicy)
		}
	}
	w.ensureProbes(ctx, pod)
}

// syncInit runs the init containers one after the other and reports
// whether all are done (sidecars started, the others exited 0).
func (w *podWorker) syncInit(ctx context.Context, pod *corev1.Pod) bool {
	if w.initialized {
		return true
	}
	if w.initFailed {
		return false
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		last := w.last(c.Name)
		if isSidecar(c) {
			if last == nil || last.exited() {
				w.syncContainer(ctx, pod, c, corev1.RestartPolicyAlways)
				last = w.last(c.Name)
			}
			if last == nil || !last.running() || !w.startedOK(last, c) {
				return false
			}
			continue
		}
		switch {
		case last == nil:
			w.syncContainer(ctx, pod, c, pod.Spec.RestartPolicy)
			return false
		case !last.exited():
			return false
		case last.status.ExitCode == 0:
			continue
		case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
			w.setField(func() { w.initFailed = true })
			return false
		default:
			w.syncContainer(ctx, pod, c, corev1.RestartPolicyOnFailure)
			return false
		}
	}
	w.setField(func() { w.initialized = true })
	return true
}

// syncSidecars keeps restartable init containers running after init.
func (w *podWorker) syncSidecars(ctx context.Context, pod *corev1.Pod) {
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
			w.syncContainer(ctx, pod, c, corev1.RestartPolicyAlways)
		}
	}
}

// syncContainer starts a container that never ran, and restarts an exited
// one when policy says so, after its back-off.
func (w *podWorker) syncContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, policy corev1.RestartPolicy) {
	last := w.last(c.Name)
	if last == nil {
		w.startContainer(ctx, pod, c)
		return
	}
	if last.running() && last.hash != "" && last.hash != specHash(c) {
		w.k.event(pod, corev1.EventTypeNormal, "Killing", "Container %s definition changed, will be restarted", c.Name)
		w.stopProbes(last.id)
		if err := w.k.cfg.Runtime.Stop(ctx, last.id, podGrace(pod)); err != nil {
			w.k.log.Warn("stop changed container", "pod", podKey(pod), "container", c.Name, "err", err)
			return
		}
		w.refreshOne(ctx, last)
		w.startContainer(ctx, pod, c)
		return
	}
	if !last.exited() {
		return
	}
	if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && last.status.ExitCode == 0) {
		return
	}
	key := string(pod.UID) + "/" + c.Name
	if in, delay, remaining := w.k.backoff.inBackoffSince(key, last.status.FinishedAt); in {
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.Name, podRef(pod))
		w.setField(func() { w.waiting[c.Name] = waitState{reason: reasonCrashLoopBackOff, message: msg} })
		w.k.event(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.Name, podRef(pod))
		w.wakeIn(remaining)
		return
	}
	w.k.backoff.next(key)
	w.startContainer(ctx, pod, c)
}

// startContainer makes and starts the next attempt of a container.
func (w *podWorker) startContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container) {
	k := w.k
	attempt := uint32(0)
	if last := w.last(c.Name); last != nil {
		attempt = last.attempt + 1
	}
	fail := func(reason, msg string) {
		w.setField(func() { w.waiting[c.Name] = waitState{reason: reason, message: msg} })
	}
	// Image volumes first, as upstream pulls them before the container's
	// own image (imagevolumes.go).
	err := w.ensureImageVolumes(ctx, pod, c)
	var img images.Image
	if err == nil {
		img, err = w.ensureImage(ctx, pod, c)
	}
	if err != nil {
		var pe *pullError
		if errors.As(err, &pe) {
			fail(pe.reason, pe.message)
		}
		return
	}
	cc, err := w.containerConfig(ctx, pod, c, attempt)
	if err == nil {
		err = w.withPodRuntime(pod, c, &cc) // runtimeclass.go
	}
	if err != nil {
		fail(reasonCreateContainerConfig, err.Error())
		k.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return
	}
	cc.Image = img.Ref
	if cc.Image == "" {
		cc.Image = c.Image
	}
	id, err := k.cfg.Runtime.Create(ctx, cc)
	if err != nil {
		fail(reasonCreateContainer, err.Error())
		k.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return
	}
	rec := &ctrRecord{id: id, name: c.Name, attempt: attempt, logPath: cc.LogPath, hash: cc.Labels[labelHash],
		status: containers.ContainerStatus{ID: id, Name: c.Name, Attempt: attempt, Image: cc.Image, ImageID: img.ID, State: containers.StateCreated, CreatedAt: k.now()}}
	k.trackContainer(id, pod.UID)
	w.setField(func() {
		w.ctrs[c.Name] = append(w.ctrs[c.Name], rec)
		delete(w.waiting, c.Name)
	})
	k.event(pod, corev1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	if err := k.cfg.Runtime.Start(ctx, id); err != nil {
		k.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		now := k.now()
		w.setField(func() {
			rec.startFailed = true
			rec.termMsg, rec.termRead = err.Error(), true // as the runtime's message upstream
			rec.status.State, rec.status.ExitCode, rec.status.Reason = containers.StateExited, 128, "StartError"
			rec.status.StartedAt, rec.status.FinishedAt = now, now
		})
		w.prune(ctx, c.Name)
		w.kick() // no exit event comes: decide the restart on the next sync
		return
	}
	k.event(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	w.refreshOne(ctx, rec)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		w.postStart(ctx, pod, c, rec)
	}
	w.prune(ctx, c.Name)
}

// postStart runs the postStart hook; a failure kills the container.
func (w *podWorker) postStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, rec *ctrRecord) {
	grace := podGrace(pod)
	res, msg := probe.Do(ctx, probe.FromHandler(c.Lifecycle.PostStart), w.target(c, rec), w.k.cfg.Runtime, grace)
	if res == probe.Success {
		return
	}
	w.k.event(pod, corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %s", msg)
	if err := w.k.cfg.Runtime.Stop(ctx, rec.id, grace); err != nil {
		w.k.log.Warn("stop after postStart failure", "pod", podKey(pod), "container", c.Name, "err", err)
	}
	w.refreshOne(ctx, rec)
}

// prune removes attempts older than the previous one (kept for logs).
func (w *podWorker) prune(ctx context.Context, name string) {
	rs := w.ctrs[name]
	if len(rs) <= 2 {
		return
	}
	old := rs[:len(rs)-2]
	for _, r := range old {
		w.removeRecord(ctx, r)
	}
	w.setField(func() { w.ctrs[name] = append([]*ctrRecord(nil), rs[len(rs)-2:]...) })
}

func (w *podWorker) removeRecord(ctx context.Context, r *ctrRecord) {
	if err := w.k.cfg.Runtime.Remove(ctx, r.id); err != nil {
		w.k.log.Warn("remove container", "id", r.id, "err", err)
	}
	if r.logPath != "" && strings.HasPrefix(r.logPath, w.k.cfg.LogDir) {
		_ = os.Remove(r.logPath)
		_ = os.Remove(terminationFile(r.logPath))
	}
	w.k.forgetContainer(r.id)
}

// logDir is upstream's pod log directory: <root>/<ns>_<pod>_<uid>.
func (k *Kubelet) logDir(pod *corev1.Pod) string {
	return filepath.Join(k.cfg.LogDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// containerConfig assembles the runtime's view of a container.
func (w *podWorker) containerConfig(ctx context.Context, pod *corev1.Pod, c *corev1.Container, attempt uint32) (containers.ContainerConfig, error) {
	k := w.k
	env, err := k.cfg.Env(ctx, pod, c, w.podIP, k.cfg.NodeIP)
	if err != nil {
		return containers.ContainerConfig{}, fmt.Errorf("environment of %s: %w", c.Name, err)
	}
	var mounts []containers.Mount
	if em, ok := k.cfg.Volumes.(EnvMounter); ok {
		mounts, err = em.MountsWithEnv(pod, c, w.vols, env)
	} else {
		mounts, err = k.cfg.Volumes.Mounts(pod, c, w.vols)
	}
	if err != nil {
		return containers.ContainerConfig{}, fmt.Errorf("mounts of %s: %w", c.Name, err)
	}
	dir := filepath.Join(k.logDir(pod), c.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return containers.ContainerConfig{}, fmt.Errorf("log dir: %w", err)
	}
	logPath := filepath.Join(dir, strconv.FormatUint(uint64(attempt), 10)+".log")
	if m, ok, err := terminationMount(c, logPath); err != nil {
		return containers.ContainerConfig{}, fmt.Errorf("termination message file of %s: %w", c.Name, err)
	} else if ok {
		mounts = append(mounts, m)
	}
	hostname, _ := volumes.PodHostname(pod, k.cfg.ClusterDomain)
	return containers.ContainerConfig{
		PodUID: string(pod.UID), PodNamespace: pod.Namespace, PodName: pod.Name,
		Name: c.Name, Attempt: attempt, Image: c.Image,
		// $(VAR) in command and args expands from the container's
		// environment, as upstream's ExpandContainerCommandAndArgs.
		Command: podenv.ExpandCommand(c.Command, env), Args: podenv.ExpandCommand(c.Args, env),
		Env: env, WorkingDir: c.WorkingDir,
		Mounts: mounts, Hostname: hostname,
		NetNSPath: w.netnsPath, HostNetwork: pod.Spec.HostNetwork,
		CgroupParent: k.cfg.QoS.CgroupParent(k.cfg.CgroupRoot, pod),
		Resources:    k.cfg.QoS.ContainerResources(pod, c),
		Security:     k.cfg.QoS.Security(pod, c),
		TTY:          c.TTY, Stdin: c.Stdin, StdinOnce: c.StdinOnce,
		LogPath: logPath,
		Labels:  map[string]string{labelHash: specHash(c)},
	}, nil
}
