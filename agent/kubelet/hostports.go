package kubelet

import (
	corev1 "k8s.io/api/core/v1"
)

// Upstream's kubelet admission runs the scheduler's NodePorts filter
// against the pods it already admitted: a pod bound straight to the node
// (spec.nodeName, no scheduler) whose host port another pod holds fails
// with the filter's name as reason.
const (
	hostPortReason  = "NodePorts"
	hostPortMessage = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
)

// hostPortKey is one host port a pod asks for; an empty or 0.0.0.0 IP
// means every address.
type hostPortKey struct {
	ip       string
	protocol corev1.Protocol
	port     int32
}

func wantedHostPorts(pod *corev1.Pod) []hostPortKey {
	var out []hostPortKey
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPortKey{ip: p.HostIP, protocol: proto, port: p.HostPort})
			}
		}
	}
	add(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		// Sidecars keep running beside the app containers.
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add([]corev1.Container{c})
		}
	}
	return out
}

func anyIP(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

func (a hostPortKey) conflicts(b hostPortKey) bool {
	return a.port == b.port && a.protocol == b.protocol && (anyIP(a.ip) || anyIP(b.ip) || a.ip == b.ip)
}

// hostPortConflict reports whether another pod this kubelet runs, or
// admitted before this one, holds a host port the pod asks for.
func (w *podWorker) hostPortConflict(pod *corev1.Pod) bool {
	want := wantedHostPorts(pod)
	if len(want) == 0 {
		return false
	}
	for _, o := range w.k.allWorkers() {
		if o == w {
			continue
		}
		o.mu.Lock()
		other, started := o.pod, len(o.ctrs) > 0
		gone := o.removed || o.terminal || o.evicted != "" || other == nil ||
			other.DeletionTimestamp != nil || isTerminalPhase(other.Status.Phase)
		o.mu.Unlock()
		// Pods are admitted oldest first: of two new pods wanting the same
		// port the older one gets it, whichever worker asks first.
		if gone || (!started && !admittedBefore(other, pod)) {
			continue
		}
		for _, theirs := range wantedHostPorts(other) {
			for _, mine := range want {
				if mine.conflicts(theirs) {
					return true
				}
			}
		}
	}
	return false
}

func admittedBefore(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.UID < b.UID
}
