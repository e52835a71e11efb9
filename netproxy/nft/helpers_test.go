package nft

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"skiff/runtime/nsthread"
)

// Every kernel test works in network namespaces it creates and deletes;
// the machine's own namespace is never touched.

func requireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatal("nft kernel tests need root (network namespaces, nftables)")
	}
}

func run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// addNS creates a namespace named skifft-nft-<what>-<random> with loopback
// up, deleted at cleanup, and returns its name.
func addNS(tb testing.TB, what string) string {
	tb.Helper()
	requireRoot(tb)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "skifft-nft-" + what + "-" + hex.EncodeToString(b)
	run(tb, "ip", "netns", "add", name)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	run(tb, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

func nsPath(name string) string { return "/run/netns/" + name }

// openIn opens a Conn on the namespace, closed at cleanup.
func openIn(tb testing.TB, ns string) *Conn {
	tb.Helper()
	c, err := Open(Options{NetNS: nsPath(ns)})
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// listTable is `nft list table` in the namespace (the CLI only reads).
func listTable(tb testing.TB, ns string, t Table) string {
	tb.Helper()
	return run(tb, "ip", "netns", "exec", ns, "nft", "list", "table", t.Family.String(), t.Name)
}

// inNS runs fn on an OS thread switched into the namespace: sockets fn
// creates stay in it. A thread that cannot be switched back stays locked
// so Go retires it.
func inNS(tb testing.TB, ns string, fn func() error) error {
	tb.Helper()
	return nsthread.DoPath(nsPath(ns), fn)
}

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

func hostNet(ip string) *net.IPNet {
	a := net.ParseIP(ip).To4()
	return &net.IPNet{IP: a, Mask: net.CIDRMask(32, 32)}
}
