package podnet

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Every kernel test runs in network namespaces it creates (ip netns add)
// and deletes; the machine's own namespace is never changed.

var clusterCIDR = mustCIDR("10.244.0.0/16")

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("podnet kernel tests need root (network namespaces, bind mounts)")
	}
}

func randSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// addNS creates a named namespace (deleted at cleanup) with loopback up
// and returns its name.
func addNS(t *testing.T, prefix string) string {
	t.Helper()
	name := prefix + randSuffix()
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

func nsPath(name string) string { return "/run/netns/" + name }

// lab is a "switch" namespace holding a bridge that node namespaces plug into.
type lab struct {
	t  *testing.T
	sw string
}

func newLab(t *testing.T) *lab {
	sw := addNS(t, "pnsw")
	run(t, "ip", "-n", sw, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", sw, "link", "set", "br0", "up")
	return &lab{t: t, sw: sw}
}

// host adds a namespace with eth0 at addr (e.g. 172.31.0.1/24) on the switch.
func (l *lab) host(prefix, addr string) string {
	t := l.t
	t.Helper()
	ns := addNS(t, prefix)
	port := "p" + randSuffix()
	run(t, "ip", "-n", l.sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	run(t, "ip", "-n", l.sw, "link", "set", port, "master", "br0", "up")
	run(t, "ip", "-n", ns, "addr", "add", addr, "dev", "eth0")
	run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	return ns
}

// testNode is a node namespace with a Network operating in it.
type testNode struct {
	ns       string
	ip       net.IP
	stateDir string
	nsDir    string
	cfg      Config
	net      *Network
}

func newTestNode(t *testing.T, l *lab, name, addr string, backend Backend) *testNode {
	t.Helper()
	ns := l.host("pn"+name, addr)
	ip, _, _ := net.ParseCIDR(addr)
	nd := &testNode{ns: ns, ip: ip.To4(), stateDir: t.TempDir(), nsDir: t.TempDir()}
	t.Cleanup(func() { unmountAll(nd.nsDir) })
	nd.cfg = Config{
		NodeName: name, NodeIP: nd.ip, ClusterCIDR: clusterCIDR, Backend: backend,
		StateDir: nd.stateDir, NetNSDir: nd.nsDir, NetNS: nsPath(ns),
	}
	nd.net = nd.open(t)
	return nd
}

// open makes a new Network on the node's state (an agent restart).
func (nd *testNode) open(t *testing.T) *Network {
	t.Helper()
	n, err := New(nd.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// unmountAll detaches the pod namespaces left in dir and dir itself.
func unmountAll(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = unix.Unmount(filepath.Join(dir, e.Name()), unix.MNT_DETACH)
	}
	for unix.Unmount(dir, unix.MNT_DETACH) == nil {
	}
}

// inNS runs fn with the calling goroutine's thread inside the namespace at path.
func inNS(t *testing.T, path string, fn func() error) error {
	t.Helper()
	h, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatalf("open netns %s: %v", path, err)
	}
	defer h.Close()
	return inNetNS(h, fn)
}

// serveWhoAmI listens on addr inside the namespace at path and answers
// every connection with the address the connection came from.
func serveWhoAmI(t *testing.T, path, addr string) {
	t.Helper()
	var l net.Listener
	if err := inNS(t, path, func() (err error) {
		l, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		t.Fatalf("listen %s in %s: %v", addr, path, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			_, _ = c.Write([]byte(host + "\n"))
			_ = c.Close()
		}
	}()
}

// whoAmI connects from the namespace at path to addr and returns the
// source address the server saw.
func whoAmI(t *testing.T, path, addr string, timeout time.Duration) (string, error) {
	t.Helper()
	var c net.Conn
	if err := inNS(t, path, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, timeout)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// mustReach asserts that a connection from path to addr succeeds and the
// server sees wantSrc as its source.
func mustReach(t *testing.T, path, addr, wantSrc string) {
	t.Helper()
	var (
		got string
		err error
	)
	// The first packets may wait for ARP; retry briefly.
	for i := 0; i < 5; i++ {
		if got, err = whoAmI(t, path, addr, 2*time.Second); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("connect %s → %s: %v", path, addr, err)
	}
	if got != wantSrc {
		t.Fatalf("connect %s → %s: server saw source %s, want %s", path, addr, got, wantSrc)
	}
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
