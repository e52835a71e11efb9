package printers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// nodeUnreachablePodReason is the status reason the node lifecycle
// controller sets on pods of a node that stopped reporting.
const nodeUnreachablePodReason = "NodeLost"

func podPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
			column("Status", "string", "The aggregate status of the containers in this pod."),
			column("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
			ageColumn(),
			wideColumn("IP", "string", corev1.PodStatus{}.SwaggerDoc()["podIP"]),
			wideColumn("Node", "string", corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
			wideColumn("Nominated Node", "string", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
			wideColumn("Readiness Gates", "string", corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
		},
		Cells:      podCells,
		Conditions: podConditions,
	}
}

func podCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	pod, err := typed[corev1.Pod](obj)
	if err != nil {
		return nil, err
	}
	s := summarizePod(pod)
	restarts := fmt.Sprint(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, duration.HumanDuration(now.Sub(s.lastRestart)))
	}
	return []interface{}{
		pod.Name,
		fmt.Sprintf("%d/%d", s.ready, s.total),
		s.reason,
		restarts,
		translateTimestampSince(pod.CreationTimestamp, now),
		orNone(podIP(pod)),
		orNone(pod.Spec.NodeName),
		orNone(pod.Status.NominatedNodeName),
		readinessGates(pod),
	}, nil
}

func podConditions(obj runtime.Object) []metav1.TableRowCondition {
	pod, err := typed[corev1.Pod](obj)
	if err != nil {
		return nil
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}
	return nil
}

// podSummary is what the READY, STATUS and RESTARTS columns are made of.
type podSummary struct {
	reason       string
	ready, total int
	restarts     int
	lastRestart  time.Time
	// Restarts of sidecars (restartable init containers) are counted
	// separately: once the pod is initialized only they and the regular
	// containers count, not the one-shot init containers.
	sidecarRestarts    int
	sidecarLastRestart time.Time
}

func summarizePod(pod *corev1.Pod) podSummary {
	s := podSummary{reason: string(pod.Status.Phase), total: len(pod.Spec.Containers)}
	if pod.Status.Reason != "" {
		s.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.reason = corev1.PodReasonSchedulingGated
		}
	}
	sidecars := map[string]bool{}
	for i := range pod.Spec.InitContainers {
		if isRestartable(&pod.Spec.InitContainers[i]) {
			sidecars[pod.Spec.InitContainers[i].Name] = true
			s.total++
		}
	}
	initializing := s.addInitContainers(pod, sidecars)
	if !initializing || podConditionTrue(pod, corev1.PodInitialized) {
		s.addContainers(pod)
	}
	if pod.DeletionTimestamp != nil && pod.Status.Reason == nodeUnreachablePodReason {
		s.reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && !isPodPhaseTerminal(pod.Status.Phase) {
		s.reason = "Terminating"
	}
	return s
}

// addInitContainers walks init containers in order until the first one that
// has not finished, and reports whether the pod is still initializing.
func (s *podSummary) addInitContainers(pod *corev1.Pod, sidecars map[string]bool) bool {
	initCount := len(pod.Spec.InitContainers)
	for i, c := range pod.Status.InitContainerStatuses {
		s.restarts += int(c.RestartCount)
		s.lastRestart = laterTermination(s.lastRestart, c)
		if sidecars[c.Name] {
			s.sidecarRestarts += int(c.RestartCount)
			s.sidecarLastRestart = laterTermination(s.sidecarLastRestart, c)
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecars[c.Name] && c.Started != nil && *c.Started:
			if c.Ready {
				s.ready++
			}
			continue
		case c.State.Terminated != nil:
			s.reason = "Init:" + terminatedReason(c.State.Terminated)
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			s.reason = "Init:" + c.State.Waiting.Reason
		default:
			s.reason = fmt.Sprintf("Init:%d/%d", i, initCount)
		}
		return true
	}
	return false
}

// addContainers takes the status from the regular containers; the first
// container in spec order with a waiting or terminated reason wins, which is
// why they are walked backwards.
func (s *podSummary) addContainers(pod *corev1.Pod) {
	s.restarts = s.sidecarRestarts
	s.lastRestart = s.sidecarLastRestart
	hasRunning := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := pod.Status.ContainerStatuses[i]
		s.restarts += int(c.RestartCount)
		s.lastRestart = laterTermination(s.lastRestart, c)
		switch {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			s.reason = c.State.Waiting.Reason
		case c.State.Terminated != nil:
			s.reason = terminatedReason(c.State.Terminated)
		case c.Ready && c.State.Running != nil:
			hasRunning = true
			s.ready++
		}
	}
	// A pod whose finished containers say Completed is still Running while
	// another container runs.
	if s.reason == "Completed" && hasRunning {
		if hasTrueCondition(pod, corev1.PodReady) {
			s.reason = "Running"
		} else {
			s.reason = "NotReady"
		}
	}
}

func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

func laterTermination(last time.Time, c corev1.ContainerStatus) time.Time {
	if t := c.LastTerminationState.Terminated; t != nil && last.Before(t.FinishedAt.Time) {
		return t.FinishedAt.Time
	}
	return last
}

func isRestartable(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func isPodPhaseTerminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodFailed || phase == corev1.PodSucceeded
}

// hasTrueCondition reports whether any condition of the type is true.
func hasTrueCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// podConditionTrue looks only at the first condition of the type, as
// upstream does for Initialized.
func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podIP prefers status.podIPs, falling back to the singular field for
// objects written before podIPs existed.
func podIP(pod *corev1.Pod) string {
	if len(pod.Status.PodIPs) > 0 {
		return pod.Status.PodIPs[0].IP
	}
	return pod.Status.PodIP
}

func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	trueConditions := 0
	for _, gate := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == gate.ConditionType {
				if c.Status == corev1.ConditionTrue {
					trueConditions++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", trueConditions, len(pod.Spec.ReadinessGates))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
