package kubelet

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Lookup errors, for agent/stream.
var (
	ErrPodNotFound       = errors.New("pod not found on this node")
	ErrContainerNotFound = errors.New("container not found")
	ErrNoPrevious        = errors.New("previous terminated container not found")
)

// ContainerRef is a container for logs, exec and attach.
type ContainerRef struct {
	ID      string
	LogPath string
	Running bool
}

func (k *Kubelet) workerByName(namespace, name string) *podWorker {
	for _, w := range k.allWorkers() {
		w.mu.Lock()
		match := w.pod.Namespace == namespace && w.pod.Name == name && !w.removed
		w.mu.Unlock()
		if match {
			return w
		}
	}
	return nil
}

// Container finds the current (or, with previous, the one before) attempt
// of a container of a pod on this node.
func (k *Kubelet) Container(namespace, pod, container string, previous bool) (ContainerRef, error) {
	w := k.workerByName(namespace, pod)
	if w == nil {
		return ContainerRef{}, fmt.Errorf("%w: %s/%s", ErrPodNotFound, namespace, pod)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rs := w.ctrs[container]
	if len(rs) == 0 {
		return ContainerRef{}, fmt.Errorf("%w: %s in pod %s/%s", ErrContainerNotFound, container, namespace, pod)
	}
	r := rs[len(rs)-1]
	if previous {
		if len(rs) < 2 {
			return ContainerRef{}, fmt.Errorf("%w: %s in pod %s/%s", ErrNoPrevious, container, namespace, pod)
		}
		r = rs[len(rs)-2]
	}
	return ContainerRef{ID: r.id, LogPath: r.logPath, Running: r.running()}, nil
}

// PodNetNS is the network namespace path of a pod; "" (with no error) for
// a hostNetwork pod, which uses the node's own namespace.
func (k *Kubelet) PodNetNS(namespace, pod string) (string, error) {
	w := k.workerByName(namespace, pod)
	if w == nil {
		return "", fmt.Errorf("%w: %s/%s", ErrPodNotFound, namespace, pod)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pod.Spec.HostNetwork {
		return "", nil
	}
	if w.netnsPath == "" {
		return "", fmt.Errorf("%w: %s/%s has no network namespace (not started or finished)", ErrPodNotFound, namespace, pod)
	}
	return w.netnsPath, nil
}

// RunningPods counts the pods with at least one running container.
func (k *Kubelet) RunningPods() int {
	n := 0
	for _, w := range k.allWorkers() {
		w.mu.Lock()
	loop:
		for _, rs := range w.ctrs {
			for _, r := range rs {
				if r.running() {
					n++
					break loop
				}
			}
		}
		w.mu.Unlock()
	}
	return n
}

// ImagesInUse are the image IDs of every container the kubelet keeps
// (running or kept for logs) and of mounted image volumes, for image
// garbage collection.
func (k *Kubelet) ImagesInUse() map[string]bool {
	out := map[string]bool{}
	for _, w := range k.allWorkers() {
		w.mu.Lock()
		for _, rs := range w.ctrs {
			for _, r := range rs {
				if r.status.ImageID != "" {
					out[r.status.ImageID] = true
				}
			}
		}
		for _, id := range w.imageVolumeIDs {
			out[id] = true
		}
		w.mu.Unlock()
	}
	return out
}

// NodePods are copies of the pods this node runs, each with the status
// the kubelet last reported, for the kubelet API's /pods.
func (k *Kubelet) NodePods() []corev1.Pod {
	var out []corev1.Pod
	for _, w := range k.allWorkers() {
		w.mu.Lock()
		if !w.removed {
			p := w.pod.DeepCopy()
			if w.lastStatus != nil {
				p.Status = *w.lastStatus.DeepCopy()
			}
			out = append(out, *p)
		}
		w.mu.Unlock()
	}
	return out
}
