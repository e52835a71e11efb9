package kubelet

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/runtime/containers"
)

// setPid gives a fake container the process ID its task would have.
func (r *fakeRuntime) setPid(id string, pid uint32) {
	r.mu.Lock()
	r.ctrs[id].Pid = pid
	r.mu.Unlock()
}

func (r *fakeRuntime) config(id string) containers.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfgs[id]
}

func (h *harness) update(pod *corev1.Pod) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Pods(pod.Namespace).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) ephemeralStatus(pod, name string) *corev1.ContainerStatus {
	p := h.get(pod)
	if p == nil {
		return nil
	}
	for i := range p.Status.EphemeralContainerStatuses {
		if p.Status.EphemeralContainerStatuses[i].Name == name {
			return &p.Status.EphemeralContainerStatuses[i]
		}
	}
	return nil
}

func TestEphemeralContainer_AddedToRunningPod_StartsInTargetPIDNamespaceOnce(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("dbg", corev1.RestartPolicyAlways, "app")
	pod.Generation = 1
	h.create(pod)
	app := h.running("dbg", "app", 0)
	h.rt.setPid(app.ID, 4242)

	cur := h.get("dbg")
	cur.Generation = 2
	cur.Spec.EphemeralContainers = []corev1.EphemeralContainer{{TargetContainerName: "app",
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1.36", Stdin: true, TTY: true}}}
	h.update(cur)
	ec := h.running("dbg", "debugger", 0)
	cfg := h.rt.config(ec.ID)
	if cfg.PIDNamespacePath != "/proc/4242/ns/pid" {
		t.Fatalf("PID namespace %q, want the target's /proc/4242/ns/pid", cfg.PIDNamespacePath)
	}
	if cfg.NetNSPath == "" || cfg.NetNSPath != h.rt.config(app.ID).NetNSPath {
		t.Fatalf("network namespace %q, want the pod's %q", cfg.NetNSPath, h.rt.config(app.ID).NetNSPath)
	}
	if !cfg.Stdin || !cfg.TTY {
		t.Fatalf("stdin/tty not passed for attach: %+v", cfg)
	}
	h.waitFor("ephemeral status running", func() bool {
		cs := h.ephemeralStatus("dbg", "debugger")
		return cs != nil && cs.State.Running != nil && !cs.Ready
	})
	if p := h.get("dbg"); len(p.Status.ContainerStatuses) != 1 || p.Status.ObservedGeneration != 2 {
		t.Fatalf("container statuses %d (want 1: ephemeral ones apart), observedGeneration %d (want 2)", len(p.Status.ContainerStatuses), p.Status.ObservedGeneration)
	}
	ref, err := h.k.Container("default", "dbg", "debugger", false)
	if err != nil || ref.ID != ec.ID || !ref.Running {
		t.Fatalf("attach lookup: %+v, %v", ref, err)
	}

	// An exited ephemeral container is never restarted.
	h.rt.exit(ec.ID, 0, "")
	h.waitFor("ephemeral status terminated", func() bool {
		cs := h.ephemeralStatus("dbg", "debugger")
		return cs != nil && cs.State.Terminated != nil
	})
	h.clock.Step(time.Minute)
	time.Sleep(100 * time.Millisecond)
	if n := len(h.log.matching("create dbg/debugger#")); n != 1 {
		t.Fatalf("ephemeral container created %d times, want once", n)
	}
	if h.phase("dbg") != corev1.PodRunning || h.condition("dbg", corev1.PodReady) != corev1.ConditionTrue {
		t.Fatalf("the debug container's exit changed the pod: phase %s ready %s", h.phase("dbg"), h.condition("dbg", corev1.PodReady))
	}
}

func TestEphemeralContainer_TargetNotRunning_WaitsForIt(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("late", corev1.RestartPolicyAlways, "app")
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{TargetContainerName: "app",
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1.36"}}}
	h.create(pod)
	app := h.running("late", "app", 0)
	// The fake's task has no PID until one is set: the target counts as not
	// running yet for joining, so nothing is created.
	time.Sleep(50 * time.Millisecond)
	if n := len(h.log.matching("create late/debugger#")); n != 0 {
		t.Fatalf("created %d times before the target had a process", n)
	}
	h.rt.setPid(app.ID, 7)
	h.stepUntil("debugger started", 10*time.Second, func() bool {
		c := h.rt.find("late", "debugger")
		return c != nil && c.State == containers.StateRunning
	})
}

func TestPodStatus_ObservedGeneration_FollowsSpecGeneration(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("gen", corev1.RestartPolicyAlways, "app")
	pod.Generation = 1
	h.create(pod)
	h.running("gen", "app", 0)
	h.waitFor("observedGeneration 1", func() bool {
		p := h.get("gen")
		return p.Status.ObservedGeneration == 1 && conditionsObserved(p, 1)
	})
	cur := h.get("gen")
	cur.Generation = 2
	d := int64(500)
	cur.Spec.ActiveDeadlineSeconds = &d
	h.update(cur)
	h.waitFor("observedGeneration 2", func() bool {
		p := h.get("gen")
		return p.Status.ObservedGeneration == 2 && conditionsObserved(p, 2)
	})
}

// conditionsObserved: the four conditions every pod gets from the kubelet
// name generation.
func conditionsObserved(p *corev1.Pod, generation int64) bool {
	want := map[corev1.PodConditionType]bool{corev1.PodReadyToStartContainers: true, corev1.PodInitialized: true,
		corev1.PodReady: true, corev1.ContainersReady: true}
	n := 0
	for _, c := range p.Status.Conditions {
		if want[c.Type] {
			if c.ObservedGeneration != generation {
				return false
			}
			n++
		}
	}
	return n == len(want)
}
