package kubelet

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRuntimeClass_Handler_DecidesWhetherAndWherePodsRun(t *testing.T) {
	h := newHarness(t)
	h.cfg.RuntimeHandlers = map[string]string{"runc": "", "kata": "io.containerd.kata.v2"}
	for name, handler := range map[string]string{"plain": "runc", "vm": "kata", "gvisor": "runsc"} {
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
		if _, err := h.client.NodeV1().RuntimeClasses().Create(context.Background(), rc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	withClass := func(name, class string) *corev1.Pod {
		p := testPod(name, corev1.RestartPolicyAlways, "app")
		p.Spec.RuntimeClassName = &class
		return p
	}
	h.create(withClass("plain", "plain"))
	h.create(withClass("vm", "vm"))
	h.create(withClass("unknown", "gvisor"))
	h.create(withClass("gone", "deleted"))

	if got := h.rt.config(h.running("plain", "app", 0).ID).RuntimeName; got != "" {
		t.Fatalf("runc handler ran on %q, want the default runtime", got)
	}
	if got := h.rt.config(h.running("vm", "app", 0).ID).RuntimeName; got != "io.containerd.kata.v2" {
		t.Fatalf("kata handler ran on %q", got)
	}
	h.waitFor("sandbox failures reported", func() bool {
		return h.rec.has(`FailedCreatePodSandBox: Failed to create pod sandbox: failed to get sandbox runtime: no runtime for "runsc" is configured`) &&
			h.rec.has(`FailedCreatePodSandBox: Failed to create pod sandbox: RuntimeClass "deleted" not found`)
	})
	h.clock.Step(time.Minute)
	time.Sleep(50 * time.Millisecond)
	for _, name := range []string{"unknown", "gone"} {
		if c := h.rt.find(name, "app"); c != nil {
			t.Fatalf("%s: a container was created without a usable runtime handler", name)
		}
		if h.net.has("uid-" + name) {
			t.Fatalf("%s: the pod got a network without a usable runtime handler", name)
		}
		if p := h.phase(name); p != corev1.PodPending && p != "" {
			t.Fatalf("%s: phase %s, want Pending", name, p)
		}
	}
}
