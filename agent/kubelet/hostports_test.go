package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func withHostPort(p *corev1.Pod, ip string, port int32, proto corev1.Protocol) *corev1.Pod {
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port, HostIP: ip, Protocol: proto}}
	return p
}

func TestAdmit_HostPortHeldByRunningPod_NewPodFailsWithNodePorts(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.create(withHostPort(testPod("holder", corev1.RestartPolicyAlways, "main"), "", 21017, ""))
	h.running("holder", "main", 0)

	h.create(withHostPort(testPod("late", corev1.RestartPolicyAlways, "main"), "", 21017, corev1.ProtocolTCP))
	h.waitFor("the conflicting pod failed with NodePorts", func() bool {
		p := h.get("late")
		return p != nil && p.Status.Phase == corev1.PodFailed && p.Status.Reason == "NodePorts"
	})
	if h.rt.find("late", "main") != nil {
		t.Fatal("a container of the pod whose host port is taken was created")
	}
	// Another protocol, or another address of a port bound to one
	// address only, is free.
	h.create(withHostPort(testPod("udp", corev1.RestartPolicyAlways, "main"), "", 21017, corev1.ProtocolUDP))
	h.running("udp", "main", 0)
	if p := h.get("holder"); p.Status.Phase != corev1.PodRunning {
		t.Fatalf("the holder is %s, want it left running", p.Status.Phase)
	}
}

func TestHostPortKey_Conflicts(t *testing.T) {
	cases := []struct {
		name string
		a, b hostPortKey
		want bool
	}{
		{"same port any address", hostPortKey{"", corev1.ProtocolTCP, 80}, hostPortKey{"", corev1.ProtocolTCP, 80}, true},
		{"any address covers one", hostPortKey{"0.0.0.0", corev1.ProtocolTCP, 80}, hostPortKey{"10.0.0.1", corev1.ProtocolTCP, 80}, true},
		{"two addresses", hostPortKey{"10.0.0.2", corev1.ProtocolTCP, 80}, hostPortKey{"10.0.0.1", corev1.ProtocolTCP, 80}, false},
		{"other protocol", hostPortKey{"", corev1.ProtocolUDP, 80}, hostPortKey{"", corev1.ProtocolTCP, 80}, false},
		{"other port", hostPortKey{"", corev1.ProtocolTCP, 81}, hostPortKey{"", corev1.ProtocolTCP, 80}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.conflicts(tc.b); got != tc.want {
				t.Errorf("conflicts = %v, want %v", got, tc.want)
			}
		})
	}
}
