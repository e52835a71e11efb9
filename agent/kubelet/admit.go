package kubelet

import (
	corev1 "k8s.io/api/core/v1"

	"skiff/agent/qos"
)

// admit refuses, before any of its containers ran, a pod this node must
// not run for what its own spec asks (upstream's pod admission): a
// sysctl that is not allowlisted fails the pod with reason
// SysctlForbidden. The refusal goes the eviction way: the pod ends Failed
// with the reason and message, and an event says why.
func (w *podWorker) admit(pod *corev1.Pod) {
	if w.evicted != "" || w.terminal || len(w.ctrs) > 0 {
		return
	}
	if msg := qos.CheckSysctls(pod); msg != "" {
		w.setField(func() { w.evicted, w.failReason = msg, qos.SysctlForbiddenReason })
		return
	}
	if w.hostPortConflict(pod) { // hostports.go
		w.setField(func() { w.evicted, w.failReason = hostPortMessage, hostPortReason })
	}
}
