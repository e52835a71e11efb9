package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var podKind = schema.GroupKind{Kind: "Pod"}

func TestPodColumns(t *testing.T) {
	p, ok := For(podKind)
	if !ok {
		t.Fatal("no pod printer")
	}
	want := "Name;Ready;Status;Restarts;Age;*IP;*Node;*Nominated Node;*Readiness Gates"
	if got := header(p); got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	if p.Columns[3].Type != "string" || p.Columns[5].Description != (corev1.PodStatus{}).SwaggerDoc()["podIP"] {
		t.Errorf("columns %+v", p.Columns)
	}
}

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(time.Hour)}}
}

func waiting(reason string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

func terminated(reason string, exitCode, signal int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: exitCode, Signal: signal}}
}

// lastTerminated is a LastTerminationState that finished d before now.
func lastTerminated(d time.Duration) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(d)}}
}

// newPod builds a pod with one spec container per status given.
func newPod(phase corev1.PodPhase, statuses ...corev1.ContainerStatus) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: objMeta("web", 3*time.Hour), Status: corev1.PodStatus{Phase: phase, ContainerStatuses: statuses}}
	for _, s := range statuses {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: s.Name})
	}
	return pod
}

// podCellsSummary returns the READY, STATUS and RESTARTS cells.
func podCellsSummary(t *testing.T, pod *corev1.Pod) [3]interface{} {
	t.Helper()
	c := cellsOf(t, podKind, pod)
	return [3]interface{}{c[1], c[2], c[3]}
}

func TestPodReadyStatusRestarts(t *testing.T) {
	tests := []struct {
		name string
		pod  func() *corev1.Pod
		want [3]interface{}
	}{
		{"one of two containers ready", func() *corev1.Pod {
			return newPod(corev1.PodRunning,
				corev1.ContainerStatus{Name: "a", Ready: true, State: running()},
				corev1.ContainerStatus{Name: "b", Ready: false, State: running()})
		}, [3]interface{}{"1/2", "Running", "0"}},
		{"restarted container shows when it last restarted", func() *corev1.Pod {
			return newPod(corev1.PodRunning, corev1.ContainerStatus{Name: "a", Ready: true, State: running(), RestartCount: 3, LastTerminationState: lastTerminated(5 * time.Minute)})
		}, [3]interface{}{"1/1", "Running", "3 (5m ago)"}},
		{"restarts sum over containers and take the latest termination", func() *corev1.Pod {
			return newPod(corev1.PodRunning,
				corev1.ContainerStatus{Name: "a", Ready: true, State: running(), RestartCount: 1, LastTerminationState: lastTerminated(3 * time.Hour)},
				corev1.ContainerStatus{Name: "b", Ready: true, State: running(), RestartCount: 2, LastTerminationState: lastTerminated(90 * time.Second)})
		}, [3]interface{}{"2/2", "Running", "3 (90s ago)"}},
		{"restarts without a termination time have no suffix", func() *corev1.Pod {
			return newPod(corev1.PodRunning, corev1.ContainerStatus{Name: "a", Ready: true, State: running(), RestartCount: 2})
		}, [3]interface{}{"1/1", "Running", "2"}},
		{"crash loop", func() *corev1.Pod {
			return newPod(corev1.PodRunning, corev1.ContainerStatus{Name: "a", State: waiting("CrashLoopBackOff"), RestartCount: 5, LastTerminationState: lastTerminated(40 * time.Second)})
		}, [3]interface{}{"0/1", "CrashLoopBackOff", "5 (40s ago)"}},
		{"image pull error", func() *corev1.Pod {
			return newPod(corev1.PodPending, corev1.ContainerStatus{Name: "a", State: waiting("ErrImagePull")})
		}, [3]interface{}{"0/1", "ErrImagePull", "0"}},
		{"first container in spec order gives the reason", func() *corev1.Pod {
			return newPod(corev1.PodPending,
				corev1.ContainerStatus{Name: "a", State: waiting("ContainerCreating")},
				corev1.ContainerStatus{Name: "b", State: waiting("ErrImagePull")})
		}, [3]interface{}{"0/2", "ContainerCreating", "0"}},
		{"completed pod", func() *corev1.Pod {
			return newPod(corev1.PodSucceeded, corev1.ContainerStatus{Name: "a", State: terminated("Completed", 0, 0)})
		}, [3]interface{}{"0/1", "Completed", "0"}},
		{"failed container reason", func() *corev1.Pod {
			return newPod(corev1.PodFailed, corev1.ContainerStatus{Name: "a", State: terminated("Error", 1, 0)})
		}, [3]interface{}{"0/1", "Error", "0"}},
		{"terminated without reason shows exit code", func() *corev1.Pod {
			return newPod(corev1.PodFailed, corev1.ContainerStatus{Name: "a", State: terminated("", 137, 0)})
		}, [3]interface{}{"0/1", "ExitCode:137", "0"}},
		{"terminated without reason shows signal", func() *corev1.Pod {
			return newPod(corev1.PodFailed, corev1.ContainerStatus{Name: "a", State: terminated("", 0, 9)})
		}, [3]interface{}{"0/1", "Signal:9", "0"}},
		{"completed container beside a running one on a ready pod is Running", func() *corev1.Pod {
			p := newPod(corev1.PodRunning,
				corev1.ContainerStatus{Name: "a", State: terminated("Completed", 0, 0)},
				corev1.ContainerStatus{Name: "b", Ready: true, State: running()})
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			return p
		}, [3]interface{}{"1/2", "Running", "0"}},
		{"completed container beside a running one on an unready pod is NotReady", func() *corev1.Pod {
			return newPod(corev1.PodRunning,
				corev1.ContainerStatus{Name: "a", State: terminated("Completed", 0, 0)},
				corev1.ContainerStatus{Name: "b", Ready: true, State: running()})
		}, [3]interface{}{"1/2", "NotReady", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podCellsSummary(t, tt.pod()); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodStatusFromPodLevelFields(t *testing.T) {
	tests := []struct {
		name string
		pod  func() *corev1.Pod
		want [3]interface{}
	}{
		{"pending pod without statuses", func() *corev1.Pod {
			p := newPod(corev1.PodPending)
			p.Spec.Containers = []corev1.Container{{Name: "a"}}
			return p
		}, [3]interface{}{"0/1", "Pending", "0"}},
		{"status reason replaces the phase", func() *corev1.Pod {
			p := newPod(corev1.PodFailed)
			p.Status.Reason = "Evicted"
			return p
		}, [3]interface{}{"0/0", "Evicted", "0"}},
		{"scheduling gated", func() *corev1.Pod {
			p := newPod(corev1.PodPending)
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}
			return p
		}, [3]interface{}{"0/0", "SchedulingGated", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podCellsSummary(t, tt.pod()); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// podWithInit has two one-shot init containers and one app container
// waiting for them.
func podWithInit(first, second corev1.ContainerStatus) *corev1.Pod {
	p := newPod(corev1.PodPending, corev1.ContainerStatus{Name: "app", State: waiting("PodInitializing")})
	p.Spec.InitContainers = []corev1.Container{{Name: first.Name}, {Name: second.Name}}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{first, second}
	return p
}

func TestPodInitContainers(t *testing.T) {
	done := corev1.ContainerStatus{Name: "init-a", State: terminated("Completed", 0, 0)}
	tests := []struct {
		name string
		pod  func() *corev1.Pod
		want [3]interface{}
	}{
		{"second init container running", func() *corev1.Pod {
			return podWithInit(done, corev1.ContainerStatus{Name: "init-b", State: running()})
		}, [3]interface{}{"0/1", "Init:1/2", "0"}},
		{"first init container not started", func() *corev1.Pod {
			return podWithInit(corev1.ContainerStatus{Name: "init-a", State: waiting("PodInitializing")}, corev1.ContainerStatus{Name: "init-b", State: waiting("PodInitializing")})
		}, [3]interface{}{"0/1", "Init:0/2", "0"}},
		{"init container crash loop counts its restarts", func() *corev1.Pod {
			return podWithInit(done, corev1.ContainerStatus{Name: "init-b", State: waiting("CrashLoopBackOff"), RestartCount: 4, LastTerminationState: lastTerminated(2 * time.Minute)})
		}, [3]interface{}{"0/1", "Init:CrashLoopBackOff", "4 (2m ago)"}},
		{"init container failed with a reason", func() *corev1.Pod {
			return podWithInit(corev1.ContainerStatus{Name: "init-a", State: terminated("Error", 2, 0)}, corev1.ContainerStatus{Name: "init-b"})
		}, [3]interface{}{"0/1", "Init:Error", "0"}},
		{"init container failed without a reason", func() *corev1.Pod {
			return podWithInit(corev1.ContainerStatus{Name: "init-a", State: terminated("", 3, 0)}, corev1.ContainerStatus{Name: "init-b"})
		}, [3]interface{}{"0/1", "Init:ExitCode:3", "0"}},
		{"init container killed by a signal", func() *corev1.Pod {
			return podWithInit(corev1.ContainerStatus{Name: "init-a", State: terminated("", 143, 15)}, corev1.ContainerStatus{Name: "init-b"})
		}, [3]interface{}{"0/1", "Init:Signal:15", "0"}},
		{"all init containers done: app container status shows", func() *corev1.Pod {
			p := podWithInit(done, corev1.ContainerStatus{Name: "init-b", State: terminated("Completed", 0, 0), RestartCount: 1})
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses[0] = corev1.ContainerStatus{Name: "app", Ready: true, State: running()}
			return p
		}, [3]interface{}{"1/1", "Running", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podCellsSummary(t, tt.pod()); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodSidecarContainersCountAsContainers(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := newPod(corev1.PodRunning, corev1.ContainerStatus{Name: "app", Ready: true, State: running(), RestartCount: 1, LastTerminationState: lastTerminated(10 * time.Minute)})
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: &always}}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{
		{Name: "setup", State: terminated("Completed", 0, 0), RestartCount: 7},
		{Name: "proxy", Ready: true, Started: ptr(true), State: running(), RestartCount: 2, LastTerminationState: lastTerminated(time.Minute)},
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}
	// The one-shot init container's restarts no longer count once the pod
	// is initialized; the sidecar's do.
	want := [3]interface{}{"2/2", "Running", "3 (60s ago)"}
	if got := podCellsSummary(t, pod); got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestPodDeletion(t *testing.T) {
	tests := []struct {
		name   string
		phase  corev1.PodPhase
		reason string
		delete bool
		want   string
	}{
		{"running pod being deleted is Terminating", corev1.PodRunning, "", true, "Terminating"},
		{"finished pod being deleted keeps its status", corev1.PodSucceeded, "", true, "Succeeded"},
		{"pod of a lost node being deleted is Unknown", corev1.PodRunning, "NodeLost", true, "Unknown"},
		{"pod of a lost node not being deleted says NodeLost", corev1.PodRunning, "NodeLost", false, "NodeLost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod(tt.phase)
			pod.Status.Reason = tt.reason
			if tt.delete {
				pod.DeletionTimestamp = agoPtr(time.Second)
			}
			if got := podCellsSummary(t, pod)[1]; got != tt.want {
				t.Errorf("status %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodAllCells(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []interface{}
	}{
		{
			name: "scheduled pod with ip, nominated node and readiness gates",
			pod: &corev1.Pod{
				ObjectMeta: objMeta("web-0", 26*time.Hour),
				Spec: corev1.PodSpec{
					NodeName:       "node-1",
					Containers:     []corev1.Container{{Name: "a"}},
					ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "gate-a"}, {ConditionType: "gate-b"}},
				},
				Status: corev1.PodStatus{
					Phase:             corev1.PodRunning,
					PodIP:             "10.42.0.7",
					PodIPs:            []corev1.PodIP{{IP: "10.42.0.7"}, {IP: "fd00::7"}},
					NominatedNodeName: "node-2",
					Conditions: []corev1.PodCondition{
						{Type: "gate-a", Status: corev1.ConditionTrue},
						{Type: "gate-b", Status: corev1.ConditionFalse},
					},
					ContainerStatuses: []corev1.ContainerStatus{{Name: "a", Ready: true, State: running()}},
				},
			},
			want: []interface{}{"web-0", "1/1", "Running", "0", "26h", "10.42.0.7", "node-1", "node-2", "1/2"},
		},
		{
			name: "unscheduled pod without creation time",
			pod: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "new"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}},
				Status:     corev1.PodStatus{Phase: corev1.PodPending},
			},
			want: []interface{}{"new", "0/1", "Pending", "0", "<unknown>", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "pod ip from the singular field",
			pod: &corev1.Pod{
				ObjectMeta: objMeta("old", 90*time.Second),
				Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.42.0.9"},
			},
			want: []interface{}{"old", "0/0", "Running", "0", "90s", "10.42.0.9", "<none>", "<none>", "<none>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, podKind, tt.pod, tt.want)
		})
	}
}

func TestPodRowConditionsMarkFinishedPods(t *testing.T) {
	tests := []struct {
		phase      corev1.PodPhase
		wantReason string
	}{
		{corev1.PodSucceeded, "Succeeded"},
		{corev1.PodFailed, "Failed"},
		{corev1.PodRunning, ""},
	}
	p, _ := For(podKind)
	for _, tt := range tests {
		t.Run(string(tt.phase), func(t *testing.T) {
			rows, err := Rows(p, []runtime.Object{newPod(tt.phase)}, testNow)
			if err != nil {
				t.Fatal(err)
			}
			conds := rows[0].Conditions
			if tt.wantReason == "" {
				if len(conds) != 0 {
					t.Errorf("conditions %v, want none", conds)
				}
				return
			}
			if len(conds) != 1 || conds[0].Type != metav1.RowCompleted || conds[0].Status != metav1.ConditionTrue || conds[0].Reason != tt.wantReason {
				t.Errorf("conditions %v", conds)
			}
		})
	}
}
