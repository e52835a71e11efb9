package podnet

import (
	"context"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func peerOf(nd *testNode, cidr string) Peer {
	return Peer{Name: nd.cfg.NodeName, InternalIP: nd.ip, PodCIDR: mustCIDR(cidr),
		Annotations: nd.net.Annotations()}
}

func setPeers(t *testing.T, n *Network, peers ...Peer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.SetPeers(ctx, peers); err != nil {
		t.Fatalf("SetPeers: %v", err)
	}
}

// podnetRoutes lists the routes podnet installed in a node namespace.
func podnetRoutes(t *testing.T, h *netlink.Handle) []string {
	t.Helper()
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4,
		&netlink.Route{Protocol: routeProtocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range routes {
		out = append(out, r.Dst.String()+" via "+r.Gw.String())
	}
	return out
}

func TestPodsOnTwoNodesReachEachOtherWithoutNAT(t *testing.T) {
	requireRoot(t)
	for _, backend := range []Backend{BackendVXLAN, BackendHostGW} {
		t.Run(string(backend), func(t *testing.T) {
			l := newLab(t)
			a := newTestNode(t, l, "a", "172.31.0.1/24", backend)
			b := newTestNode(t, l, "b", "172.31.0.2/24", backend)
			startNode(t, a, a.net, "10.244.1.0/24")
			startNode(t, b, b.net, "10.244.2.0/24")
			// A peer that has not published its VTEP MAC or pod CIDR yet is skipped.
			unready := Peer{Name: "c", InternalIP: []byte{172, 31, 0, 3}}
			setPeers(t, a.net, peerOf(b, "10.244.2.0/24"), unready)
			setPeers(t, b.net, peerOf(a, "10.244.1.0/24"))
			setPeers(t, a.net, peerOf(b, "10.244.2.0/24"), unready) // idempotent

			pa := setupPod(t, a.net, "uid-on-a")
			pb := setupPod(t, b.net, "uid-on-b")
			serveWhoAmI(t, pb.NetNSPath, pb.IP.String()+":8080")
			mustReach(t, pa.NetNSPath, pb.IP.String()+":8080", pa.IP.String())

			ha := nodeHandle(t, a.ns)
			wantVia := "10.244.2.0/24 via 172.31.0.2"
			if backend == BackendVXLAN {
				wantVia = "10.244.2.0/24 via 10.244.2.0"
			}
			if got := podnetRoutes(t, ha); len(got) != 1 || got[0] != wantVia {
				t.Fatalf("routes on a = %v, want [%s]", got, wantVia)
			}

			if backend == BackendVXLAN {
				// B's address changes: A's forwarding entry follows, without duplicates.
				moved := peerOf(b, "10.244.2.0/24")
				moved.Annotations = map[string]string{AnnotationVTEPMAC: moved.Annotations[AnnotationVTEPMAC],
					AnnotationNodeIP: "172.31.0.22"}
				setPeers(t, a.net, moved)
				if got := fdbDsts(t, ha); len(got) != 1 || got[0] != "172.31.0.22" {
					t.Fatalf("FDB on a after b moved = %v, want [172.31.0.22]", got)
				}
				setPeers(t, a.net, peerOf(b, "10.244.2.0/24"))
				mustReach(t, pa.NetNSPath, pb.IP.String()+":8080", pa.IP.String())
			}

			// B leaves: its route (and VXLAN entries) disappear from A.
			setPeers(t, a.net)
			if got := podnetRoutes(t, ha); len(got) != 0 {
				t.Fatalf("routes on a after removal = %v, want none", got)
			}
			if backend == BackendVXLAN {
				vx, err := ha.LinkByName(DefaultVXLANName)
				if err != nil {
					t.Fatal(err)
				}
				neigh, _ := ha.NeighList(vx.Attrs().Index, netlink.FAMILY_V4)
				fdb, _ := ha.NeighList(vx.Attrs().Index, unix.AF_BRIDGE)
				if len(neigh) != 0 || len(fdb) != 0 {
					t.Fatalf("vxlan entries left: neigh %v fdb %v", neigh, fdb)
				}
			}
			if _, err := whoAmI(t, pa.NetNSPath, pb.IP.String()+":8080", time.Second); err == nil {
				t.Fatalf("pod on b still reachable after b left the peer set")
			}
		})
	}
}

func fdbDsts(t *testing.T, h *netlink.Handle) []string {
	t.Helper()
	vx, err := h.LinkByName(DefaultVXLANName)
	if err != nil {
		t.Fatal(err)
	}
	fdb, err := h.NeighList(vx.Attrs().Index, unix.AF_BRIDGE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range fdb {
		out = append(out, e.IP.String())
	}
	return out
}

func TestPodTrafficLeavingTheClusterIsMasqueraded(t *testing.T) {
	requireRoot(t)
	l := newLab(t)
	a := newTestNode(t, l, "a", "172.31.0.1/24", BackendVXLAN)
	outside := l.host("pnout", "172.31.0.100/24")
	startNode(t, a, a.net, "10.244.1.0/24")
	pa := setupPod(t, a.net, "uid-client")
	serveWhoAmI(t, nsPath(outside), "172.31.0.100:9090")
	mustReach(t, pa.NetNSPath, "172.31.0.100:9090", "172.31.0.1")
}
