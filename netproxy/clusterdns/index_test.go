package clusterdns

import (
	"net/netip"
	"testing"
)

func readyEndpoint(addr, hostname string) endpointInfo {
	return endpointInfo{addrs: []netip.Addr{netip.MustParseAddr(addr)}, hostname: hostname, ready: true}
}

func TestIndex_EventSequences_LeaveNoStaleRecords(t *testing.T) {
	clusterIP := &serviceInfo{kind: kindClusterIP, clusterIPs: []netip.Addr{netip.MustParseAddr("10.43.0.9")},
		ports: []portInfo{{name: "http", proto: "tcp", port: 80}}}
	hl := &serviceInfo{kind: kindHeadless}
	sl := &sliceInfo{
		ports:     []portInfo{{name: "http", proto: "tcp", port: 8080}},
		endpoints: []endpointInfo{readyEndpoint("10.42.0.1", "a")},
	}
	a, b := svcKey{"ns", "a"}, svcKey{"ns", "b"}
	sliceKey := svcKey{"ns", "s1"}
	tests := []struct {
		name   string
		events func(x *index)
		names  []string // names that must exist
		ptrs   int
		states int // services (or their slices) remembered
	}{
		{"service then deleted", func(x *index) {
			x.setService(a, clusterIP)
			x.setService(a, nil)
		}, nil, 0, 0},
		{"slice before its service, both deleted", func(x *index) {
			x.setSlice(sliceKey, "a", sl)
			x.setService(a, hl)
			x.setSlice(sliceKey, "a", nil)
			x.setService(a, nil)
		}, nil, 0, 0},
		{"service deleted, slice stays: nothing answers", func(x *index) {
			x.setService(a, hl)
			x.setSlice(sliceKey, "a", sl)
			x.setService(a, nil)
		}, nil, 0, 1},
		{"slice relabelled to another service moves its endpoints", func(x *index) {
			x.setService(a, hl)
			x.setService(b, hl)
			x.setSlice(sliceKey, "a", sl)
			x.setSlice(sliceKey, "b", sl)
		}, []string{
			"a.ns.svc.cluster.local.",
			"b.ns.svc.cluster.local.", "a.b.ns.svc.cluster.local.",
			"_http._tcp.b.ns.svc.cluster.local.", "_tcp.b.ns.svc.cluster.local.",
		}, 1, 2},
		{"headless becomes ClusterIP: endpoint names go", func(x *index) {
			x.setService(a, hl)
			x.setSlice(sliceKey, "a", sl)
			x.setService(a, clusterIP)
		}, []string{
			"a.ns.svc.cluster.local.", "_http._tcp.a.ns.svc.cluster.local.", "_tcp.a.ns.svc.cluster.local.",
		}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newIndex("cluster.local.")
			tt.events(x)
			if len(x.names) != len(tt.names) {
				t.Errorf("index holds %d names %v, want %v", len(x.names), keys(x.names), tt.names)
			}
			for _, n := range tt.names {
				if _, ok := x.names[n]; !ok {
					t.Errorf("%s missing", n)
				}
			}
			if len(x.ptrs) != tt.ptrs {
				t.Errorf("index holds %d reverse names, want %d", len(x.ptrs), tt.ptrs)
			}
			if len(x.services) != tt.states {
				t.Errorf("index remembers %d services, want %d", len(x.services), tt.states)
			}
			if len(tt.names) == 0 && len(x.nsCount) != 0 {
				t.Errorf("namespaces still counted: %v", x.nsCount)
			}
		})
	}
}

func TestIndex_SameAddressInTwoServices_PTRListsBoth_UntilOneGoes(t *testing.T) {
	x := newIndex("cluster.local.")
	hl := &serviceInfo{kind: kindHeadless}
	sl := &sliceInfo{endpoints: []endpointInfo{readyEndpoint("10.42.0.1", "")}}
	x.setService(svcKey{"ns", "a"}, hl)
	x.setService(svcKey{"ns", "b"}, hl)
	x.setSlice(svcKey{"ns", "a-1"}, "a", sl)
	x.setSlice(svcKey{"ns", "b-1"}, "b", sl)
	const rev = "1.0.42.10.in-addr.arpa."
	if got := x.lookupPTR(rev); len(got) != 2 {
		t.Fatalf("PTR %v, want both services' names", got)
	}
	x.setService(svcKey{"ns", "a"}, nil)
	if got := x.lookupPTR(rev); len(got) != 1 || got[0] != "10-42-0-1.b.ns.svc.cluster.local." {
		t.Errorf("PTR after a's deletion %v, want b's name only", got)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
