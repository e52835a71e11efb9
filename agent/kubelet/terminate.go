package kubelet

import (
	"context"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/agent/probe"
)

// minGraceAfterPreStop is what a container keeps for its stop signal when a
// preStop hook used up the grace period, as upstream.
const minGraceAfterPreStop = 2 * time.Second

// terminate stops a deleted (or removed) pod: preStop hooks and graceful
// stops of all containers in parallel, then the network and volumes are
// released, the containers removed, and the API object deleted for good.
// It reports whether the worker is finished.
func (w *podWorker) terminate(ctx context.Context, pod *corev1.Pod, removed bool) bool {
	w.stopProbes("")
	grace := podGrace(pod)
	w.stopAll(ctx, pod, grace)
	if ctx.Err() != nil {
		return false
	}
	w.refresh(ctx)
	if !removed {
		st := w.computeStatus(pod)
		if !isTerminalPhase(st.Phase) && (w.getLast() == nil || !isTerminalPhase(w.getLast().Phase)) {
			st.Phase = terminatedPhase(pod, st)
		}
		w.writeStatus(ctx, pod, st)
	}
	if err := w.cleanup(ctx, pod); err != nil {
		w.k.log.Warn("pod cleanup", "pod", podKey(pod), "err", err)
		w.wakeIn(w.k.cfg.ResyncInterval)
		return false
	}
	sent := false
	switch {
	case w.static:
		w.k.deleteMirror(ctx, pod.Namespace, pod.Name, "")
	case !removed:
		zero := int64(0)
		uid := pod.UID
		err := w.k.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			w.k.log.Warn("final delete of pod", "pod", podKey(pod), "err", err)
			w.wakeIn(w.k.cfg.ResyncInterval)
			return false
		}
		sent = true
	}
	w.k.workerDone(w, sent)
	return true
}

// terminatedPhase is the phase of a pod whose containers were stopped by a
// deletion: Succeeded when every container exited 0, else Failed.
func terminatedPhase(pod *corev1.Pod, st corev1.PodStatus) corev1.PodPhase {
	for _, cs := range st.ContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			return corev1.PodFailed
		}
	}
	return corev1.PodSucceeded
}

// stopAll runs preStop hooks and stops every running container in
// parallel within grace.
func (w *podWorker) stopAll(ctx context.Context, pod *corev1.Pod, grace time.Duration) {
	deadline := w.k.now().Add(grace)
	var wg sync.WaitGroup
	for name, rs := range w.ctrs {
		r := rs[len(rs)-1]
		if !r.running() && r.status.State != "created" {
			continue
		}
		c := specOf(pod, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.k.event(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", name)
			if c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
				res, msg := probe.Do(ctx, probe.FromHandler(c.Lifecycle.PreStop), w.target(c, r), w.k.cfg.Runtime, grace)
				if res != probe.Success {
					w.k.event(pod, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %s", msg)
				}
			}
			left := deadline.Sub(w.k.now())
			if left < minGraceAfterPreStop && grace > 0 {
				left = minGraceAfterPreStop
			}
			if left < 0 {
				left = 0
			}
			if err := w.k.cfg.Runtime.Stop(ctx, r.id, left); err != nil {
				w.k.log.Warn("stop container", "pod", podKey(pod), "container", name, "err", err)
			}
		}()
	}
	wg.Wait()
}

// cleanup releases everything of a stopped pod: network, volumes,
// containers and logs.
func (w *podWorker) cleanup(ctx context.Context, pod *corev1.Pod) error {
	if !pod.Spec.HostNetwork {
		if err := w.k.cfg.Network.TeardownPod(ctx, string(pod.UID)); err != nil {
			return err
		}
	}
	if err := w.k.cfg.Volumes.Teardown(ctx, string(pod.UID)); err != nil {
		return err
	}
	for _, rs := range w.ctrs {
		for _, r := range rs {
			w.removeRecord(ctx, r)
		}
	}
	w.setField(func() { w.ctrs = map[string][]*ctrRecord{}; w.netnsPath = "" })
	_ = os.RemoveAll(w.k.logDir(pod))
	// With its containers removed the pod's cgroup is empty; if a process
	// lingers, housekeeping removes it later.
	if err := w.k.removeCgroup(w.k.cfg.QoS.CgroupParent(w.k.cfg.CgroupRoot, pod)); err != nil {
		w.k.log.Debug("remove pod cgroups", "pod", podKey(pod), "err", err)
	}
	return nil
}
