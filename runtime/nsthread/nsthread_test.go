package nsthread

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"testing"
)

// TestDoPath_ListenerStaysInTheNamespace_CallerThreadUntouched: a socket
// made inside belongs to the namespace (its address is not the caller's),
// and the caller's namespace is unchanged afterwards.
func TestDoPath_ListenerStaysInTheNamespace_CallerThreadUntouched(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (network namespaces)")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "skifft-nsthread-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "addr", "add", "192.0.2.77/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v: %s", err, out)
	}
	var ln net.Listener
	err := DoPath("/run/netns/"+name, func() error {
		var err error
		ln, err = net.Listen("tcp", "192.0.2.77:0") // exists only in the test namespace
		return err
	})
	if err != nil {
		t.Fatalf("listen inside: %v", err)
	}
	defer ln.Close()
	if _, err := net.Listen("tcp", "192.0.2.77:0"); err == nil {
		t.Errorf("192.0.2.77 is bindable outside the namespace: the caller was switched")
	}
	if err := DoPath("/run/netns/no-such-namespace-here", func() error { return nil }); err == nil {
		t.Errorf("DoPath of a missing namespace succeeded")
	}
}
