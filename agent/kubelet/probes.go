package kubelet

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"skiff/agent/probe"
)

func (w *podWorker) target(c *corev1.Container, r *ctrRecord) probe.Target {
	return probe.Target{ContainerID: r.id, PodIP: w.podIP, Container: c}
}

// startedOK reports whether the container's startup probe (if any) passed.
func (w *podWorker) startedOK(r *ctrRecord, c *corev1.Container) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ps, ok := w.probes[r.id]; ok {
		return ps.started
	}
	return c.StartupProbe == nil
}

// readyOK reports the container's readiness.
func (w *podWorker) readyOK(r *ctrRecord, c *corev1.Container) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ps, ok := w.probes[r.id]; ok {
		return ps.ready && ps.started
	}
	return c.ReadinessProbe == nil && c.StartupProbe == nil
}

// specOf finds a container of the pod by name.
func specOf(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// ensureProbes starts probe workers for newly running containers and stops
// those of containers that no longer run.
func (w *podWorker) ensureProbes(ctx context.Context, pod *corev1.Pod) {
	live := map[string]bool{}
	for name, rs := range w.ctrs {
		r := rs[len(rs)-1]
		c := specOf(pod, name)
		if c == nil || !r.running() {
			continue
		}
		isInit := specIsInit(pod, name)
		if isInit && !isSidecar(c) {
			continue
		}
		live[r.id] = true
		w.mu.Lock()
		_, ok := w.probes[r.id]
		w.mu.Unlock()
		if !ok {
			w.startProbes(ctx, pod, c, r)
		}
	}
	w.mu.Lock()
	var stale []string
	for id := range w.probes {
		if !live[id] {
			stale = append(stale, id)
		}
	}
	w.mu.Unlock()
	for _, id := range stale {
		w.stopProbes(id)
	}
}

func specIsInit(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return true
		}
	}
	return false
}

// startProbes starts the startup, liveness and readiness workers of one
// running container.
func (w *podWorker) startProbes(ctx context.Context, pod *corev1.Pod, c *corev1.Container, r *ctrRecord) {
	pctx, cancel := context.WithCancel(ctx)
	ps := &probeState{cancel: cancel, ready: c.ReadinessProbe == nil, started: c.StartupProbe == nil}
	w.setField(func() { w.probes[r.id] = ps })
	started := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return ps.started
	}
	mk := func(kind probe.Kind, p *corev1.Probe, gate func() bool, onResult func(probe.Result, string)) {
		if p == nil {
			return
		}
		wk := probe.NewWorker(probe.WorkerConfig{
			Kind: kind, Probe: p, Target: w.target(c, r), Exec: w.k.cfg.Runtime, Clock: w.k.clock,
			StartedAt: r.status.StartedAt, Gate: gate, OnResult: onResult,
			OnFailedAttempt: func(msg string) {
				w.k.event(pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", kind, msg)
			},
		})
		go wk.Run(pctx)
	}
	mk(probe.Startup, c.StartupProbe, nil, func(res probe.Result, _ string) {
		if res == probe.Success {
			w.setField(func() { ps.started = true })
		} else {
			w.setField(func() { ps.kill = "Container " + c.Name + " failed startup probe, will be restarted" })
		}
		w.kick()
	})
	mk(probe.Liveness, c.LivenessProbe, started, func(res probe.Result, _ string) {
		if res == probe.Failure {
			w.setField(func() { ps.kill = "Container " + c.Name + " failed liveness probe, will be restarted" })
			w.kick()
		}
	})
	mk(probe.Readiness, c.ReadinessProbe, started, func(res probe.Result, _ string) {
		w.setField(func() { ps.ready = res == probe.Success })
		w.kick()
	})
}

// stopProbes stops the probes of one container ("" = all of the pod).
func (w *podWorker) stopProbes(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for pid, ps := range w.probes {
		if id == "" || pid == id {
			ps.cancel()
			delete(w.probes, pid)
		}
	}
}

// handleKills kills containers whose liveness or startup probe failed; the
// restart policy and back-off then apply as to any exit.
func (w *podWorker) handleKills(ctx context.Context, pod *corev1.Pod) {
	for name, rs := range w.ctrs {
		r := rs[len(rs)-1]
		w.mu.Lock()
		ps, ok := w.probes[r.id]
		msg := ""
		if ok {
			msg = ps.kill
		}
		w.mu.Unlock()
		if msg == "" || !r.running() {
			continue
		}
		w.k.event(pod, corev1.EventTypeNormal, "Killing", "%s", msg)
		w.stopProbes(r.id)
		if c := specOf(pod, name); c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			probe.Do(ctx, probe.FromHandler(c.Lifecycle.PreStop), w.target(c, r), w.k.cfg.Runtime, podGrace(pod))
		}
		if err := w.k.cfg.Runtime.Stop(ctx, r.id, podGrace(pod)); err != nil {
			w.k.log.Warn("kill unhealthy container", "pod", podKey(pod), "container", name, "err", err)
		}
		w.refreshOne(ctx, r)
	}
}
