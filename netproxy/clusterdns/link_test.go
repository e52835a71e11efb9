package clusterdns

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"runtime"
	"slices"
	"testing"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// inFreshNetns runs fn on this goroutine's OS thread switched into a new
// named network namespace, then switches back and deletes it, also when
// fn fails. Sockets opened by fn belong to that namespace.
func inFreshNetns(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create a network namespace")
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("current netns: %v", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "skifft-dns-" + hex.EncodeToString(b)
	ns, err := netns.NewNamed(name) // also switches this thread into it
	if err != nil {
		_ = netns.Set(orig)
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatalf("create netns %s: %v", name, err)
	}
	defer func() {
		ns.Close()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: Go retires it rather than let
			// another goroutine run in the test namespace.
			t.Errorf("back to the original netns: %v", err)
		} else {
			runtime.UnlockOSThread()
		}
		orig.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
	}()
	fn()
}

func TestEnsureAddress_FreshNetns_DummyUpWithAddress_Idempotent(t *testing.T) {
	tests := []struct {
		name string
		addr net.IP
		bits int
	}{
		{"IPv4", net.ParseIP("10.43.0.10"), 32},
		{"IPv6", net.ParseIP("fd00:43::a"), 128},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inFreshNetns(t, func() {
				for i := range 2 {
					if err := EnsureAddress("skiff-dns", tt.addr); err != nil {
						t.Fatalf("EnsureAddress #%d: %v", i+1, err)
					}
				}
				link, err := netlink.LinkByName("skiff-dns")
				if err != nil {
					t.Fatalf("link: %v", err)
				}
				if typ := link.Type(); (typ != "dummy" && typ != "bridge") || link.Attrs().Flags&net.FlagUp == 0 {
					t.Errorf("link type %s flags %v, want an up dummy (or bridge without dummy driver)", typ, link.Attrs().Flags)
				}
				t.Logf("link kind: %s", link.Type())
				addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, a := range addrs {
					if !a.IP.IsLinkLocalUnicast() {
						got = append(got, a.IPNet.String())
					}
				}
				want := (&net.IPNet{IP: tt.addr, Mask: net.CIDRMask(tt.bits, tt.bits)}).String()
				if !slices.Equal(got, []string{want}) {
					t.Errorf("addresses %v, want exactly %s", got, want)
				}
			})
		})
	}
}

func TestEnsureAddress_NameTakenByAnotherKind_Fails(t *testing.T) {
	inFreshNetns(t, func() {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "skiff-dns"}, PeerName: "skiff-dns-peer"}
		if err := netlink.LinkAdd(veth); err != nil {
			t.Fatalf("veth: %v", err)
		}
		if err := EnsureAddress("skiff-dns", net.ParseIP("10.43.0.10")); err == nil {
			t.Error("EnsureAddress took over a veth")
		}
	})
}

// TestEnsureAddress_ThenServe_AnswersOnClusterDNSAddress is the node's
// path: the address on the dummy link, the server bound to it on port 53,
// a client in the same namespace.
func TestEnsureAddress_ThenServe_AnswersOnClusterDNSAddress(t *testing.T) {
	inFreshNetns(t, func() {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(lo); err != nil { // local delivery goes through lo
			t.Fatal(err)
		}
		addr := net.ParseIP("10.43.0.10")
		if err := EnsureAddress("skiff-dns", addr); err != nil {
			t.Fatal(err)
		}
		env := startServer(t, Config{Addr: addr, Port: 53}, service("kube-system", "api", []string{"10.43.0.1"}))
		for _, netw := range []string{"udp", "tcp"} {
			r := exchange(t, netw, "10.43.0.10:53", "api.kube-system.svc.cluster.local.", dns.TypeA, 0)
			if !slices.Equal(section(r.Answer), []string{"A 10.43.0.1"}) {
				t.Errorf("over %s: %s", netw, describe(r))
			}
		}
		if got := env.srv.UDPAddr().String(); got != "10.43.0.10:53" {
			t.Errorf("UDPAddr %s", got)
		}
		env.stop() // before the namespace goes
	})
}
