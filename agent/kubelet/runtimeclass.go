package kubelet

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/runtime/containers"
)

// DefaultRuntimeHandlers are the RuntimeClass handlers a node runs when
// Config.RuntimeHandlers is nil: runc, on the runtime's default runtime.
func DefaultRuntimeHandlers() map[string]string { return map[string]string{"runc": ""} }

// errNoRuntimeHandler: the pod's RuntimeClass names a handler this node
// does not have; the pod waits (Pending, FailedCreatePodSandBox), as the
// kubelet's pods do when the container runtime refuses the sandbox.
var errNoRuntimeHandler = errors.New("no runtime")

// resolveRuntimeHandler finds the containerd runtime of the pod's
// RuntimeClass once per worker: the class's handler must be one of
// Config.RuntimeHandlers. A class that is gone or a handler that is not
// configured keeps the pod from starting, with upstream's messages.
func (w *podWorker) resolveRuntimeHandler(ctx context.Context, pod *corev1.Pod) error {
	if w.handlerOK || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return nil
	}
	name := *pod.Spec.RuntimeClassName
	rc, err := w.k.cfg.Client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	var why error
	switch {
	case apierrors.IsNotFound(err):
		why = fmt.Errorf("RuntimeClass %q not found", name)
	case err != nil:
		return fmt.Errorf("runtimeclass %q: %w", name, err)
	default:
		runtime, ok := w.k.cfg.RuntimeHandlers[rc.Handler]
		if !ok {
			why = fmt.Errorf("failed to get sandbox runtime: %w for %q is configured", errNoRuntimeHandler, rc.Handler)
			break
		}
		w.setField(func() { w.runtimeName, w.handlerOK = runtime, true })
		return nil
	}
	w.k.event(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", why)
	return why
}

// withPodRuntime completes a container's config with what belongs to its
// pod rather than its spec: the RuntimeClass's runtime, the allocated
// resources (a pending resize is not the allocation yet), and for an
// ephemeral container its target's process namespace.
func (w *podWorker) withPodRuntime(pod *corev1.Pod, c *corev1.Container, cc *containers.ContainerConfig) error {
	cc.RuntimeName = w.runtimeName
	cc.Resources = w.k.cfg.QoS.ContainerResources(pod, w.allocatedContainer(c)) // resize.go
	return w.joinTarget(pod, c, cc)
}
