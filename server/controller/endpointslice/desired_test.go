package endpointslice

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func testService(name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, ClusterIP: "10.43.0.10", Ports: ports},
	}
}

// testPod is a running, ready pod with one IPv4 address and the given
// container ports.
func testPod(name, ip string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

func notReady(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	return p
}

func terminating(p *corev1.Pod) *corev1.Pod {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

func noZones(string) (string, bool) { return "", false }

func TestPodEndpoint_Conditions(t *testing.T) {
	tests := []struct {
		name                        string
		pod                         *corev1.Pod
		publishNotReady             bool
		ready, serving, terminating bool
	}{
		{"ready pod", testPod("a", "10.42.0.1"), false, true, true, false},
		{"not ready pod", notReady(testPod("a", "10.42.0.1")), false, false, false, false},
		{"terminating ready pod keeps serving", terminating(testPod("a", "10.42.0.1")), false, false, true, true},
		{"terminating not ready pod", terminating(notReady(testPod("a", "10.42.0.1"))), false, false, false, true},
		{"publishNotReadyAddresses makes a not ready pod ready", notReady(testPod("a", "10.42.0.1")), true, true, true, false},
		{"publishNotReadyAddresses makes a terminating pod ready", terminating(notReady(testPod("a", "10.42.0.1"))), true, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := testService("web")
			svc.Spec.PublishNotReadyAddresses = tt.publishNotReady
			ep := podEndpoint(svc, tt.pod, "10.42.0.1", noZones)
			c := ep.Conditions
			if *c.Ready != tt.ready || *c.Serving != tt.serving || *c.Terminating != tt.terminating {
				t.Errorf("ready/serving/terminating = %v/%v/%v, want %v/%v/%v", *c.Ready, *c.Serving, *c.Terminating, tt.ready, tt.serving, tt.terminating)
			}
		})
	}
}

func TestIncludePod(t *testing.T) {
	succeeded := testPod("a", "10.42.0.1")
	succeeded.Status.Phase = corev1.PodSucceeded
	failed := testPod("a", "10.42.0.1")
	failed.Status.Phase = corev1.PodFailed
	noIP := testPod("a", "")
	noIP.Status.PodIPs = nil
	legacyIP := testPod("a", "10.42.0.1")
	legacyIP.Status.PodIPs = nil
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running with an IP", testPod("a", "10.42.0.1"), true},
		{"only status.podIP set", legacyIP, true},
		{"not ready", notReady(testPod("a", "10.42.0.1")), true},
		{"terminating", terminating(testPod("a", "10.42.0.1")), true},
		{"no IP yet", noIP, false},
		{"succeeded", succeeded, false},
		{"failed", failed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := includePod(tt.pod); got != tt.want {
				t.Errorf("includePod = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEndpointPorts_Resolution(t *testing.T) {
	named := corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")}
	numbered := corev1.ServicePort{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9100)}
	udp := corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("web")}
	sidecar := testPod("a", "10.42.0.1")
	always := corev1.ContainerRestartPolicyAlways
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}}}}
	tests := []struct {
		name  string
		ports []corev1.ServicePort
		pod   *corev1.Pod
		want  map[string]int32
	}{
		{"named port found", []corev1.ServicePort{named}, testPod("a", "10.42.0.1", corev1.ContainerPort{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}), map[string]int32{"http": 8080}},
		{"named port resolves per pod", []corev1.ServicePort{named}, testPod("a", "10.42.0.1", corev1.ContainerPort{Name: "web", ContainerPort: 8081, Protocol: corev1.ProtocolTCP}), map[string]int32{"http": 8081}},
		{"named port missing is left out", []corev1.ServicePort{named, numbered}, testPod("a", "10.42.0.1"), map[string]int32{"metrics": 9100}},
		{"named port must match protocol", []corev1.ServicePort{udp}, testPod("a", "10.42.0.1", corev1.ContainerPort{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}), map[string]int32{}},
		{"sidecar container port counts", []corev1.ServicePort{named}, sidecar, map[string]int32{"http": 15001}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := endpointPorts(testService("web", tt.ports...), tt.pod)
			m := map[string]int32{}
			for _, p := range got {
				m[*p.Name] = *p.Port
			}
			if len(m) != len(tt.want) {
				t.Fatalf("ports = %v, want %v", m, tt.want)
			}
			for k, v := range tt.want {
				if m[k] != v {
					t.Errorf("port %s = %d, want %d", k, m[k], v)
				}
			}
		})
	}
}

func TestDesiredGroups_AddressFamilies(t *testing.T) {
	dual := testPod("a", "10.42.0.1")
	dual.Status.PodIPs = []corev1.PodIP{{IP: "10.42.0.1"}, {IP: "fd00::1"}}
	v4svc := testService("web", corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(80)})
	dualSvc := v4svc.DeepCopy()
	dualSvc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	headless := v4svc.DeepCopy()
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	tests := []struct {
		name string
		svc  *corev1.Service
		want []discovery.AddressType
	}{
		{"IPv4 service takes only the IPv4 address", v4svc, []discovery.AddressType{discovery.AddressTypeIPv4}},
		{"dual-stack service takes both", dualSvc, []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv6}},
		{"headless service without families follows the pod", headless, []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			groups := desiredGroups(tt.svc, []*corev1.Pod{dual}, noZones)
			if len(groups) != len(tt.want) {
				t.Fatalf("got %d groups, want %d", len(groups), len(tt.want))
			}
			for i, g := range groups {
				if g.addressType != tt.want[i] || len(g.endpoints) != 1 {
					t.Errorf("group %d: %s with %d endpoints, want %s with 1", i, g.addressType, len(g.endpoints), tt.want[i])
				}
			}
		})
	}
}

func TestDesiredGroups_NamedPortResolvingDifferently_SeparateGroups(t *testing.T) {
	svc := testService("web", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")})
	a := testPod("a", "10.42.0.1", corev1.ContainerPort{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP})
	b := testPod("b", "10.42.0.2", corev1.ContainerPort{Name: "web", ContainerPort: 8081, Protocol: corev1.ProtocolTCP})
	c := testPod("c", "10.42.0.3", corev1.ContainerPort{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP})
	groups := desiredGroups(svc, []*corev1.Pod{c, b, a}, noZones)
	if len(groups) != 2 {
		t.Fatalf("got %d groups, want 2", len(groups))
	}
	if n := len(groups[0].endpoints); n != 2 || *groups[0].ports[0].Port != 8080 {
		t.Errorf("first group: %d endpoints on port %d, want 2 on 8080", n, *groups[0].ports[0].Port)
	}
	if n := len(groups[1].endpoints); n != 1 || *groups[1].ports[0].Port != 8081 {
		t.Errorf("second group: %d endpoints on port %d, want 1 on 8081", n, *groups[1].ports[0].Port)
	}
}

func TestPodEndpoint_HostnameZoneAndTarget(t *testing.T) {
	svc := testService("db")
	withHost := testPod("db-0", "10.42.0.1")
	withHost.Spec.Hostname, withHost.Spec.Subdomain = "db-0", "db"
	otherSubdomain := withHost.DeepCopy()
	otherSubdomain.Spec.Subdomain = "other"
	zones := func(n string) (string, bool) { return "zone-" + n, n == "node-1" }

	ep := podEndpoint(svc, withHost, "10.42.0.1", zones)
	if ep.Hostname == nil || *ep.Hostname != "db-0" {
		t.Errorf("hostname = %v, want db-0", ep.Hostname)
	}
	if ep.Zone == nil || *ep.Zone != "zone-node-1" || ep.NodeName == nil || *ep.NodeName != "node-1" {
		t.Errorf("zone/node = %v/%v, want zone-node-1/node-1", ep.Zone, ep.NodeName)
	}
	if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || ep.TargetRef.Name != "db-0" || ep.TargetRef.UID != withHost.UID {
		t.Errorf("targetRef = %+v", ep.TargetRef)
	}
	if ep := podEndpoint(svc, otherSubdomain, "10.42.0.1", zones); ep.Hostname != nil {
		t.Errorf("hostname = %q for a pod whose subdomain names another service", *ep.Hostname)
	}
	unscheduled := testPod("x", "10.42.0.9")
	unscheduled.Spec.NodeName = ""
	if ep := podEndpoint(svc, unscheduled, "10.42.0.9", zones); ep.NodeName != nil || ep.Zone != nil {
		t.Errorf("node/zone set for a pod without a node")
	}
}
