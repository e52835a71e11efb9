package netproxy

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"skiff/runtime/nsthread"
)

// The kernel tests build a small node in network namespaces they create
// and delete: a "node" namespace with a bridge (10.42.1.1/24) and pod
// namespaces behind veths on it. Nothing touches the machine's own
// namespace: every ip command runs with -n, every socket is opened on a
// thread switched into a test namespace.

func requireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatal("kernel tests need root (network namespaces, nftables)")
	}
}

func sh(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// addNetNS creates skifft-px-<what>-<random> with loopback up; it is
// deleted at cleanup, also when the test fails.
func addNetNS(tb testing.TB, what string) string {
	tb.Helper()
	requireRoot(tb)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "skifft-px-" + what + "-" + hex.EncodeToString(b)
	sh(tb, "ip", "netns", "add", name)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	sh(tb, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

// lab is a node namespace and its pods.
type lab struct {
	node string
	pods map[string]string // pod IP → namespace
}

func (l *lab) nsPath() string { return "/run/netns/" + l.node }

// newLab makes the node namespace: bridge br0 at 10.42.1.1/24 and a route
// for the service range, so that locally sent packets to a cluster IP
// reach the nat output hook instead of failing the route lookup.
func newLab(tb testing.TB) *lab {
	tb.Helper()
	l := &lab{node: addNetNS(tb, "node"), pods: map[string]string{}}
	sh(tb, "ip", "-n", l.node, "link", "add", "br0", "type", "bridge")
	sh(tb, "ip", "-n", l.node, "addr", "add", "10.42.1.1/24", "dev", "br0")
	sh(tb, "ip", "-n", l.node, "link", "set", "br0", "up")
	sh(tb, "ip", "-n", l.node, "route", "add", "10.43.0.0/16", "dev", "br0")
	return l
}

// addPod makes a pod namespace with eth0 at ip/24 behind a veth on br0.
func (l *lab) addPod(tb testing.TB, ip string) string {
	tb.Helper()
	pod := addNetNS(tb, "pod")
	host := fmt.Sprintf("veth%d", len(l.pods))
	sh(tb, "ip", "-n", l.node, "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", pod)
	sh(tb, "ip", "-n", l.node, "link", "set", host, "master", "br0", "up")
	// As the pod network does: a pod reaching itself through a Service
	// gets its packets back out of the port they came in by.
	sh(tb, "ip", "-n", l.node, "link", "set", host, "type", "bridge_slave", "hairpin", "on")
	sh(tb, "ip", "-n", pod, "addr", "add", ip+"/24", "dev", "eth0")
	sh(tb, "ip", "-n", pod, "link", "set", "eth0", "up")
	sh(tb, "ip", "-n", pod, "route", "add", "default", "via", "10.42.1.1")
	l.pods[ip] = pod
	return pod
}

// inNetNS runs fn on an OS thread switched into namespace ns: sockets fn
// opens belong to ns for good. A thread that cannot be switched back is
// left locked, so the runtime retires it.
func inNetNS(ns string, fn func() error) error {
	return nsthread.DoPath("/run/netns/"+ns, fn)
}

// serveName answers every TCP connection and UDP datagram on port with
// name, from inside the pod's namespace, until the test ends.
func serveName(tb testing.TB, ns string, port int, name string) {
	tb.Helper()
	serveTCP(tb, ns, port, func(net.Addr) string { return name })
	var pc net.PacketConn
	err := inNetNS(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		tb.Fatalf("listen in %s: %v", ns, err)
	}
	tb.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name), from)
		}
	}()
}

// servePeer answers every TCP connection on port with "<name> <the
// client address it sees>": what tells a preserved source from a
// masqueraded one.
func servePeer(tb testing.TB, ns string, port int, name string) {
	tb.Helper()
	serveTCP(tb, ns, port, func(a net.Addr) string {
		host, _, _ := net.SplitHostPort(a.String())
		return name + " " + host
	})
}

// serveTCP answers each connection on port, in namespace ns, with what
// answer says for its peer, then closes it.
func serveTCP(tb testing.TB, ns string, port int, answer func(peer net.Addr) string) {
	tb.Helper()
	var ln net.Listener
	err := inNetNS(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		tb.Fatalf("listen in %s: %v", ns, err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, answer(c.RemoteAddr()))
			c.Close()
		}
	}()
}

// dialName connects from the node namespace to addr over TCP and reads
// the name the endpoint answers, with a 2 s bound.
func (l *lab) dialName(addr string) (string, error) { return dialFrom(l.node, addr) }

// dialFrom connects from namespace ns to addr over TCP and reads the
// answer, with a 2 s bound on each step.
func dialFrom(ns, addr string) (string, error) {
	var c net.Conn
	err := inNetNS(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, 2*time.Second)
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

// names dials n times and counts the answers by name.
func (l *lab) names(tb testing.TB, addr string, n int) map[string]int {
	tb.Helper()
	got := map[string]int{}
	for range n {
		name, err := l.dialName(addr)
		if err != nil {
			tb.Fatalf("dial %s: %v", addr, err)
		}
		got[name]++
	}
	return got
}

// nft runs the nft CLI in the node namespace (tests only read, or break
// things on purpose).
func (l *lab) nft(tb testing.TB, args ...string) string {
	tb.Helper()
	return sh(tb, "ip", append([]string{"netns", "exec", l.node, "nft"}, args...)...)
}

// nftScript runs nft commands (one per line) in the node namespace as a
// single nft -f transaction: one commit, so a resync cannot land between
// the lines.
func (l *lab) nftScript(tb testing.TB, lines ...string) {
	tb.Helper()
	cmd := exec.Command("ip", "netns", "exec", l.node, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("nft -f in %s: %v\n%s\n%s", l.node, err, out, strings.Join(lines, "\n"))
	}
}

// routeForward lets the node namespace route between its pods and
// clients, and pass bridged packets through the IPv4 hooks, as the agent
// sets a node up (sysctls of the test namespace only).
func (l *lab) routeForward(tb testing.TB) {
	tb.Helper()
	sh(tb, "ip", "netns", "exec", l.node, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	sh(tb, "ip", "netns", "exec", l.node, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1")
}

// addClient makes a namespace outside the pod range on br0: the node
// gets 192.168.77.1/24 (its "own address" for NodePorts) and the client
// ip/24, routed through the node.
func (l *lab) addClient(tb testing.TB, ip string) string {
	tb.Helper()
	sh(tb, "ip", "-n", l.node, "addr", "add", "192.168.77.1/24", "dev", "br0")
	c := addNetNS(tb, "client")
	sh(tb, "ip", "-n", l.node, "link", "add", "vethc", "type", "veth", "peer", "name", "eth0", "netns", c)
	sh(tb, "ip", "-n", l.node, "link", "set", "vethc", "master", "br0", "up")
	sh(tb, "ip", "-n", c, "addr", "add", ip+"/24", "dev", "eth0")
	sh(tb, "ip", "-n", c, "link", "set", "eth0", "up")
	sh(tb, "ip", "-n", c, "route", "add", "default", "via", "192.168.77.1")
	return c
}
