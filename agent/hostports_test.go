package agent

import (
	"context"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"skiff/runtime/podnet"
)

// fakeNetwork hands out one address per pod.
type fakeNetwork struct{ ips map[string]net.IP }

func (f fakeNetwork) SetupPod(_ context.Context, req podnet.PodRequest) (podnet.PodNetwork, error) {
	return podnet.PodNetwork{UID: req.UID, IP: f.ips[req.UID]}, nil
}
func (fakeNetwork) TeardownPod(context.Context, string) error { return nil }
func (fakeNetwork) Pods() ([]podnet.PodNetwork, error)        { return nil, nil }

func hostPortPod(uid string, phase corev1.PodPhase, statusIP string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-" + uid, UID: types.UID(uid)},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 54323, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if statusIP != "" {
		p.Status.PodIPs = []corev1.PodIP{{IP: statusIP}}
	}
	return p
}

func TestHostPorts_AddressFromSetupThenGoneAtTeardown(t *testing.T) {
	network := fakeNetwork{ips: map[string]net.IP{"a": net.ParseIP("10.42.1.10")}}
	h, err := newHostPorts(fake.NewClientset(), "node-a", network)
	if err != nil {
		t.Fatal(err)
	}
	changes := 0
	h.changed = func() { changes++ }
	hostNet := hostPortPod("h", corev1.PodRunning, "192.168.88.1")
	hostNet.Spec.HostNetwork = true
	for _, p := range []*corev1.Pod{
		hostPortPod("a", corev1.PodPending, ""),                // address from the pod network only
		hostPortPod("b", corev1.PodRunning, "10.42.1.11"),      // adopted: address from its status
		hostPortPod("done", corev1.PodSucceeded, "10.42.1.12"), // finished: nothing
		hostNet,
	} {
		if err := h.pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got := func() map[string]string {
		out := map[string]string{}
		for _, hp := range h.HostPorts() {
			out[hp.UID] = hp.PodIP.String()
		}
		return out
	}
	if m := got(); len(m) != 1 || m["b"] != "10.42.1.11" {
		t.Errorf("before setup: %v, want b only", m)
	}
	if _, err := h.SetupPod(context.Background(), podnet.PodRequest{UID: "a"}); err != nil {
		t.Fatal(err)
	}
	if changes != 1 {
		t.Errorf("setup told the proxy %d times, want once", changes)
	}
	if m := got(); len(m) != 2 || m["a"] != "10.42.1.10" {
		t.Errorf("after setup: %v, want a at 10.42.1.10 and b", m)
	}
	_ = h.TeardownPod(context.Background(), "a")
	a := hostPortPod("a", corev1.PodRunning, "10.42.1.10") // status still shows it
	if err := h.pods.Update(a); err != nil {
		t.Fatal(err)
	}
	if m := got(); len(m) != 1 || m["a"] != "" {
		t.Errorf("after teardown: %v, want b only", m)
	}
	if changes != 2 {
		t.Errorf("teardown told the proxy %d times in all, want 2", changes)
	}
}
