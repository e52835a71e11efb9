package netproxy

import (
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The kernel tests run the Proxier on the real kernel in a lab (see
// lab_test.go) and send real traffic through its rules.

const (
	podA = "10.42.1.10" // on this node (node-a)
	podB = "10.42.1.11" // said to be on node-b: not local
	// Each pod answers its name on namePort, and its name plus the
	// client address it sees on peerPort.
	namePort = 8080
	peerPort = 9090
)

// startLab is a lab with pods A and B serving on namePort and peerPort,
// routing between them like a node.
func startLab(t *testing.T) *lab {
	t.Helper()
	l := newLab(t)
	for ip, name := range map[string]string{podA: "pod-a", podB: "pod-b"} {
		ns := l.addPod(t, ip)
		serveName(t, ns, namePort, name)
		servePeer(t, ns, peerPort, name)
	}
	l.routeForward(t)
	return l
}

// startProxier runs a Proxier in the lab's node namespace over objs and
// waits for its first full sync.
func startProxier(t *testing.T, l *lab, syncPeriod time.Duration, objs ...runtime.Object) *proxierEnv {
	t.Helper()
	e := newEnv(t, Config{NetNS: l.nsPath(), SyncPeriod: syncPeriod, ServiceCIDRs: []*net.IPNet{testServiceCIDR}}, objs...)
	e.run(t)
	if r := e.waitSync(t, "at start", func(SyncResult) bool { return true }); !r.Full || r.Err != nil {
		t.Fatalf("first sync %+v, want a successful full sync", r)
	}
	return e
}

// labService is a Service at clusterIP:80 whose one port "p" leads to
// target on the endpoints (pod IP → node name).
func labService(name, clusterIP string, target int32, eps ...discoveryv1.Endpoint) (*corev1.Service, *discoveryv1.EndpointSlice) {
	p := svcPort("p", "", 80, target)
	return service("default", name, clusterIP, p), endpointSlice("default", name, name+"-1", slicePorts(p), eps...)
}

func TestKernel_ClusterIP_BalancesOverBothEndpointsThenFollowsRemoval(t *testing.T) {
	l := startLab(t)
	svc, sl := labService("web", "10.43.0.10", namePort, ep(podA, "node-a", ready), ep(podB, "node-b", ready))
	e := startProxier(t, l, time.Hour, svc, sl)

	got := l.names(t, "10.43.0.10:80", 40)
	t.Logf("40 connections from the node to the cluster IP: %v", got)
	if got["pod-a"] == 0 || got["pod-b"] == 0 || got["pod-a"]+got["pod-b"] != 40 {
		t.Fatalf("answers %v, want both pods and nothing else", got)
	}

	one := sl.DeepCopy()
	one.Endpoints = one.Endpoints[:1]
	e.updateSlice(t, one)
	r := e.waitSync(t, "after the endpoint removal", isPartial)
	if got := l.names(t, "10.43.0.10:80", 20); got["pod-a"] != 20 {
		t.Errorf("after one incremental sync (%d ops) answers %v, want pod-a only", r.Ops, got)
	}
}

func TestKernel_ServiceWithoutEndpoints_RefusedAtOnce(t *testing.T) {
	l := startLab(t)
	svc, sl := labService("empty", "10.43.0.11", namePort, ep(podA, "node-a", notReady))
	startProxier(t, l, time.Hour, svc, sl)

	// From the node (output hook) and from a pod (forward hook): the
	// Service's own port, a port it does not have, and an address in the
	// Service range that no Service has.
	for _, from := range []string{l.node, l.pods[podB]} {
		for _, to := range []string{"10.43.0.11:80", "10.43.0.11:81", "10.43.200.1:80"} {
			start := time.Now()
			_, err := dialFrom(from, to)
			elapsed := time.Since(start)
			t.Logf("dial %s from %s: %v after %v", to, from, err, elapsed)
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("dial %s from %s: %v, want ECONNREFUSED", to, from, err)
			}
		}
	}
}

func TestKernel_NodePort_LocalPolicyKeepsClientSourceClusterMasquerades(t *testing.T) {
	l := startLab(t)
	client := l.addClient(t, "192.168.77.2")
	local, localSl := labService("local", "10.43.0.20", peerPort, ep(podA, "node-a", ready), ep(podB, "node-b", ready))
	local.Spec.Type, local.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 30090
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	cluster, clusterSl := labService("cluster", "10.43.0.21", peerPort, ep(podB, "node-b", ready))
	cluster.Spec.Type, cluster.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 30091
	cluster.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	startProxier(t, l, time.Hour, local, localSl, cluster, clusterSl)

	tests := []struct {
		name, addr, want string
	}{
		// Only the local endpoint, which sees the client itself.
		{"ExternalLocal_LocalEndpointSeesClient", "192.168.77.1:30090", "pod-a 192.168.77.2"},
		// Masqueraded to the node's address on the pods' bridge.
		{"ExternalCluster_EndpointSeesNode", "192.168.77.1:30091", "pod-b 10.42.1.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 10 {
				got, err := dialFrom(client, tc.addr)
				if err != nil {
					t.Fatalf("dial %s from the client: %v", tc.addr, err)
				}
				if got != tc.want {
					t.Fatalf("answer %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestKernel_Hairpin_PodReachesItselfThroughItsService(t *testing.T) {
	l := startLab(t)
	self, selfSl := labService("self", "10.43.0.12", peerPort, ep(podA, "node-a", ready))
	startProxier(t, l, time.Hour, self, selfSl)

	tests := []struct {
		name, from, want string
	}{
		// Its own source would make the pod answer itself directly, not
		// through the Service: it is masqueraded to the node's address.
		{"EndpointItself_Masqueraded", l.pods[podA], "pod-a 10.42.1.1"},
		// Another pod keeps its source: pod traffic is not masqueraded.
		{"OtherPod_SourceKept", l.pods[podB], "pod-a " + podB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dialFrom(tc.from, "10.43.0.12:80")
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			if got != tc.want {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKernel_FullResync_RestoresHandDeletedObjectsAndRemovesStrays(t *testing.T) {
	l := startLab(t)
	svc, sl := labService("web", "10.43.0.10", namePort, ep(podA, "node-a", ready), ep(podB, "node-b", ready))
	e := startProxier(t, l, 300*time.Millisecond, svc, sl)
	sp := buildServicePorts(svc, []*discoveryv1.EndpointSlice{sl}, v4(), testOpts())[0]
	names := sp.names()
	endpointB := sp.endpointNames(endpoint{ip: v4().parse(podB), port: namePort}).chain
	const (
		strayChain = "service-ZZZZZZZZ-default/gone/tcp/p"
		straySet   = "affinity-ZZZZZZZZ-default/gone/tcp/p__10.42.9.9/80"
		strayMap   = "endpoints-ZZZZZZZZ-default/gone/tcp/p"
	)
	want := l.nft(t, "list", "table", "ip", "skiff")

	// What an admin (or another program) might do, in one commit: with
	// the 300 ms period a resync could otherwise land between two edits
	// (and delete the stray chain before the stray map names it).
	l.nftScript(t,
		"delete element ip skiff service-ips { 10.43.0.10 . tcp . 80 }",
		"flush chain ip skiff "+names.service,
		// pod-b is element 1 (endpoints in address order); its chain can
		// only go once no element leads to it.
		"delete element ip skiff "+names.serviceEndpoints+" { 1 }",
		"delete chain ip skiff "+endpointB,
		"add chain ip skiff "+strayChain,
		"add rule ip skiff "+strayChain+" jump mark-for-masquerade",
		"add set ip skiff "+straySet+" { type ipv4_addr ; }",
		// A stray endpoint map leading to the stray chain: removing both
		// in one batch needs the map flushed before the chain goes.
		"add map ip skiff "+strayMap+" { type mark : verdict ; }",
		"add element ip skiff "+strayMap+" { 0 : goto "+strayChain+" }",
	)
	// nft -f succeeded, so the edits were committed (a check of the
	// broken table here could race the 300 ms resync). Wait for the
	// resync that repairs everything, a few at most.
	got := l.nft(t, "list", "table", "ip", "skiff")
	for i := 0; i < 5 && got != want; i++ {
		e.waitSync(t, "periodic", isFull)
		got = l.nft(t, "list", "table", "ip", "skiff")
	}
	if got != want {
		t.Errorf("table after the resyncs:\n%s", lineDiff(want, got))
	}
	if got := l.names(t, "10.43.0.10:80", 20); got["pod-a"] == 0 || got["pod-b"] == 0 {
		t.Errorf("after the resync answers %v, want both pods", got)
	}
}

func TestKernel_PeriodicResync_SkipsUntouchedRulesetRestoresHandDeletedEndpointMapElement(t *testing.T) {
	l := startLab(t)
	svc, sl := labService("web", "10.43.0.10", namePort, ep(podA, "node-a", ready), ep(podB, "node-b", ready))
	e := startProxier(t, l, 200*time.Millisecond, svc, sl)
	sp := buildServicePorts(svc, []*discoveryv1.EndpointSlice{sl}, v4(), testOpts())[0]
	endpointMap := sp.names().serviceEndpoints
	endpointB := sp.endpointNames(endpoint{ip: v4().parse(podB), port: namePort}).chain

	// The proxier's own commit moved the generation by one: the kernel's
	// generation then proves the ruleset untouched.
	r := e.waitSync(t, "periodic", func(SyncResult) bool { return true })
	if !isSkipped(r) {
		t.Fatalf("first tick over an untouched ruleset: %+v, want skipped", r)
	}
	want := l.nft(t, "list", "table", "ip", "skiff")
	if !strings.Contains(want, "goto "+endpointB) {
		t.Fatalf("endpoint map does not lead to %s:\n%s", endpointB, want)
	}

	// nft's exit status proves the deletion; listing the broken table
	// here could race the 200 ms tick that repairs it.
	l.nft(t, "delete", "element", "ip", "skiff", endpointMap, "{ 1 }")
	r = e.waitSync(t, "after the hand edit", func(r SyncResult) bool { return !r.Skipped })
	if !isFull(r) {
		t.Fatalf("tick after the hand edit: %+v, want a full resync", r)
	}
	if got := l.nft(t, "list", "table", "ip", "skiff"); got != want {
		t.Errorf("table after the resync:\n%s", lineDiff(want, got))
	}
	if got := l.names(t, "10.43.0.10:80", 20); got["pod-a"] == 0 || got["pod-b"] == 0 {
		t.Errorf("after the resync answers %v, want both pods", got)
	}
	t.Logf("skipped resyncs: %v", metricValue(t, e.reg, "skiff_proxy_resync_skipped_total", ""))
}

func TestKernel_UDPEndpointRemoved_SameSocketMovesToOtherEndpoint(t *testing.T) {
	l := startLab(t)
	p := svcPort("dns", corev1.ProtocolUDP, 53, namePort)
	svc := service("default", "dns", "10.43.0.13", p)
	sl := endpointSlice("default", "dns", "dns-1", slicePorts(p), ep(podA, "node-a", ready), ep(podB, "node-b", ready))
	e := startProxier(t, l, time.Hour, svc, sl)

	var c net.Conn
	if err := inNetNS(l.node, func() (err error) {
		c, err = net.Dial("udp4", "10.43.0.13:53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask := func() string {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("?")); err != nil {
			t.Fatalf("send: %v", err)
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		return string(buf[:n])
	}
	first := ask()
	if again := ask(); again != first {
		t.Fatalf("one socket answered by %s then %s: the conntrack entry should hold", first, again)
	}

	// Remove whichever endpoint the socket's conntrack entry leads to: it
	// keeps listening, so only the entry's deletion moves the socket.
	kept := discoveryv1.Endpoint{}
	for _, x := range sl.Endpoints {
		if (x.Addresses[0] == podA) != (first == "pod-a") {
			kept = x
		}
	}
	one := sl.DeepCopy()
	one.Endpoints = []discoveryv1.Endpoint{kept}
	e.updateSlice(t, one)
	e.waitSync(t, "after the endpoint removal", isPartial)
	if got := ask(); got == first {
		t.Errorf("after the removal of %s the same socket still reaches it: stale conntrack entry kept", first)
	}
	if got := metricValue(t, e.reg, "skiff_proxy_conntrack_deletions_total", ""); got < 1 {
		t.Errorf("skiff_proxy_conntrack_deletions_total = %v, want at least 1", got)
	}
}

// dialFromAddr is dialFrom with the source address bound to local, as
// curl --interface does.
func dialFromAddr(ns, local, addr string) (string, error) {
	var c net.Conn
	err := inNetNS(ns, func() error {
		d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		var err error
		c, err = d.Dial("tcp4", addr)
		return err
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

// udpAsk sends one datagram on c and reads the answer.
func udpAsk(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("?")); err != nil {
		t.Fatalf("send: %v", err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("receive from %s: %v", c.RemoteAddr(), err)
	}
	return string(buf[:n])
}

func TestKernel_HostPorts_SamePortOnLoopbackNodeIPAndUDPReachEachPod(t *testing.T) {
	l := newLab(t)
	pods := map[string]string{"10.42.1.10": "pod-1", "10.42.1.11": "pod-2", "10.42.1.12": "pod-3", "10.42.1.13": "pod-4"}
	for _, ip := range slices.Sorted(maps.Keys(pods)) {
		ns := l.addPod(t, ip)
		serveName(t, ns, 8080, pods[ip])
		servePeer(t, ns, peerPort, pods[ip])
	}
	l.routeForward(t)
	// The node's own address, on a link of its own.
	sh(t, "ip", "-n", l.node, "link", "add", "br1", "type", "bridge")
	sh(t, "ip", "-n", l.node, "addr", "add", testNodeIP+"/24", "dev", "br1")
	sh(t, "ip", "-n", l.node, "link", "set", "br1", "up")

	src := &staticHostPorts{hps: []HostPort{
		hostPort("pod1", corev1.ProtocolTCP, "127.0.0.1", 54323, "10.42.1.10", 8080),
		hostPort("pod2", corev1.ProtocolTCP, testNodeIP, 54323, "10.42.1.11", 8080),
		hostPort("pod3", corev1.ProtocolUDP, testNodeIP, 54323, "10.42.1.12", 8080),
		hostPort("pod4", corev1.ProtocolTCP, "", 54324, "10.42.1.13", peerPort),
	}}
	e := newEnv(t, Config{NetNS: l.nsPath(), SyncPeriod: time.Hour, ServiceCIDRs: []*net.IPNet{testServiceCIDR}, HostPorts: src})
	e.run(t)
	if r := e.waitSync(t, "at start", func(SyncResult) bool { return true }); !isFull(r) {
		t.Fatalf("first sync %+v, want a successful full sync", r)
	}
	var localnet []byte
	if err := inNetNS(l.node, func() (err error) { localnet, err = os.ReadFile(routeLocalnetPath); return err }); err != nil || !strings.HasPrefix(string(localnet), "1") {
		t.Errorf("route_localnet in the node namespace %q (%v), want 1", localnet, err)
	}

	tcp := []struct {
		name, local, addr, want string
	}{
		// What the conformance test's curl --interface <node IP> does.
		{"LoopbackFromNodeIP_Pod1", testNodeIP, "127.0.0.1:54323", "pod-1"},
		// From 127.0.0.1 itself: routed out with route_localnet, masqueraded.
		{"LoopbackFromLoopback_Pod1", "", "127.0.0.1:54323", "pod-1"},
		{"NodeIP_Pod2", "", testNodeIP + ":54323", "pod-2"},
		// Every local address, the pod seeing the masqueraded loopback
		// client as the node's address on the pods' bridge.
		{"AnyAddressViaLoopback_Pod4Masqueraded", "", "127.0.0.1:54324", "pod-4 10.42.1.1"},
		{"AnyAddressViaBridgeIP_Pod4SeesNode", "", "10.42.1.1:54324", "pod-4 10.42.1.1"},
	}
	for _, tc := range tcp {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			var err error
			if tc.local != "" {
				got, err = dialFromAddr(l.node, tc.local, tc.addr)
			} else {
				got, err = dialFrom(l.node, tc.addr)
			}
			if err != nil || got != tc.want {
				t.Errorf("dial %s from %q: %q, %v; want %q", tc.addr, tc.local, got, err, tc.want)
			}
		})
	}
	// A pod reaching its own host port comes back through the node.
	if got, err := dialFrom(l.pods["10.42.1.13"], testNodeIP+":54324"); err != nil || got != "pod-4 10.42.1.1" {
		t.Errorf("pod-4 to its own host port: %q, %v; want it masqueraded to 10.42.1.1", got, err)
	}

	var udp net.Conn
	if err := inNetNS(l.node, func() (err error) { udp, err = net.Dial("udp4", testNodeIP+":54323"); return err }); err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	if got := udpAsk(t, udp); got != "pod-3" {
		t.Fatalf("UDP to %s:54323 answered by %q, want pod-3", testNodeIP, got)
	}

	// pod2 goes, and pod3's port is taken over by pod-1's address: the
	// TCP port stops answering, the same UDP socket moves.
	src.set([]HostPort{
		hostPort("pod1", corev1.ProtocolTCP, "127.0.0.1", 54323, "10.42.1.10", 8080),
		hostPort("pod5", corev1.ProtocolUDP, testNodeIP, 54323, "10.42.1.10", 8080),
	})
	e.p.HostPortsChanged()
	e.waitSync(t, "after pod2 and pod3 went", isPartial)
	if got, err := dialFrom(l.node, testNodeIP+":54323"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("TCP to %s:54323 after pod2 went: %q, %v; want ECONNREFUSED", testNodeIP, got, err)
	}
	if got := udpAsk(t, udp); got != "pod-1" {
		t.Errorf("the UDP socket answered by %q after its port moved, want pod-1 (stale conntrack entry kept?)", got)
	}
	if got, err := dialFrom(l.node, "127.0.0.1:54323"); err != nil || got != "pod-1" {
		t.Errorf("127.0.0.1:54323 after the change: %q, %v; want pod-1", got, err)
	}
}
