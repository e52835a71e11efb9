package kubelet

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func execProbe(cmd string, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}},
		PeriodSeconds: 1, FailureThreshold: failures, SuccessThreshold: 1, TimeoutSeconds: 1,
	}
}

// probeResults answers exec probes by command name.
func probeResults(h *harness) map[string]*atomic.Int32 {
	codes := map[string]*atomic.Int32{"ready": {}, "alive": {}, "started": {}}
	h.rt.setExec(func(_ string, cmd []string) (int, error) {
		if c, ok := codes[cmd[0]]; ok {
			return int(c.Load()), nil
		}
		return 0, nil
	})
	return codes
}

func TestReadinessProbeTogglesReady(t *testing.T) {
	h := newHarness(t)
	codes := probeResults(h)
	h.start()
	pod := testPod("ready", corev1.RestartPolicyAlways, "app")
	pod.Spec.Containers[0].ReadinessProbe = execProbe("ready", 1)
	codes["ready"].Store(1)
	h.create(pod)
	h.running("ready", "app", 0)
	h.stepUntil("not ready while the probe fails", time.Second, func() bool {
		return h.condition("ready", corev1.PodReady) == corev1.ConditionFalse && len(h.log.matching("exec ready/app ready")) > 0
	})
	if p := h.get("ready"); !strings.Contains(p.Status.Conditions[0].Message+p.Status.Conditions[1].Message+p.Status.Conditions[2].Message+p.Status.Conditions[3].Message, "containers with unready status: [app]") {
		t.Fatalf("conditions = %+v", p.Status.Conditions)
	}
	codes["ready"].Store(0)
	h.stepUntil("ready once the probe passes", time.Second, func() bool {
		cs := h.cstatus("ready", "app")
		return h.condition("ready", corev1.PodReady) == corev1.ConditionTrue &&
			h.condition("ready", corev1.ContainersReady) == corev1.ConditionTrue && cs.Ready
	})
	codes["ready"].Store(1)
	h.stepUntil("unready again", time.Second, func() bool {
		return h.condition("ready", corev1.PodReady) == corev1.ConditionFalse && !h.cstatus("ready", "app").Ready
	})
	if !h.rec.has("Unhealthy: Readiness probe failed: ") {
		t.Fatalf("events %v", h.rec.events)
	}
	if c := h.rt.find("ready", "app"); c.Attempt != 0 {
		t.Fatal("a readiness failure restarted the container")
	}
}

func TestLivenessFailureKillsAndRestarts(t *testing.T) {
	h := newHarness(t)
	codes := probeResults(h)
	h.start()
	pod := testPod("live", corev1.RestartPolicyAlways, "app")
	grace := int64(7)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Containers[0].LivenessProbe = execProbe("alive", 2)
	h.create(pod)
	h.running("live", "app", 0)
	codes["alive"].Store(1)
	h.stepUntil("restarted after liveness failure", time.Second, func() bool {
		c := h.rt.find("live", "app")
		return c != nil && c.Attempt == 1
	})
	codes["alive"].Store(0)
	if got := h.log.matching("stop live/app#0"); len(got) != 1 || !strings.HasSuffix(got[0], "grace=7s") {
		t.Fatalf("stop calls %v", got)
	}
	if !h.rec.has("Killing: Container app failed liveness probe, will be restarted") || !h.rec.has("Unhealthy: Liveness probe failed: ") {
		t.Fatalf("events %v", h.rec.events)
	}
	h.running("live", "app", 1)
	h.waitFor("restart counted", func() bool {
		cs := h.cstatus("live", "app")
		return cs != nil && cs.RestartCount == 1 && cs.State.Running != nil
	})
}

func TestStartupProbeGatesLivenessAndReadiness(t *testing.T) {
	h := newHarness(t)
	codes := probeResults(h)
	h.start()
	pod := testPod("slowstart", corev1.RestartPolicyAlways, "app")
	pod.Spec.Containers[0].StartupProbe = execProbe("started", 100)
	pod.Spec.Containers[0].LivenessProbe = execProbe("alive", 1)
	pod.Spec.Containers[0].ReadinessProbe = execProbe("ready", 1)
	codes["started"].Store(1)
	codes["alive"].Store(1) // would kill at once if it ran
	h.create(pod)
	h.running("slowstart", "app", 0)
	h.stepUntil("startup probing", time.Second, func() bool { return len(h.log.matching("exec slowstart/app started")) >= 3 })
	if n := len(h.log.matching("exec slowstart/app alive")) + len(h.log.matching("exec slowstart/app ready")); n != 0 {
		t.Fatalf("liveness/readiness ran %d times before startup passed", n)
	}
	cs := h.cstatus("slowstart", "app")
	if cs == nil || cs.Started == nil || *cs.Started || cs.Ready {
		t.Fatalf("status before startup = %+v", cs)
	}
	codes["alive"].Store(0)
	codes["started"].Store(0)
	h.stepUntil("started and ready", time.Second, func() bool {
		cs := h.cstatus("slowstart", "app")
		return cs != nil && cs.Started != nil && *cs.Started && cs.Ready
	})
}
