package kubelet

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"skiff/runtime/containers"
)

// Ephemeral (debug) containers, as upstream's kubelet runs them: each one
// added through pods/ephemeralcontainers is started once inside the
// running pod (its network namespace; with targetContainerName, that
// container's process namespace too), is never restarted, and is reported
// in status.ephemeralContainerStatuses. They take no part in the pod's
// phase or readiness.

// ephemeralSpec finds an ephemeral container of the pod by name.
func ephemeralSpec(pod *corev1.Pod, name string) *corev1.EphemeralContainer {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return &pod.Spec.EphemeralContainers[i]
		}
	}
	return nil
}

// asContainer is the container an ephemeral container runs as (the two
// share their common fields; the API forbids the rest).
func asContainer(ec *corev1.EphemeralContainer) *corev1.Container {
	c := corev1.Container(ec.EphemeralContainerCommon)
	return &c
}

// syncEphemeral starts the ephemeral containers that never ran. Upstream
// starts them whatever the state of the init containers, once the pod's
// sandbox (here: its network) exists; a finished pod starts none.
func (w *podWorker) syncEphemeral(ctx context.Context, pod *corev1.Pod) {
	if w.terminal {
		return
	}
	for i := range pod.Spec.EphemeralContainers {
		if ctx.Err() != nil {
			return
		}
		ec := &pod.Spec.EphemeralContainers[i]
		if w.last(ec.Name) != nil {
			continue // started once: never again
		}
		w.startContainer(ctx, pod, asContainer(ec))
	}
}

// joinTarget puts an ephemeral container with a targetContainerName into
// the process namespace of that container's running attempt, as the
// kubelet does (NamespaceMode_TARGET). The target not running yet is an
// error: the start is retried on the next sync.
func (w *podWorker) joinTarget(pod *corev1.Pod, c *corev1.Container, cc *containers.ContainerConfig) error {
	ec := ephemeralSpec(pod, c.Name)
	if ec == nil || ec.TargetContainerName == "" {
		return nil
	}
	w.mu.Lock()
	target := w.last(ec.TargetContainerName)
	var pid uint32
	if target != nil && target.running() {
		pid = target.status.Pid
	}
	w.mu.Unlock()
	if pid == 0 {
		return fmt.Errorf("target container %q is not running", ec.TargetContainerName)
	}
	cc.PIDNamespacePath = "/proc/" + strconv.FormatUint(uint64(pid), 10) + "/ns/pid"
	return nil
}

// ephemeralStatuses reports every ephemeral container of the spec; they
// are never ready.
func (w *podWorker) ephemeralStatuses(pod *corev1.Pod, initialized bool) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for i := range pod.Spec.EphemeralContainers {
		c := asContainer(&pod.Spec.EphemeralContainers[i])
		cs := w.containerStatus(pod, c, false, initialized)
		cs.Ready = false
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == reasonPodInitializing {
			cs.State.Waiting.Reason = reasonContainerCreating // not held back by init containers
		}
		out = append(out, cs)
	}
	return out
}
