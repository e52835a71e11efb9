package podnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func startNode(t *testing.T, nd *testNode, n *Network, cidr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Start(ctx, mustCIDR(cidr)); err != nil {
		t.Fatalf("Start on %s: %v", nd.ns, err)
	}
}

func setupPod(t *testing.T, n *Network, uid string) PodNetwork {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pn, err := n.SetupPod(ctx, PodRequest{UID: uid, Namespace: "default", Name: "p-" + uid})
	if err != nil {
		t.Fatalf("SetupPod %s: %v", uid, err)
	}
	return pn
}

func teardownPod(t *testing.T, n *Network, uid string) {
	t.Helper()
	if err := n.TeardownPod(context.Background(), uid); err != nil {
		t.Fatalf("TeardownPod %s: %v", uid, err)
	}
}

// nodeHandle is a netlink handle inside the node's namespace (for checks).
func nodeHandle(t *testing.T, ns string) *netlink.Handle {
	t.Helper()
	h, err := netns.GetFromPath(nsPath(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	return nl
}

func TestStartConfiguresNodeAndIsIdempotent(t *testing.T) {
	requireRoot(t)
	l := newLab(t)
	nd := newTestNode(t, l, "a", "172.31.0.1/24", BackendVXLAN)
	startNode(t, nd, nd.net, "10.244.1.0/24")
	h := nodeHandle(t, nd.ns)

	if got := strings.TrimSpace(run(t, "ip", "netns", "exec", nd.ns, "cat", "/proc/sys/net/ipv4/ip_forward")); got != "1" {
		t.Errorf("ip_forward in node namespace = %q, want 1", got)
	}
	br, err := h.LinkByName(DefaultBridgeName)
	if err != nil {
		t.Fatalf("bridge: %v", err)
	}
	if br.Attrs().MTU != 1450 {
		t.Errorf("bridge MTU = %d, want 1450 (1500 underlay - 50 VXLAN)", br.Attrs().MTU)
	}
	assertOnlyAddr(t, h, br, "10.244.1.1/24")
	vx, err := h.LinkByName(DefaultVXLANName)
	if err != nil {
		t.Fatalf("vxlan: %v", err)
	}
	v := vx.(*netlink.Vxlan)
	if v.VxlanId != 1 || v.Port != 8472 || v.Learning || !v.SrcAddr.Equal(nd.ip) {
		t.Errorf("vxlan = VNI %d port %d learning %v local %s", v.VxlanId, v.Port, v.Learning, v.SrcAddr)
	}
	assertOnlyAddr(t, h, vx, "10.244.1.0/32")
	ann := nd.net.Annotations()
	if ann[AnnotationVTEPMAC] != vx.Attrs().HardwareAddr.String() || ann[AnnotationNodeIP] != "172.31.0.1" ||
		ann[AnnotationBackend] != "vxlan" || ann[AnnotationPodCIDRs] != "10.244.1.0/24" {
		t.Errorf("annotations %v (vxlan MAC %s)", ann, vx.Attrs().HardwareAddr)
	}

	// Break settings, then restart: links are reused and repaired.
	run(t, "ip", "-n", nd.ns, "link", "set", DefaultBridgeName, "mtu", "1000")
	run(t, "ip", "-n", nd.ns, "addr", "add", "10.9.9.9/24", "dev", DefaultBridgeName)
	run(t, "ip", "-n", nd.ns, "link", "set", DefaultVXLANName, "down")
	n2 := nd.open(t)
	startNode(t, nd, n2, "10.244.1.0/24")
	vx2, _ := h.LinkByName(DefaultVXLANName)
	br2, _ := h.LinkByName(DefaultBridgeName)
	if vx2.Attrs().Index != vx.Attrs().Index || vx2.Attrs().HardwareAddr.String() != vx.Attrs().HardwareAddr.String() {
		t.Errorf("vxlan device recreated or MAC changed across restart")
	}
	if br2.Attrs().MTU != 1450 || vx2.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("restart did not repair: bridge MTU %d, vxlan flags %v", br2.Attrs().MTU, vx2.Attrs().Flags)
	}
	assertOnlyAddr(t, h, br2, "10.244.1.1/24")

	want, err := os.ReadFile("testdata/masq.nft")
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, "ip", "netns", "exec", nd.ns, "nft", "list", "table", "ip", TableName); got != string(want) {
		t.Errorf("nft list table:\n%s\nwant (testdata/masq.nft):\n%s", got, want)
	}
}

func assertOnlyAddr(t *testing.T, h *netlink.Handle, link netlink.Link, want string) {
	t.Helper()
	addrs, err := h.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range addrs {
		got = append(got, a.IPNet.String())
	}
	if len(got) != 1 || got[0] != want {
		t.Errorf("%s addresses = %v, want [%s]", link.Attrs().Name, got, want)
	}
}

func TestPodsOnOneNodeReachEachOtherAndSurviveRestart(t *testing.T) {
	requireRoot(t)
	l := newLab(t)
	nd := newTestNode(t, l, "a", "172.31.0.1/24", BackendVXLAN)
	startNode(t, nd, nd.net, "10.244.1.0/24")
	h := nodeHandle(t, nd.ns)

	a := setupPod(t, nd.net, "uid-a")
	b := setupPod(t, nd.net, "uid-b")
	if a.IP.Equal(b.IP) || !mustCIDR("10.244.1.0/24").Contains(a.IP) {
		t.Fatalf("pod IPs %s and %s: want distinct addresses in 10.244.1.0/24", a.IP, b.IP)
	}
	for _, ip := range []string{"10.244.1.0", "10.244.1.1", "10.244.1.255"} {
		if a.IP.String() == ip || b.IP.String() == ip {
			t.Fatalf("allocated reserved address %s", ip)
		}
	}
	if a.NetNSPath != nd.net.NetNSPath("uid-a") || !isNetNSMount(a.NetNSPath) {
		t.Fatalf("netns path %s is not a mounted namespace", a.NetNSPath)
	}
	serveWhoAmI(t, b.NetNSPath, b.IP.String()+":8080")
	mustReach(t, a.NetNSPath, b.IP.String()+":8080", a.IP.String()) // no NAT between pods

	host, err := h.LinkByName(HostVethName("uid-a"))
	if err != nil {
		t.Fatalf("host veth: %v", err)
	}
	if br, _ := h.LinkByName(DefaultBridgeName); host.Attrs().MasterIndex != br.Attrs().Index {
		t.Errorf("host veth not on the bridge")
	}
	if pi, err := h.LinkGetProtinfo(host); err != nil || !pi.Hairpin {
		t.Errorf("hairpin on %s: %v %v", host.Attrs().Name, pi, err)
	}

	// Idempotent: same answer; a deleted veth is repaired.
	run(t, "ip", "-n", nd.ns, "link", "del", HostVethName("uid-a"))
	again := setupPod(t, nd.net, "uid-a")
	if again.NetNSPath != a.NetNSPath || !again.IP.Equal(a.IP) {
		t.Fatalf("second SetupPod = %+v, want %+v", again, a)
	}
	mustReach(t, a.NetNSPath, b.IP.String()+":8080", a.IP.String())

	// Restart: a new Network on the same state sees the allocations.
	n2 := nd.open(t)
	pods, err := n2.Pods()
	if err != nil || len(pods) != 2 || pods[0].UID != "uid-a" || !pods[0].IP.Equal(a.IP) || !pods[1].IP.Equal(b.IP) {
		t.Fatalf("Pods after restart = %+v, %v", pods, err)
	}
	startNode(t, nd, n2, "10.244.1.0/24")
	if again := setupPod(t, n2, "uid-b"); !again.IP.Equal(b.IP) {
		t.Fatalf("SetupPod after restart gave %s, want %s", again.IP, b.IP)
	}
	mustReach(t, a.NetNSPath, b.IP.String()+":8080", a.IP.String()) // running pods unharmed

	// Teardown removes everything and frees the address; repeats are fine.
	teardownPod(t, n2, "uid-a")
	teardownPod(t, n2, "uid-a")
	teardownPod(t, n2, "never-seen")
	if _, err := h.LinkByName(HostVethName("uid-a")); err == nil {
		t.Errorf("host veth still present after teardown")
	}
	if _, err := os.Stat(a.NetNSPath); !isNotExist(err) {
		t.Errorf("netns file still present: %v", err)
	}
	if !n2.alloc.isFree(a.IP) {
		t.Errorf("address %s still allocated after teardown", a.IP)
	}
	if pods, _ := n2.Pods(); len(pods) != 1 || pods[0].UID != "uid-b" {
		t.Errorf("Pods after teardown = %+v", pods)
	}
	if _, err := os.Stat(n2.alloc.path("uid-a")); !isNotExist(err) {
		t.Errorf("allocation file still present: %v", err)
	}
}

func TestConcurrentSetupGivesDistinctAddresses(t *testing.T) {
	requireRoot(t)
	l := newLab(t)
	nd := newTestNode(t, l, "a", "172.31.0.1/24", BackendHostGW)
	startNode(t, nd, nd.net, "10.244.1.0/24")
	const pods = 16
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		ips   = map[string]string{}
		total time.Duration
	)
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uid := fmt.Sprintf("uid-%02d", i)
			start := time.Now()
			pn, err := nd.net.SetupPod(context.Background(), PodRequest{UID: uid})
			d := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			total += d
			if err != nil {
				t.Errorf("SetupPod %s: %v", uid, err)
				return
			}
			if other, dup := ips[pn.IP.String()]; dup {
				t.Errorf("%s and %s both got %s", uid, other, pn.IP)
			}
			ips[pn.IP.String()] = uid
		}()
	}
	wg.Wait()
	t.Logf("SetupPod: %d pods concurrently, mean %v each", pods, total/pods)
	start := time.Now()
	setupPod(t, nd.net, "uid-serial")
	t.Logf("SetupPod: one pod alone took %v", time.Since(start))
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := nd.net.TeardownPod(context.Background(), fmt.Sprintf("uid-%02d", i)); err != nil {
				t.Errorf("TeardownPod: %v", err)
			}
		}()
	}
	wg.Wait()
	if got, _ := nd.net.Pods(); len(got) != 1 {
		t.Errorf("Pods after concurrent teardown = %d, want 1", len(got))
	}
}

func TestBackendNoneGivesNamespaceWithLoopbackOnly(t *testing.T) {
	requireRoot(t)
	l := newLab(t)
	nd := newTestNode(t, l, "a", "172.31.0.1/24", BackendNone)
	if err := nd.net.Start(context.Background(), nil); err != nil {
		t.Fatalf("Start: %v", err)
	}
	pn := setupPod(t, nd.net, "uid-none")
	if pn.IP != nil || !isNetNSMount(pn.NetNSPath) {
		t.Fatalf("SetupPod = %+v, want a namespace and no address", pn)
	}
	out, err := exec.Command("nsenter", "--net="+pn.NetNSPath, "ip", "-o", "link").CombinedOutput()
	if err != nil || strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), "lo: <LOOPBACK,UP") {
		t.Fatalf("links in pod namespace: %v\n%s", err, out)
	}
	if _, err := nodeHandle(t, nd.ns).LinkByName(DefaultBridgeName); err == nil {
		t.Errorf("backend none created a bridge")
	}
	teardownPod(t, nd.net, "uid-none")
	if pods, _ := nd.net.Pods(); len(pods) != 0 {
		t.Errorf("Pods after teardown = %+v", pods)
	}
}

func TestPodOperationsBeforeStartFail(t *testing.T) {
	// New alone touches no kernel state, so this runs against the test
	// process's own namespace safely: SetupPod must refuse before Start.
	n, err := New(Config{NodeName: "x", StateDir: t.TempDir(), NetNSDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.SetupPod(context.Background(), PodRequest{UID: "u"}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("SetupPod before Start: %v, want ErrNotStarted", err)
	}
	if err := n.SetPeers(context.Background(), nil); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("SetPeers before Start: %v, want ErrNotStarted", err)
	}
	if got := n.Annotations(); got[AnnotationBackend] != "vxlan" || got[AnnotationPodCIDRs] != "" {
		t.Fatalf("Annotations before Start = %v", got)
	}
}
