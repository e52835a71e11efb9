package e2e

// The network of a multi-node test: a "switch" namespace holding a bridge,
// and one namespace per node (and per test host) joined to it by a veth
// pair. Nothing here touches the machine's own namespace: links, addresses,
// routes and sysctls are all set inside namespaces this file creates, and
// teardown deletes them.

import (
	"skiff/runtime/mountinfo"

	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// labGatewayOctet is the last octet of the test host's address on
	// every lab subnet; nodes route everything not on the subnet to it.
	labGatewayOctet = 254
	// labOutsideIP is an extra address of the test host, off the lab
	// subnet, that nodes reach through their default route: what "the
	// internet" is to a pod (masquerade tests).
	labOutsideIP = "198.18.0.1"
	// labHTTPPort is where the test host's HTTP server listens.
	labHTTPPort = 8080
)

// netLab is the network of one test: subnet 172.30.<k>.0/24, namespaces
// named skf<k>-*. k is claimed by creating the switch namespace, which
// fails if another test (in this process or another) holds it.
type netLab struct {
	t  *testing.T
	k  int
	sw string // the switch namespace, with bridge br0

	mu  sync.Mutex
	nss []string // every namespace made, switch first
}

// newNetLab claims a free subnet and makes the switch namespace.
func newNetLab(t *testing.T) *netLab {
	t.Helper()
	start := 1 + rand.IntN(250)
	for i := range 250 {
		k := 1 + (start+i)%250
		prefix := fmt.Sprintf("skf%d-", k)
		if labNamespaceExists(t, prefix) {
			continue
		}
		sw := prefix + "sw"
		if err := exec.Command("ip", "netns", "add", sw).Run(); err != nil {
			continue // taken meanwhile
		}
		l := &netLab{t: t, k: k, sw: sw, nss: []string{sw}}
		l.ip(sw, "link", "add", "br0", "type", "bridge")
		l.ip(sw, "link", "set", "br0", "up")
		l.ip(sw, "link", "set", "lo", "up")
		return l
	}
	t.Fatal("no free lab subnet 172.30.<1..250>.0/24: stale skf*- namespaces? (ip netns list)")
	return nil
}

// labNamespaceExists reports whether any namespace name starts with prefix.
func labNamespaceExists(t *testing.T, prefix string) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// ip runs `ip -n <ns> args...` (ns "" = no -n), failing the test on error.
func (l *netLab) ip(ns string, args ...string) {
	l.t.Helper()
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// addr is 172.30.<k>.<octet>.
func (l *netLab) addr(octet int) net.IP {
	return net.IPv4(172, 30, byte(l.k), byte(octet)).To4()
}

// vethName is the switch-side end of a namespace's link (≤ 15 chars).
func (l *netLab) vethName(suffix string) string {
	return fmt.Sprintf("v%d-%s", l.k, suffix)
}

// addNamespace makes namespace skf<k>-<suffix> with eth0 plugged into the
// bridge, address 172.30.<k>.<octet>/24, lo up, a default route via the
// test host and ip_forward=1.
func (l *netLab) addNamespace(suffix string, octet int) string {
	l.t.Helper()
	ns := fmt.Sprintf("skf%d-%s", l.k, suffix)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		l.t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	l.mu.Lock()
	l.nss = append(l.nss, ns)
	l.mu.Unlock()
	veth := l.vethName(suffix)
	l.ip(l.sw, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
	l.ip(l.sw, "link", "set", veth, "master", "br0", "up")
	l.ip(ns, "link", "set", "lo", "up")
	l.ip(ns, "link", "set", "eth0", "up")
	l.ip(ns, "addr", "add", l.addr(octet).String()+"/24", "dev", "eth0")
	if octet != labGatewayOctet {
		l.ip(ns, "route", "add", "default", "via", l.addr(labGatewayOctet).String())
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		l.t.Fatalf("ip_forward in %s: %v: %s", ns, err, out)
	}
	return ns
}

// setLink sets the switch side of a namespace's link down or up: down is a
// pulled cable (packets vanish, dials time out).
func (l *netLab) setLink(suffix string, up bool) {
	l.t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	l.ip(l.sw, "link", "set", l.vethName(suffix), state)
}

// teardown kills every process left in the lab's namespaces and deletes
// them. It logs instead of failing: it runs in cleanup.
func (l *netLab) teardown() {
	l.mu.Lock()
	nss := append([]string(nil), l.nss...)
	l.mu.Unlock()
	for _, ns := range nss {
		killNamespacePids(l.t, ns)
	}
	for i := len(nss) - 1; i >= 0; i-- {
		if out, err := exec.Command("ip", "netns", "del", nss[i]).CombinedOutput(); err != nil {
			l.t.Logf("ip netns del %s: %v: %s", nss[i], err, out)
		}
	}
}

// killNamespacePids SIGKILLs every process in ns until none is left (10 s
// at most).
func killNamespacePids(t *testing.T, ns string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return // namespace gone
		}
		var pids []int
		for _, p := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(p); err == nil && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("namespace %s: processes %v survive SIGKILL", ns, pids)
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inNetns runs fn on an OS thread switched into namespace ns, then
// switches the thread back (or, failing that, lets it die with the
// goroutine) so no other goroutine ever runs in ns by mistake. Sockets fn
// opens stay in ns afterwards.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current netns: %w", err)
			return // still locked: the thread goes with the goroutine
		}
		defer orig.Close()
		h, err := netns.GetFromName(ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", ns, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", ns, err)
			return
		}
		err = fn()
		// Back home before the thread serves other goroutines; if that
		// fails the thread stays locked and dies with this goroutine.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// dialIn opens a TCP connection from namespace ns.
func dialIn(ctx context.Context, ns, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(ns, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}

// listenIn opens a TCP listener in namespace ns.
func listenIn(ns, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetns(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// httpClientIn is an HTTP client whose connections start in namespace ns.
// It does not verify certificates (health endpoints only) and opens a new
// connection per request, so a cut link shows at once.
func httpClientIn(ns string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return dialIn(ctx, ns, addr)
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
		},
	}
}

// getIn GETs url from namespace ns and returns the body and status code.
func getIn(ns, url string, timeout time.Duration) (string, int, error) {
	resp, err := httpClientIn(ns, timeout).Get(url)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

// testHost is a machine outside the cluster on the lab's bridge, at
// 172.30.<k>.254 (every node's default gateway) and 198.18.0.1 (off the
// subnet, reached through the default route). It runs an HTTP server on
// port 8080 that answers every request with "peer <ip>:<port>" and
// remembers the peer addresses, to tell masqueraded traffic from direct.
type testHost struct {
	ns string
	ip net.IP
	// URL is http://172.30.<k>.254:8080, OutsideURL http://198.18.0.1:8080.
	URL, OutsideURL string

	ln    net.Listener
	srv   *http.Server
	mu    sync.Mutex
	peers []string
}

// startTestHost makes the gateway namespace; serve starts its HTTP server.
func (l *netLab) startTestHost(serve bool) *testHost {
	l.t.Helper()
	ns := l.addNamespace("host", labGatewayOctet)
	l.ip(ns, "addr", "add", labOutsideIP+"/32", "dev", "lo")
	h := &testHost{ns: ns, ip: l.addr(labGatewayOctet)}
	h.URL = fmt.Sprintf("http://%s:%d", h.ip, labHTTPPort)
	h.OutsideURL = fmt.Sprintf("http://%s:%d", labOutsideIP, labHTTPPort)
	if !serve {
		return h
	}
	ln, err := listenIn(ns, fmt.Sprintf(":%d", labHTTPPort))
	if err != nil {
		l.t.Fatalf("test host listen: %v", err)
	}
	h.ln = ln
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.peers = append(h.peers, r.RemoteAddr)
		h.mu.Unlock()
		fmt.Fprintf(w, "peer %s\n", r.RemoteAddr)
	}), ReadHeaderTimeout: 10 * time.Second}
	go h.srv.Serve(ln)
	return h
}

// Peers are the remote addresses (ip:port) of every request so far.
func (h *testHost) Peers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.peers...)
}

// PeerIPs are the distinct remote IPs of every request so far.
func (h *testHost) PeerIPs() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range h.Peers() {
		ip, _, _ := net.SplitHostPort(p)
		if !seen[ip] {
			seen[ip] = true
			out = append(out, ip)
		}
	}
	return out
}

func (h *testHost) close() {
	if h.srv != nil {
		h.srv.Close()
	}
}

// killNetnsUsersUnder SIGKILLs every process whose network namespace is
// one bind-mounted below root (pod namespaces a node's agent made): the
// containers in them are not in any node namespace.
func killNetnsUsersUnder(t *testing.T, root string) {
	mps, err := mountinfo.Under(root)
	if err != nil {
		t.Logf("mounts under %s: %v", root, err)
		return
	}
	inodes := map[string]bool{}
	for _, mp := range mps {
		var st syscall.Stat_t
		if err := syscall.Stat(mp, &st); err == nil {
			inodes[fmt.Sprintf("net:[%d]", st.Ino)] = true
		}
	}
	if len(inodes) == 0 {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		link, err := os.Readlink(p)
		if err != nil || !inodes[link] {
			continue
		}
		pid, err := strconv.Atoi(strings.Split(p, "/")[2])
		if err == nil && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder detaches every mount at or below root, deepest first.
func unmountUnder(t *testing.T, root string) {
	mps, err := mountinfo.Under(root)
	if err != nil {
		t.Logf("mounts under %s: %v", root, err)
		return
	}
	for _, mp := range mps {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			t.Logf("unmount %s: %v", mp, err)
		}
	}
}

func TestNetns_ServerInNamespace_ReachableFromPeer_KillRefuses_CutTimesOut_RestartServes(t *testing.T) {
	c := newNetCluster(t, netClusterSpec{Agents: 1, TestHost: true, DeferAgents: true})
	peer := c.agents[0]

	if body, code, err := c.readyz(peer, 5*time.Second); err != nil || code != 200 || body != "ok" {
		t.Fatalf("readyz from %s: %d %q %v, want 200 ok", peer.NS, code, body, err)
	}
	if out := c.kubectlOK("get", "--raw", "/readyz"); out != "ok" {
		t.Fatalf("kubectl in the server namespace: %q", out)
	}
	c.kubectlOK("create", "configmap", "survives-restart", "--from-literal=k=v")
	cm, err := c.clientset().CoreV1().ConfigMaps("default").Get(context.Background(), "survives-restart", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("client-go through the server namespace: %v %v", cm, err)
	}
	// The machine's own namespace gained no lab link or address.
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifi := range ifs {
		addrs, _ := ifi.Addrs()
		for _, a := range addrs {
			if strings.HasPrefix(ifi.Name, fmt.Sprintf("v%d-", c.lab.k)) || strings.HasPrefix(a.String(), fmt.Sprintf("172.30.%d.", c.lab.k)) {
				t.Fatalf("lab link %s %s in the machine's namespace", ifi.Name, a)
			}
		}
	}

	// The test host sees nodes by their own addresses, on the subnet and
	// through the default route.
	for _, url := range []string{c.host.URL, c.host.OutsideURL} {
		body, code, err := c.server.Get(url, 5*time.Second)
		if err != nil || code != 200 || !strings.HasPrefix(body, "peer "+c.server.IP.String()+":") {
			t.Fatalf("GET %s from the server: %d %q %v", url, code, body, err)
		}
	}
	if ips := c.host.PeerIPs(); len(ips) != 1 || ips[0] != c.server.IP.String() {
		t.Fatalf("test host peers %v, want only %s", ips, c.server.IP)
	}
	if out, err := peer.Exec(context.Background(), "sysctl", "-n", "net.ipv4.ip_forward"); err != nil || strings.TrimSpace(out) != "1" {
		t.Fatalf("ip_forward in %s: %q %v", peer.NS, out, err)
	}

	apiAddr := net.JoinHostPort(c.server.IP.String(), "6443")
	c.server.CutLink()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	conn, err := peer.Dial(ctx, apiAddr)
	cancel()
	if err == nil {
		conn.Close()
		t.Fatalf("dial across a cut link succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) && !netIsTimeout(err) {
		t.Fatalf("dial across a cut link: %v, want a timeout", err)
	}
	c.server.RestoreLink()
	netWaitReadyzFrom(t, c, peer, 15*time.Second)

	c.server.Kill()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	conn, err = peer.Dial(ctx, apiAddr)
	cancel()
	if err == nil {
		conn.Close()
		t.Fatalf("dial to a killed server succeeded")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a killed server: %v, want connection refused", err)
	}

	c.server.Restart()
	c.waitServerReady(60 * time.Second)
	netWaitReadyzFrom(t, c, peer, 15*time.Second)
	if out := c.kubectlOK("get", "configmap", "survives-restart", "-o", "jsonpath={.data.k}"); out != "v" {
		t.Fatalf("configmap after restart: %q", out)
	}
}

func netIsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func netWaitReadyzFrom(t *testing.T, c *netCluster, from *netNode, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		body, code, err := c.readyz(from, 2*time.Second)
		if err == nil && code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz from %s within %v: %d %q %v", from.Name, within, code, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestNetns_Teardown_RemovesNamespacesStrayProcessesAndMounts(t *testing.T) {
	var nss []string
	var strays []*exec.Cmd
	var mounts, dirs []string
	t.Run("cluster", func(t *testing.T) {
		c := newNetCluster(t, netClusterSpec{Agents: 2, NoServer: true})
		dirs = append(dirs, c.base)
		other := newNetCluster(t, netClusterSpec{NoServer: true})
		if c.lab.k == other.lab.k {
			t.Fatalf("two labs share subnet %d", c.lab.k)
		}
		nss = append(nss, c.lab.sw, c.host.ns, other.lab.sw, other.host.ns)
		for _, n := range c.nodes() {
			nss = append(nss, n.NS)
		}
		a, b := c.agents[0], c.agents[1]
		// The nodes share a wire: a closed port on the peer refuses.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := a.Dial(ctx, net.JoinHostPort(b.IP.String(), "1")); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s from %s: %v, want connection refused", b.IP, a.Name, err)
		}
		// A process that left every group, in a node namespace.
		stray := exec.Command("nsenter", "--net=/run/netns/"+a.NS, "--", "sleep", "300")
		stray.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		// A "pod": a namespace bind-mounted in a data dir, with a process.
		podNS := filepath.Join(b.DataDir, "netns-pod")
		if err := os.WriteFile(podNS, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		pod := exec.Command("unshare", "--net="+podNS, "sleep", "300")
		pod.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		for _, cmd := range []*exec.Cmd{stray, pod} {
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			strays = append(strays, cmd)
		}
		tmp := filepath.Join(a.DataDir, "tmpfs")
		os.MkdirAll(tmp, 0o700)
		if err := syscall.Mount("tmpfs", tmp, "tmpfs", 0, ""); err != nil {
			t.Fatal(err)
		}
		mounts = append(mounts, tmp, podNS)
		netWaitFor(t, 5*time.Second, "pod namespace mounted", func() bool {
			mps, _ := mountinfo.Under(podNS)
			return len(mps) == 1
		})
	})
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		if strings.Contains(string(out)+"\n", ns+"\n") || strings.Contains(string(out), ns+" ") {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	for _, cmd := range strays {
		if err := cmd.Wait(); err == nil {
			t.Errorf("%v exited by itself, want it killed by the teardown", cmd.Args)
		}
	}
	for _, mp := range mounts {
		if mps, _ := mountinfo.Under(mp); len(mps) != 0 {
			t.Errorf("mount %s left behind", mp)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("data dir %s left behind: %v", d, err)
		}
	}
}

func netWaitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
