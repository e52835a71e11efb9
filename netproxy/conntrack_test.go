package netproxy

import (
	"net"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vishvananda/netlink"

	"skiff/netproxy/nft"
)

// fakeConntrack records the flows it is asked to delete.
type fakeConntrack struct {
	mu    sync.Mutex
	calls [][]staleFlow
}

func (f *fakeConntrack) DeleteUDP(_ nft.Family, flows []staleFlow) (uint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, flows)
	return uint(len(flows)), nil
}

func (f *fakeConntrack) Close() error { return nil }

func (f *fakeConntrack) flows() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		for _, fl := range c {
			out = append(out, fl.String())
		}
	}
	return out
}

func TestStaleFlows(t *testing.T) {
	udpSvc, udpSl := udpNamedPorts()
	udpSvc.Spec.Ports = udpSvc.Spec.Ports[:1] // dns only
	udpNP := udpSvc.DeepCopy()
	udpNP.Spec.Type = corev1.ServiceTypeNodePort
	udpNP.Spec.Ports[0].NodePort = 30053
	udpNP.Spec.ExternalIPs = []string{"198.51.100.53"}
	oneLeft := udpSl.DeepCopy()
	oneLeft.Endpoints = oneLeft.Endpoints[:1]
	none := udpSl.DeepCopy()
	none.Endpoints = nil
	tcpSvc, tcpSl := clusterIPTwoNodes()
	tcpOne := tcpSl.DeepCopy()
	tcpOne.Endpoints = tcpOne.Endpoints[:1]

	port := func(svc *corev1.Service, sl *discoveryv1.EndpointSlice) *installedPort {
		if svc == nil {
			return nil
		}
		sp := buildServicePorts(svc, []*discoveryv1.EndpointSlice{sl}, v4(), testOpts())[0]
		return &installedPort{sp: sp}
	}
	tests := []struct {
		name       string
		old, new   *installedPort
		afterStart bool
		want       []string
	}{
		{"UDPEndpointRemoved_EntriesRepliedByItDeleted", port(udpSvc, udpSl), port(udpSvc, oneLeft), true,
			[]string{"udp dst 10.43.0.70:53 reply-src 10.42.2.21"}},
		{"UDPNodePortEndpointRemoved_ExternalIPAndNodePortToo", port(udpNP, udpSl), port(udpNP, oneLeft), true,
			[]string{"udp dst 10.43.0.70:53 reply-src 10.42.2.21", "udp dst 198.51.100.53:53 reply-src 10.42.2.21", "udp dst *:30053 reply-src 10.42.2.21"}},
		{"UDPServiceDeleted_EveryEndpointsEntriesDeleted", port(udpSvc, udpSl), nil, true,
			[]string{"udp dst 10.43.0.70:53 reply-src 10.42.1.20", "udp dst 10.43.0.70:53 reply-src 10.42.2.21"}},
		{"UDPFirstEndpoint_EntriesToServiceDeleted", port(udpSvc, none), port(udpSvc, oneLeft), true,
			[]string{"udp dst 10.43.0.70:53 reply-src *"}},
		{"UDPNewServiceWithEndpoints_EntriesToServiceDeleted", nil, port(udpSvc, oneLeft), true,
			[]string{"udp dst 10.43.0.70:53 reply-src *"}},
		{"UDPFirstSyncAfterStart_NothingKnownNothingDeleted", nil, port(udpSvc, oneLeft), false, nil},
		{"UDPUnchanged_NothingDeleted", port(udpSvc, udpSl), port(udpSvc, udpSl), true, nil},
		{"TCPEndpointRemoved_NothingDeleted", port(tcpSvc, tcpSl), port(tcpSvc, tcpOne), true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range staleFlows(planned{old: tc.old, new: tc.new}, tc.afterStart) {
				got = append(got, f.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestConntrackFilter_MatchesOnlyTheStaleFlow(t *testing.T) {
	fl := staleFlow{origDst: v4().parse("10.43.0.70"), origPort: 53, replySrc: v4().parse("10.42.2.21")}
	f, err := conntrackFilter(fl)
	if err != nil {
		t.Fatal(err)
	}
	np, err := conntrackFilter(staleFlow{origPort: 30053, replySrc: v4().parse("10.42.2.21")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		flow         string
		want, wantNP bool
		proto        uint8
		dst, rsrc    string
		dport        uint16
	}{
		{"the stale one", true, false, 17, "10.43.0.70", "10.42.2.21", 53},
		{"other endpoint", false, false, 17, "10.43.0.70", "10.42.1.20", 53},
		{"other port", false, false, 17, "10.43.0.70", "10.42.2.21", 54},
		{"tcp", false, false, 6, "10.43.0.70", "10.42.2.21", 53},
		{"nodeport on a node address", false, true, 17, "192.168.1.2", "10.42.2.21", 30053},
	}
	for _, tc := range tests {
		flow := conntrackFlow(tc.proto, tc.dst, tc.rsrc, tc.dport)
		if got := f.MatchConntrackFlow(flow); got != tc.want {
			t.Errorf("%s: service filter match %t, want %t", tc.flow, got, tc.want)
		}
		if got := np.MatchConntrackFlow(flow); got != tc.wantNP {
			t.Errorf("%s: nodeport filter match %t, want %t", tc.flow, got, tc.wantNP)
		}
	}
}

// conntrackFlow is an entry from a client at 10.42.9.9 to dst:dport whose
// replies come from rsrc.
func conntrackFlow(proto uint8, dst, rsrc string, dport uint16) *netlink.ConntrackFlow {
	f := &netlink.ConntrackFlow{}
	f.Forward = netlink.IPTuple{Protocol: proto, SrcIP: net.ParseIP("10.42.9.9"), DstIP: net.ParseIP(dst), SrcPort: 40000, DstPort: dport}
	f.Reverse = netlink.IPTuple{Protocol: proto, SrcIP: net.ParseIP(rsrc), DstIP: net.ParseIP("10.42.9.9"), SrcPort: dport, DstPort: 40000}
	return f
}
