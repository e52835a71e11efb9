package kubelet

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"skiff/runtime/containers"
)

// ctrRecord is one container the kubelet made for a pod (one attempt).
type ctrRecord struct {
	id      string
	name    string
	attempt uint32
	logPath string
	hash    string // labelHash of the spec it was made from
	// startFailed: Start returned an error; the container counts as exited.
	startFailed bool
	status      containers.ContainerStatus
	// termMsg is state.terminated.message, read once termRead is set
	// (after the attempt exited; see termination.go).
	termMsg  string
	termRead bool
}

func (r *ctrRecord) running() bool { return r.status.State == containers.StateRunning }
func (r *ctrRecord) exited() bool  { return r.status.State == containers.StateExited }

// waitState is why a container is not running (image pull, back-off…).
type waitState struct{ reason, message string }

// probeState is the probe verdicts of one running container.
type probeState struct {
	cancel  context.CancelFunc
	ready   bool // readiness (true when no readiness probe)
	started bool // startup (true when no startup probe)
	kill    string
}

// podWorker owns one pod: a goroutine syncs it on every kick. Fields below
// mu are written by the worker goroutine under mu (and read by it without),
// and read by lookups and probe callbacks under mu.
type podWorker struct {
	k       *Kubelet
	uid     types.UID
	static  bool
	kickCh  chan struct{}
	stopped chan struct{}

	mu          sync.Mutex
	pod         *corev1.Pod
	removed     bool
	ctrs        map[string][]*ctrRecord // by container name, ascending attempt
	netnsPath   string
	podIP       string
	netReady    bool
	vols        map[string]string
	volsAt      time.Time
	filesOK     bool
	waiting     map[string]waitState
	probes      map[string]*probeState // by container ID
	initialized bool
	initFailed  bool
	terminal    bool
	evicted     string // eviction message once the pod is chosen
	failReason  string // "Evicted" or "DeadlineExceeded" with evicted
	startTime   *metav1.Time
	lastStatus  *corev1.PodStatus
	wakeAt      time.Time
	// runtimeName is the containerd runtime of the pod's RuntimeClass,
	// once handlerOK (runtimeclass.go).
	runtimeName string
	handlerOK   bool
	resize      resizeState // resize.go
	// imageVolumeIDs are the image IDs of the mounted image volumes, by
	// volume name, kept from image GC (imagevolumes.go).
	imageVolumeIDs map[string]string
}

func newPodWorker(k *Kubelet, pod *corev1.Pod, static bool, adopted []*ctrRecord) *podWorker {
	w := &podWorker{
		k: k, uid: pod.UID, static: static, pod: pod,
		kickCh:  make(chan struct{}, 1),
		stopped: make(chan struct{}),
		ctrs:    map[string][]*ctrRecord{},
		waiting: map[string]waitState{},
		probes:  map[string]*probeState{},
	}
	for _, r := range adopted {
		w.ctrs[r.name] = append(w.ctrs[r.name], r)
	}
	for name := range w.ctrs {
		rs := w.ctrs[name]
		sort.Slice(rs, func(i, j int) bool { return rs[i].attempt < rs[j].attempt })
	}
	for _, c := range pod.Spec.Containers {
		if len(w.ctrs[c.Name]) > 0 {
			w.initialized = true
		}
	}
	if pod.Status.StartTime != nil {
		st := *pod.Status.StartTime
		w.startTime = &st
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		w.terminal = true
		w.initialized = true
	}
	w.kickCh <- struct{}{}
	return w
}

func (w *podWorker) start(ctx context.Context) {
	go w.loop(ctx)
}

func (w *podWorker) kick() {
	select {
	case w.kickCh <- struct{}{}:
	default:
	}
}

// wakeIn kicks the worker after d (once the back-off ends).
func (w *podWorker) wakeIn(d time.Duration) {
	at := w.k.now().Add(d)
	w.mu.Lock()
	if !w.wakeAt.IsZero() && w.wakeAt.After(w.k.now()) && !w.wakeAt.After(at) {
		w.mu.Unlock()
		return
	}
	w.wakeAt = at
	w.mu.Unlock()
	ch := w.k.clock.After(d)
	go func() {
		select {
		case <-ch:
			w.kick()
		case <-w.stopped:
		}
	}()
}

func (w *podWorker) setPod(pod *corev1.Pod) {
	w.mu.Lock()
	if !w.removed {
		w.pod = pod
	}
	w.mu.Unlock()
	w.kick()
}

// markRemoved says the pod left its source (API or manifests folder).
func (w *podWorker) markRemoved(last *corev1.Pod) {
	w.mu.Lock()
	w.removed = true
	if last != nil {
		w.pod = last
	}
	w.mu.Unlock()
	w.kick()
}

func (w *podWorker) snapshot() (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.removed
}

func (w *podWorker) loop(ctx context.Context) {
	defer close(w.stopped)
	defer w.stopProbes("")
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kickCh:
		}
		if w.sync(ctx) {
			return
		}
	}
}

// sync brings the pod one step closer to its spec and reports whether the
// worker is finished (the pod was terminated and cleaned up).
func (w *podWorker) sync(ctx context.Context) bool {
	pod, removed := w.snapshot()
	if removed || pod.DeletionTimestamp != nil {
		return w.terminate(ctx, pod, removed)
	}
	w.refresh(ctx)
	w.admit(pod)
	if w.evicted == "" && !w.terminal && w.pastDeadline(pod) {
		w.setField(func() {
			w.evicted, w.failReason = "Pod was active on the node longer than the specified deadline", "DeadlineExceeded"
		})
	}
	if w.evicted != "" && !w.terminal {
		w.syncEvicted(ctx, pod)
	}
	if w.terminal && len(w.ctrs) == 0 && isTerminalPhase(pod.Status.Phase) && w.getLast() == nil {
		return false // finished before a restart that lost its containers: keep the API's status
	}
	if !w.terminal {
		if w.startTime == nil {
			w.setField(func() { t := metav1.NewTime(w.k.now()).Rfc3339Copy(); w.startTime = &t })
		}
		if err := w.prepare(ctx, pod); err == nil {
			w.runContainers(ctx, pod)
		} else if ctx.Err() == nil {
			w.k.log.Warn("pod not ready to start containers", "pod", podKey(pod), "err", err)
			w.wakeIn(w.k.cfg.ResyncInterval)
		}
	}
	status := w.computeStatus(pod)
	if !w.terminal && (status.Phase == corev1.PodSucceeded || status.Phase == corev1.PodFailed) {
		w.finish(ctx, pod)
		status = w.computeStatus(pod)
	}
	w.writeStatus(ctx, pod, status)
	return false
}

func (w *podWorker) setField(f func()) {
	w.mu.Lock()
	f()
	w.mu.Unlock()
}

// refresh reads the runtime state of every container of the pod.
func (w *podWorker) refresh(ctx context.Context) {
	for _, rs := range w.ctrs {
		for _, r := range rs {
			w.refreshOne(ctx, r)
		}
	}
}

func (w *podWorker) refreshOne(ctx context.Context, r *ctrRecord) {
	st, err := w.k.cfg.Runtime.Status(ctx, r.id)
	switch {
	case errors.Is(err, containers.ErrNotFound):
		st = r.status
		if st.State != containers.StateExited {
			st.State = containers.StateExited
			st.ExitCode = 137
			st.Reason = "ContainerStatusUnknown"
			st.FinishedAt = w.k.now()
		}
	case err != nil:
		return
	}
	if r.startFailed && st.State == containers.StateCreated {
		return // keeps the StartError state made when Start failed
	}
	w.setField(func() { r.status = st })
	w.noteTermination(ctx, r)
}

// last is the newest attempt of a container.
func (w *podWorker) last(name string) *ctrRecord {
	rs := w.ctrs[name]
	if len(rs) == 0 {
		return nil
	}
	return rs[len(rs)-1]
}

// prepare gives the pod its network, volumes and files.
func (w *podWorker) prepare(ctx context.Context, pod *corev1.Pod) error {
	k := w.k
	if err := w.resolveRuntimeHandler(ctx, pod); err != nil {
		return err
	}
	if !w.netReady {
		if pod.Spec.HostNetwork {
			w.setField(func() { w.podIP, w.netReady = k.cfg.NodeIP, true })
		} else {
			pn, err := k.cfg.Network.SetupPod(ctx, podRequest(pod))
			if err != nil {
				k.event(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
				return err
			}
			ip := ""
			if pn.IP != nil {
				ip = pn.IP.String()
			}
			w.setField(func() { w.netnsPath, w.podIP, w.netReady = pn.NetNSPath, ip, true })
		}
	}
	if w.vols == nil || k.now().Sub(w.volsAt) >= time.Minute {
		vols, err := k.cfg.Volumes.Setup(ctx, pod)
		if err != nil {
			k.event(pod, corev1.EventTypeWarning, "FailedMount", "Unable to mount volumes for pod %s: %v", podKey(pod), err)
			return err
		}
		w.setField(func() { w.vols, w.volsAt = vols, k.now() })
	}
	if !w.filesOK {
		dns := DNSConfig{ClusterDNS: k.cfg.ClusterDNS, ClusterDomain: k.cfg.ClusterDomain, HostResolvConf: k.cfg.HostResolvConf}
		if err := k.cfg.Volumes.WritePodFiles(pod, w.podIP, dns); err != nil {
			k.event(pod, corev1.EventTypeWarning, "FailedMount", "Unable to write pod files: %v", err)
			return err
		}
		w.setField(func() { w.filesOK = true })
	}
	return nil
}

// finish ends a run-to-completion pod: running sidecars stop, probes stop
// and the network is released; containers stay until the pod is deleted.
func (w *podWorker) finish(ctx context.Context, pod *corev1.Pod) {
	w.stopProbes("")
	grace := podGrace(pod)
	for _, rs := range w.ctrs {
		if r := rs[len(rs)-1]; r.running() {
			if err := w.k.cfg.Runtime.Stop(ctx, r.id, grace); err != nil {
				w.k.log.Warn("stop sidecar", "pod", podKey(pod), "container", r.name, "err", err)
			}
			w.refreshOne(ctx, r)
		}
	}
	if !pod.Spec.HostNetwork {
		if err := w.k.cfg.Network.TeardownPod(ctx, string(pod.UID)); err != nil {
			w.k.log.Warn("teardown network", "pod", podKey(pod), "err", err)
		}
	}
	w.setField(func() { w.terminal = true; w.netnsPath = "" })
}

// pastDeadline reports whether activeDeadlineSeconds passed since start.
func (w *podWorker) pastDeadline(pod *corev1.Pod) bool {
	d := pod.Spec.ActiveDeadlineSeconds
	return d != nil && w.startTime != nil && w.k.now().Sub(w.startTime.Time) >= time.Duration(*d)*time.Second
}

// podGrace is the pod's termination grace period.
func podGrace(pod *corev1.Pod) time.Duration {
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// podRef is upstream's format.Pod: name_namespace(uid).
func podRef(pod *corev1.Pod) string {
	return pod.Name + "_" + pod.Namespace + "(" + string(pod.UID) + ")"
}
