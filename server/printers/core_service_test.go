package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestServiceColumns(t *testing.T) {
	p, _ := For(schema.GroupKind{Kind: "Service"})
	if got, want := header(p), "Name;Type;Cluster-IP;External-IP;Port(s);Age;*Selector"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
}

func TestServiceCells(t *testing.T) {
	tcp := func(port, nodePort int32) corev1.ServicePort {
		return corev1.ServicePort{Port: port, NodePort: nodePort, Protocol: corev1.ProtocolTCP}
	}
	svc := func(typ corev1.ServiceType, ips []string, ports ...corev1.ServicePort) *corev1.Service {
		s := &corev1.Service{ObjectMeta: objMeta("web", 2*time.Hour), Spec: corev1.ServiceSpec{Type: typ, Ports: ports}}
		if len(ips) > 0 {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = ips[0], ips
		}
		return s
	}
	tests := []struct {
		name string
		svc  func() *corev1.Service
		want []interface{}
	}{
		{"cluster ip with selector", func() *corev1.Service {
			s := svc(corev1.ServiceTypeClusterIP, []string{"10.43.0.10", "fd00::10"}, tcp(443, 0), corev1.ServicePort{Port: 53, Protocol: corev1.ProtocolUDP})
			s.Spec.Selector = map[string]string{"app": "web", "tier": "front"}
			return s
		}, []interface{}{"web", "ClusterIP", "10.43.0.10", "<none>", "443/TCP,53/UDP", "120m", "app=web,tier=front"}},
		{"cluster ip with external ips", func() *corev1.Service {
			s := svc(corev1.ServiceTypeClusterIP, []string{"10.43.0.10"}, tcp(80, 0))
			s.Spec.ExternalIPs = []string{"198.51.100.1", "198.51.100.2"}
			return s
		}, []interface{}{"web", "ClusterIP", "10.43.0.10", "198.51.100.1,198.51.100.2", "80/TCP", "120m", "<none>"}},
		{"node port", func() *corev1.Service {
			return svc(corev1.ServiceTypeNodePort, []string{"10.43.0.11"}, tcp(80, 30080))
		}, []interface{}{"web", "NodePort", "10.43.0.11", "<none>", "80:30080/TCP", "120m", "<none>"}},
		{"load balancer with ingress ips, sorted and unique", func() *corev1.Service {
			s := svc(corev1.ServiceTypeLoadBalancer, []string{"10.43.0.12"}, tcp(80, 31000), tcp(443, 31443))
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.20"}, {IP: "192.0.2.10"}, {Hostname: "lb.example.com"}, {IP: "192.0.2.20"}}
			return s
		}, []interface{}{"web", "LoadBalancer", "10.43.0.12", "192.0.2.10,192.0.2.20,lb.example.com", "80:31000/TCP,443:31443/TCP", "120m", "<none>"}},
		{"load balancer with ingress and external ips", func() *corev1.Service {
			s := svc(corev1.ServiceTypeLoadBalancer, []string{"10.43.0.12"}, tcp(80, 31000))
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
			s.Spec.ExternalIPs = []string{"198.51.100.1"}
			return s
		}, []interface{}{"web", "LoadBalancer", "10.43.0.12", "192.0.2.10,198.51.100.1", "80:31000/TCP", "120m", "<none>"}},
		{"load balancer still pending", func() *corev1.Service {
			return svc(corev1.ServiceTypeLoadBalancer, []string{"10.43.0.12"}, tcp(80, 31000))
		}, []interface{}{"web", "LoadBalancer", "10.43.0.12", "<pending>", "80:31000/TCP", "120m", "<none>"}},
		{"external name", func() *corev1.Service {
			s := svc(corev1.ServiceTypeExternalName, nil)
			s.Spec.ExternalName = "db.example.com"
			return s
		}, []interface{}{"web", "ExternalName", "<none>", "db.example.com", "<none>", "120m", "<none>"}},
		{"headless", func() *corev1.Service {
			return svc(corev1.ServiceTypeClusterIP, []string{"None"}, tcp(5432, 0))
		}, []interface{}{"web", "ClusterIP", "None", "<none>", "5432/TCP", "120m", "<none>"}},
		{"cluster ip only in the singular field", func() *corev1.Service {
			s := svc(corev1.ServiceTypeClusterIP, nil, tcp(80, 0))
			s.Spec.ClusterIP = "10.43.0.99"
			return s
		}, []interface{}{"web", "ClusterIP", "10.43.0.99", "<none>", "80/TCP", "120m", "<none>"}},
		{"no type", func() *corev1.Service {
			return svc("", nil)
		}, []interface{}{"web", "", "<none>", "<unknown>", "<none>", "120m", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, schema.GroupKind{Kind: "Service"}, tt.svc(), tt.want)
		})
	}
}

func TestEndpointsCells(t *testing.T) {
	addrs := func(ips ...string) []corev1.EndpointAddress {
		out := make([]corev1.EndpointAddress, len(ips))
		for i, ip := range ips {
			out[i] = corev1.EndpointAddress{IP: ip}
		}
		return out
	}
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{
		{"no subsets", nil, "<none>"},
		{"ip and port pairs", []corev1.EndpointSubset{{Addresses: addrs("10.42.0.5", "fd00::5"), Ports: []corev1.EndpointPort{{Port: 8080}}}}, "10.42.0.5:8080,[fd00::5]:8080"},
		{"more than three", []corev1.EndpointSubset{
			{Addresses: addrs("10.42.0.1", "10.42.0.2"), Ports: []corev1.EndpointPort{{Port: 80}, {Port: 443}}},
			{Addresses: addrs("10.42.0.3"), Ports: []corev1.EndpointPort{{Port: 80}}},
		}, "10.42.0.1:80,10.42.0.2:80,10.42.0.1:443 + 2 more..."},
		{"headless subset without ports", []corev1.EndpointSubset{{Addresses: addrs("10.42.0.7")}}, "10.42.0.7"},
		{"subset without addresses", []corev1.EndpointSubset{{NotReadyAddresses: addrs("10.42.0.8"), Ports: []corev1.EndpointPort{{Port: 80}}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := &corev1.Endpoints{ObjectMeta: objMeta("web", time.Hour), Subsets: tt.subsets}
			assertCells(t, schema.GroupKind{Kind: "Endpoints"}, ep, []interface{}{"web", tt.want, "60m"})
		})
	}
}

func TestEndpointSliceCells(t *testing.T) {
	tests := []struct {
		name      string
		ports     []discoveryv1.EndpointPort
		endpoints []discoveryv1.Endpoint
		wantPorts string
		wantEps   string
	}{
		{"empty", nil, nil, "<unset>", "<unset>"},
		{"ports by number, name or wildcard",
			[]discoveryv1.EndpointPort{{Port: ptr(int32(80))}, {Name: ptr("https")}, {}},
			[]discoveryv1.Endpoint{{Addresses: []string{"10.42.0.5"}}},
			"80,https,*", "10.42.0.5"},
		{"more than three addresses",
			[]discoveryv1.EndpointPort{{Port: ptr(int32(1))}, {Port: ptr(int32(2))}, {Port: ptr(int32(3))}, {Port: ptr(int32(4))}},
			[]discoveryv1.Endpoint{{Addresses: []string{"10.42.0.1", "10.42.0.2"}}, {Addresses: []string{"10.42.0.3"}}, {Addresses: []string{"10.42.0.4"}}, {Addresses: []string{"10.42.0.5"}}},
			"1,2,3 + 1 more...", "10.42.0.1,10.42.0.2,10.42.0.3 + 2 more..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := &discoveryv1.EndpointSlice{ObjectMeta: objMeta("web-abc", time.Hour), AddressType: discoveryv1.AddressTypeIPv4, Ports: tt.ports, Endpoints: tt.endpoints}
			assertCells(t, schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}, es, []interface{}{"web-abc", "IPv4", tt.wantPorts, tt.wantEps, "60m"})
		})
	}
}
