package kubelet

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestMemoryPressureEvictsBestEffortFirst(t *testing.T) {
	h := newHarness(t)
	h.start()
	burst := testPod("burst", corev1.RestartPolicyAlways, "app")
	burst.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	h.create(burst)
	h.create(testPod("small", corev1.RestartPolicyAlways, "app"))
	h.create(testPod("big", corev1.RestartPolicyAlways, "app"))
	h.usage.Store("burst", int64(500<<20))
	h.usage.Store("small", int64(10<<20))
	h.usage.Store("big", int64(300<<20))
	for _, p := range []string{"burst", "small", "big"} {
		h.running(p, "app", 0)
	}
	h.memAvailable.Store(50 << 20)
	h.stepUntil("largest BestEffort pod evicted", 10*time.Second, func() bool { return h.phase("big") == corev1.PodFailed })
	p := h.get("big")
	if p.Status.Reason != "Evicted" || p.Status.Message != "The node was low on resource: memory. " {
		t.Fatalf("status reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	if h.condition("big", corev1.DisruptionTarget) != corev1.ConditionTrue || h.condition("big", corev1.PodScheduled) != corev1.ConditionTrue {
		t.Fatalf("conditions %+v", p.Status.Conditions)
	}
	if h.phase("burst") != corev1.PodRunning {
		t.Fatal("Burstable pod evicted before BestEffort ones")
	}
	h.waitFor("network of the evicted pod released", func() bool { return !h.net.has("uid-big") })
	if mem, _ := h.k.Pressure(); !mem {
		t.Fatal("no memory pressure reported")
	}
	h.stepUntil("then the other BestEffort, then the Burstable over its request", 10*time.Second, func() bool {
		return h.phase("small") == corev1.PodFailed && h.phase("burst") == corev1.PodFailed
	})
	h.memAvailable.Store(8 << 30)
	h.stepUntil("pressure gone", 10*time.Second, func() bool { mem, _ := h.k.Pressure(); return !mem })
}
