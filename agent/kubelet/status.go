package kubelet

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/runtime/containers"
)

const containerIDPrefix = "containerd://"

// computeStatus is the pod's status as the kubelet reports it.
func (w *podWorker) computeStatus(pod *corev1.Pod) corev1.PodStatus {
	w.mu.Lock()
	st := corev1.PodStatus{
		QOSClass:  w.k.cfg.QoS.Class(pod),
		StartTime: w.startTime,
		// The generation this sync acted on, as the kubelet reports it.
		ObservedGeneration: pod.Generation,
	}
	initialized, initFailed, terminal, netReady, podIP := w.initialized, w.initFailed, w.terminal, w.netReady, w.podIP
	evicted, failReason := w.evicted, w.failReason
	w.mu.Unlock()
	if ip := w.k.cfg.NodeIP; ip != "" {
		st.HostIP = ip
		st.HostIPs = []corev1.HostIP{{IP: ip}}
	}
	if podIP != "" {
		st.PodIP = podIP
		st.PodIPs = []corev1.PodIP{{IP: podIP}}
	}
	for i := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, w.containerStatus(pod, &pod.Spec.InitContainers[i], true, initialized))
	}
	for i := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, w.containerStatus(pod, &pod.Spec.Containers[i], false, initialized))
	}
	st.EphemeralContainerStatuses = w.ephemeralStatuses(pod, initialized) // ephemeral.go
	st.Phase = w.phase(pod, st, initialized, initFailed)
	if last := w.getLast(); terminal && last != nil && isTerminalPhase(last.Phase) {
		st.Phase = last.Phase
	}
	st.Conditions = w.conditions(pod, st, initialized, netReady && !terminal)
	w.resizeStatus(pod, &st) // resize.go
	if evicted != "" {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, failReason, evicted
		if failReason == "Evicted" {
			st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
				Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: evicted})
		}
	}
	return st
}

func isTerminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

// phase is upstream's getPhase, on the app containers.
func (w *podWorker) phase(pod *corev1.Pod, st corev1.PodStatus, initialized, initFailed bool) corev1.PodPhase {
	if initFailed {
		return corev1.PodFailed
	}
	if !initialized {
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, cs := range st.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			stopped++
			if cs.LastTerminationState.Terminated.ExitCode == 0 {
				succeeded++
			}
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch {
		case pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || pod.Spec.RestartPolicy == "":
			return corev1.PodRunning
		case stopped == succeeded:
			return corev1.PodSucceeded
		case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
			return corev1.PodFailed
		}
		return corev1.PodRunning
	}
	return corev1.PodPending
}

func terminatedState(s containers.ContainerStatus, message string) *corev1.ContainerStateTerminated {
	reason := s.Reason
	if reason == "" {
		reason = "Error"
		if s.ExitCode == 0 {
			reason = "Completed"
		}
	}
	return &corev1.ContainerStateTerminated{
		ExitCode: s.ExitCode, Reason: reason, Message: message,
		StartedAt:   metav1.NewTime(s.StartedAt).Rfc3339Copy(),
		FinishedAt:  metav1.NewTime(s.FinishedAt).Rfc3339Copy(),
		ContainerID: containerIDPrefix + s.ID,
	}
}

// containerStatus reports one container of the spec.
func (w *podWorker) containerStatus(pod *corev1.Pod, c *corev1.Container, isInit, initialized bool) corev1.ContainerStatus {
	w.mu.Lock()
	rs := append([]*ctrRecord(nil), w.ctrs[c.Name]...)
	wait, hasWait := w.waiting[c.Name]
	statuses := make([]containers.ContainerStatus, len(rs))
	messages := make([]string, len(rs))
	for i, r := range rs {
		statuses[i], messages[i] = r.status, r.termMsg
	}
	w.mu.Unlock()
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: new(bool)}
	if len(rs) == 0 {
		// As upstream's default waiting state: every container of a pod
		// with init containers (later init containers included) waits
		// with PodInitializing until it is created.
		reason := reasonContainerCreating
		if len(pod.Spec.InitContainers) > 0 {
			reason = reasonPodInitializing
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason}
		if hasWait {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: wait.reason, Message: wait.message}
		}
		return cs
	}
	last, s := rs[len(rs)-1], statuses[len(rs)-1]
	cs.RestartCount = int32(last.attempt)
	if s.Image != "" {
		cs.Image = s.Image
	}
	cs.ImageID = s.ImageID
	cs.ContainerID = containerIDPrefix + last.id
	if len(rs) > 1 {
		cs.LastTerminationState.Terminated = terminatedState(statuses[len(rs)-2], messages[len(rs)-2])
	}
	switch s.State {
	case containers.StateRunning:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(s.StartedAt).Rfc3339Copy()}
		*cs.Started = w.startedOK(last, c)
		cs.Ready = w.readyOK(last, c)
		if isInit && !isSidecar(c) {
			cs.Ready = false
		}
	case containers.StateExited:
		if hasWait {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: wait.reason, Message: wait.message}
			cs.LastTerminationState.Terminated = terminatedState(s, messages[len(rs)-1])
		} else {
			cs.State.Terminated = terminatedState(s, messages[len(rs)-1])
			cs.Ready = isInit && !isSidecar(c) && s.ExitCode == 0
		}
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reasonContainerCreating}
		if hasWait {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: wait.reason, Message: wait.message}
		}
	}
	return cs
}

func unready(statuses []corev1.ContainerStatus) []string {
	var out []string
	for _, cs := range statuses {
		if !cs.Ready {
			out = append(out, cs.Name)
		}
	}
	return out
}

// conditions are the kubelet-owned conditions.
func (w *podWorker) conditions(pod *corev1.Pod, st corev1.PodStatus, initialized, sandboxReady bool) []corev1.PodCondition {
	mk := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: pod.Generation}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
		}
		return c
	}
	var incomplete []string
	for _, cs := range st.InitContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			if !(cs.State.Running != nil && initialized) {
				incomplete = append(incomplete, cs.Name)
			}
		}
	}
	initOK := initialized || len(pod.Spec.InitContainers) == 0
	var notReady []string
	notReady = append(notReady, unready(st.ContainerStatuses)...)
	for i, cs := range st.InitContainerStatuses {
		if isSidecar(&pod.Spec.InitContainers[i]) && !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	ready := len(notReady) == 0
	reason, msg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	if isTerminalPhase(st.Phase) {
		ready, reason, msg = false, "PodCompleted", ""
	}
	podReady := mk(corev1.PodReady, ready, reason, msg)
	for _, g := range pod.Spec.ReadinessGates {
		if ready && !gateTrue(pod, g.ConditionType) {
			podReady = mk(corev1.PodReady, false, "ReadinessGatesNotReady", fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		}
	}
	initMsg := fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " "))
	out := []corev1.PodCondition{
		mk(corev1.PodReadyToStartContainers, sandboxReady, "", ""),
		mk(corev1.PodInitialized, initOK, "ContainersNotInitialized", initMsg),
		podReady,
		mk(corev1.ContainersReady, ready, reason, msg),
	}
	if isTerminalPhase(st.Phase) && initOK {
		out[1] = mk(corev1.PodInitialized, true, "", "")
	}
	if !initOK {
		out[2] = mk(corev1.PodReady, false, "ContainersNotInitialized", initMsg)
		out[3] = mk(corev1.ContainersReady, false, "ContainersNotInitialized", initMsg)
	}
	return out
}

func gateTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ownConditions are the condition types the kubelet writes.
var ownConditions = map[corev1.PodConditionType]bool{
	corev1.PodReadyToStartContainers: true, corev1.PodInitialized: true,
	corev1.PodReady: true, corev1.ContainersReady: true,
	corev1.PodResizePending: true, corev1.PodResizeInProgress: true,
}

// withTransitions carries lastTransitionTime over from prev when a
// condition's status did not change, and keeps conditions owned by others
// (PodScheduled, DisruptionTarget, readiness gates) from cur.
func (w *podWorker) withTransitions(st corev1.PodStatus, cur []corev1.PodCondition) corev1.PodStatus {
	prev := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range cur {
		prev[c.Type] = c
	}
	now := metav1.NewTime(w.k.now()).Rfc3339Copy()
	mine := map[corev1.PodConditionType]bool{}
	for _, c := range st.Conditions {
		mine[c.Type] = true
	}
	var conds []corev1.PodCondition
	for _, c := range cur {
		if !ownConditions[c.Type] && !mine[c.Type] {
			conds = append(conds, c)
		}
	}
	for _, c := range st.Conditions {
		if p, ok := prev[c.Type]; ok && p.Status == c.Status {
			c.LastTransitionTime = p.LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
		conds = append(conds, c)
	}
	sort.SliceStable(conds, func(i, j int) bool { return condOrder(conds[i].Type) < condOrder(conds[j].Type) })
	st.Conditions = conds
	return st
}

func condOrder(t corev1.PodConditionType) int {
	switch t {
	case corev1.PodReadyToStartContainers:
		return 0
	case corev1.PodInitialized:
		return 1
	case corev1.PodReady:
		return 2
	case corev1.ContainersReady:
		return 3
	case corev1.PodScheduled:
		return 4
	}
	return 5
}

// writeStatus sends the status through pods/status when it changed since
// the last write. Static pods report through their mirror pod.
func (w *podWorker) writeStatus(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) {
	last := w.getLast()
	if last != nil {
		cmp := w.withTransitions(st, last.Conditions)
		if equality.Semantic.DeepEqual(*last, cmp) {
			return
		}
	}
	pods := w.k.cfg.Client.CoreV1().Pods(pod.Namespace)
	for try := 0; try < 3; try++ {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				w.k.log.Warn("read pod for status", "pod", podKey(pod), "err", err)
			}
			return
		}
		if !w.static && cur.UID != pod.UID {
			return
		}
		if w.static && cur.Annotations[annotationMirror] != string(pod.UID) {
			return
		}
		full := w.withTransitions(st, cur.Status.Conditions)
		if last != nil {
			full = w.withTransitions(st, mergeConds(last.Conditions, cur.Status.Conditions))
		}
		if equality.Semantic.DeepEqual(cur.Status, full) {
			w.setField(func() { w.lastStatus = &full })
			return
		}
		upd := cur.DeepCopy()
		upd.Status = full
		_, err = pods.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err == nil {
			w.setField(func() { w.lastStatus = &full })
			return
		}
		if !apierrors.IsConflict(err) {
			w.k.log.Warn("update pod status", "pod", podKey(pod), "err", err)
			return
		}
	}
}

func (w *podWorker) getLast() *corev1.PodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastStatus
}

// mergeConds is own (our last conditions) plus the foreign ones of cur.
func mergeConds(own, cur []corev1.PodCondition) []corev1.PodCondition {
	out := []corev1.PodCondition{}
	mine := map[corev1.PodConditionType]bool{}
	for _, c := range own {
		if ownConditions[c.Type] || c.Type == corev1.DisruptionTarget {
			out = append(out, c)
			mine[c.Type] = true
		}
	}
	for _, c := range cur {
		if !ownConditions[c.Type] && !mine[c.Type] {
			out = append(out, c)
		}
	}
	return out
}
