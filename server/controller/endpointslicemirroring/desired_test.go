package endpointslicemirroring

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

func TestDesired_Subsets_GroupedByAddressTypeAndPorts(t *testing.T) {
	http := []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	dns := []corev1.EndpointPort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
	cases := []struct {
		name        string
		subsets     []corev1.EndpointSubset
		wantGroups  map[string]int // "<type>/<port name>" -> endpoints
		wantSkipped int
	}{
		{"one subset", []corev1.EndpointSubset{{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}}},
			map[string]int{"IPv4/http": 1}, 0},
		{"ready and not ready together", []corev1.EndpointSubset{{Ports: http,
			Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}, NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.2.4"}}}},
			map[string]int{"IPv4/http": 2}, 0},
		{"two families", []corev1.EndpointSubset{{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}, {IP: "2001:db8::1"}}}},
			map[string]int{"IPv4/http": 1, "IPv6/http": 1}, 0},
		{"two port lists", []corev1.EndpointSubset{
			{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}},
			{Ports: dns, Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}}},
			map[string]int{"IPv4/http": 1, "IPv4/dns": 1}, 0},
		{"same address and ports twice", []corev1.EndpointSubset{
			{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}},
			{Ports: http, NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}}},
			map[string]int{"IPv4/http": 1}, 0},
		{"not an IP", []corev1.EndpointSubset{{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "example.com"}, {IP: "10.1.2.3"}}}},
			map[string]int{"IPv4/http": 1}, 1},
		{"over the per-subset cap", []corev1.EndpointSubset{{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "10.1.2.1"}, {IP: "10.1.2.2"}, {IP: "10.1.2.3"}}}},
			map[string]int{"IPv4/http": 2}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			groups, skipped := desired(&corev1.Endpoints{Subsets: c.subsets}, 2)
			got := map[string]int{}
			for _, g := range groups {
				got[string(g.addressType)+"/"+*g.ports[0].Name] = len(g.endpoints)
			}
			if len(got) != len(c.wantGroups) || skipped != c.wantSkipped {
				t.Fatalf("groups %v skipped %d, want %v skipped %d", got, skipped, c.wantGroups, c.wantSkipped)
			}
			for k, n := range c.wantGroups {
				if got[k] != n {
					t.Errorf("group %s: %d endpoints, want %d", k, got[k], n)
				}
			}
		})
	}
}

func TestDesired_Endpoint_CarriesReadinessAndIdentity(t *testing.T) {
	node := "node-1"
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{
		Ports:             []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		Addresses:         []corev1.EndpointAddress{{IP: "10.1.2.3", Hostname: "web-0", NodeName: &node, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-0"}}},
		NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.2.4"}},
	}}}
	groups, _ := desired(ep, MaxEndpointsPerSubset)
	if len(groups) != 1 || len(groups[0].endpoints) != 2 {
		t.Fatalf("groups = %+v", groups)
	}
	ready, notReady := groups[0].endpoints[0], groups[0].endpoints[1]
	if !*ready.Conditions.Ready || *notReady.Conditions.Ready {
		t.Errorf("ready %v, not ready %v", *ready.Conditions.Ready, *notReady.Conditions.Ready)
	}
	if deref(ready.Hostname) != "web-0" || deref(ready.NodeName) != "node-1" || ready.TargetRef == nil || ready.TargetRef.Name != "web-0" {
		t.Errorf("identity lost: %+v", ready)
	}
	if groups[0].addressType != discovery.AddressTypeIPv4 {
		t.Errorf("address type %s", groups[0].addressType)
	}
}

func TestGroupChunks_OverTheSliceCap_SplitsInOrder(t *testing.T) {
	g := &group{}
	for i := 0; i < 5; i++ {
		g.endpoints = append(g.endpoints, discovery.Endpoint{Addresses: []string{string(rune('a' + i))}})
	}
	chunks := g.chunks(2)
	if len(chunks) != 3 || len(chunks[0]) != 2 || len(chunks[2]) != 1 || chunks[2][0].Addresses[0] != "e" {
		t.Errorf("chunks = %v", chunks)
	}
}
