package kubelet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"skiff/runtime/containers"
)

const testNode = "node-a"

type harness struct {
	t            *testing.T
	log          *callLog
	clock        *testingclock.FakeClock
	client       *fake.Clientset
	rt           *fakeRuntime
	net          *fakeNetwork
	img          *fakeImages
	vol          *fakeVolumes
	rec          *fakeRecorder
	cfg          Config
	k            *Kubelet
	cancel       context.CancelFunc
	done         chan error
	memAvailable atomic.Int64
	usage        sync.Map // pod name → int64 bytes
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	log := &callLog{}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	h := &harness{
		t: t, log: log, clock: clk,
		client: fake.NewClientset(node),
		rt:     newFakeRuntime(log, clk),
		net:    newFakeNetwork(log),
		img:    &fakeImages{absent: map[string]bool{}, failing: map[string]error{}},
		vol:    &fakeVolumes{log: log, disk: map[string]bool{}},
		rec:    &fakeRecorder{},
	}
	h.memAvailable.Store(8 << 30)
	h.cfg = Config{
		NodeStats: func() (NodeStats, error) {
			return NodeStats{MemoryAvailable: h.memAvailable.Load(), FSAvailable: 50 << 30, FSCapacity: 100 << 30}, nil
		},
		PodMemory: func(pod *corev1.Pod) int64 {
			if v, ok := h.usage.Load(pod.Name); ok {
				return v.(int64)
			}
			return 0
		},
		NodeName: testNode, Client: h.client, Runtime: h.rt, Network: h.net, Images: h.img, Volumes: h.vol,
		Env:    literalEnv,
		LogDir: t.TempDir(), CgroupFS: t.TempDir(), NodeIP: "192.168.1.10", Recorder: h.rec, Clock: clk,
		QoS: QoS{ContainerResources: func(*corev1.Pod, *corev1.Container) containers.Resources { return containers.Resources{} }},
	}
	return h
}

// start runs the kubelet and waits until its pod watch is live.
func (h *harness) start() {
	h.t.Helper()
	k, err := New(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.k = k
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- k.Run(ctx) }()
	h.t.Cleanup(h.stop)
	// A pod of another node proves the watch delivers events.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sentinel", Namespace: "other", UID: "sentinel"}, Spec: corev1.PodSpec{NodeName: "node-b"}}
	select {
	case <-k.ready:
	case <-time.After(10 * time.Second):
		h.t.Fatal("kubelet never ready")
	}
	if _, err := h.client.CoreV1().Pods("other").Create(context.Background(), probe, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.waitFor("watch live", func() bool {
		_, err := k.lister.Pods("other").Get("sentinel")
		return err == nil
	})
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		h.t.Error("kubelet did not stop")
	}
	h.cancel = nil
}

// waitFor polls cond (real time) for up to 10 s.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; calls: %v; events: %v", what, h.log.all(), h.rec.events)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stepUntil advances the fake clock by step until cond holds.
func (h *harness) stepUntil(what string, step time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out (stepping) waiting for %s; calls: %v", what, h.log.all())
		}
		h.clock.Step(step)
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) create(pod *corev1.Pod) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) get(name string) *corev1.Pod {
	h.t.Helper()
	p, err := h.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// status returns the named container's status in the pod's API status.
func (h *harness) cstatus(pod, name string) *corev1.ContainerStatus {
	p := h.get(pod)
	if p == nil {
		return nil
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func (h *harness) phase(pod string) corev1.PodPhase {
	if p := h.get(pod); p != nil {
		return p.Status.Phase
	}
	return ""
}

func (h *harness) condition(pod string, t corev1.PodConditionType) corev1.ConditionStatus {
	if p := h.get(pod); p != nil {
		for _, c := range p.Status.Conditions {
			if c.Type == t {
				return c.Status
			}
		}
	}
	return ""
}

// running waits until the container's newest attempt runs and returns it.
func (h *harness) running(pod, name string, attempt uint32) *containers.ContainerStatus {
	h.t.Helper()
	var c *containers.ContainerStatus
	h.waitFor(fmt.Sprintf("%s/%s#%d running", pod, name, attempt), func() bool {
		c = h.rt.find(pod, name)
		return c != nil && c.Attempt == attempt && c.State == containers.StateRunning
	})
	return c
}

func testPod(name string, policy corev1.RestartPolicy, ctrs ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: testNode, RestartPolicy: policy},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		}},
	}
	for _, c := range ctrs {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox:1.36"})
	}
	return p
}

// literalEnv is the environment without references: only literal values.
func literalEnv(_ context.Context, _ *corev1.Pod, c *corev1.Container, _, _ string) ([]string, error) {
	out := make([]string, 0, len(c.Env))
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			out = append(out, e.Name+"="+e.Value)
		}
	}
	return out, nil
}

func h0clock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}
