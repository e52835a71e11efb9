package nodeipam

import (
	"errors"
	"net"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func cidr(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, c, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustSet(t *testing.T, cluster string, mask int) *cidrSet {
	t.Helper()
	s, err := newCIDRSet(cidr(t, cluster), mask)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewCIDRSet_RejectsBadMasks(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		mask    int
		ok      bool
	}{
		{"10.42.0.0/16", 24, true},
		{"10.42.0.0/16", 16, true},
		{"10.42.0.0/16", 15, false},  // node subnet larger than the range
		{"10.42.0.0/16", 33, false},  // beyond the address size
		{"10.0.0.0/8", 24, true},     // exactly 2^16 subnets
		{"10.0.0.0/8", 25, false},    // 2^17 subnets: too many to track
		{"fd00:42::/48", 64, true},   // IPv6: 2^16 subnets
		{"fd00:42::/56", 129, false}, // beyond the address size
	} {
		_, err := newCIDRSet(cidr(t, tc.cluster), tc.mask)
		if (err == nil) != tc.ok {
			t.Errorf("newCIDRSet(%s, /%d) error = %v, want ok=%v", tc.cluster, tc.mask, err, tc.ok)
		}
	}
}

func TestCIDRSet_AllocatesDistinctSubnetsUntilExhausted(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		mask    int
		want    []string
	}{
		{"10.42.0.0/22", 24, []string{"10.42.0.0/24", "10.42.1.0/24", "10.42.2.0/24", "10.42.3.0/24"}},
		{"10.42.0.7/23", 24, []string{"10.42.0.0/24", "10.42.1.0/24"}}, // host bits in the range are ignored
		{"192.168.0.0/24", 26, []string{"192.168.0.0/26", "192.168.0.64/26", "192.168.0.128/26", "192.168.0.192/26"}},
		{"fd00:42::/62", 64, []string{"fd00:42::/64", "fd00:42:0:1::/64", "fd00:42:0:2::/64", "fd00:42:0:3::/64"}},
	} {
		s := mustSet(t, tc.cluster, tc.mask)
		var got []string
		for {
			c, err := s.allocate()
			if errors.Is(err, errFull) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s /%d: allocated %v, want %v", tc.cluster, tc.mask, got, tc.want)
		}
	}
}

func TestCIDRSet_FreedSubnetReusedAfterTheOthers(t *testing.T) {
	s := mustSet(t, "10.42.0.0/22", 24)
	a, _ := s.allocate()
	b, _ := s.allocate()
	s.release(a)
	// The search goes on past b before coming back to a.
	for _, want := range []string{"10.42.2.0/24", "10.42.3.0/24", "10.42.0.0/24"} {
		c, err := s.allocate()
		if err != nil || c.String() != want {
			t.Fatalf("allocate = %v, %v; want %s", c, err, want)
		}
	}
	if _, err := s.allocate(); !errors.Is(err, errFull) {
		t.Fatalf("allocate on a full range = %v, want errFull", err)
	}
	s.release(b)
	if c, err := s.allocate(); err != nil || c.String() != b.String() {
		t.Fatalf("allocate after release = %v, %v; want %v", c, err, b)
	}
}

func TestCIDRSet_Occupy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		occupy   string
		inRange  bool
		freeLeft int // of the 4 subnets of 10.42.0.0/22
	}{
		{"exact subnet", "10.42.1.0/24", true, 3},
		{"smaller than a subnet", "10.42.2.128/25", true, 3},
		{"spanning two subnets", "10.42.2.0/23", true, 2},
		{"covering the whole range", "10.0.0.0/8", true, 0},
		{"straddling the range's start", "10.41.255.0/23", false, 4}, // 10.41.254.0/23 once masked
		{"overlapping the range's start", "10.40.0.0/14", true, 0},
		{"host bits set", "10.42.3.0/23", true, 2}, // 10.42.2.0/23 once masked
		{"outside", "10.43.0.0/24", false, 4},
		{"other family", "fd00::/64", false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSet(t, "10.42.0.0/22", 24)
			in, _ := s.occupy(cidr(t, tc.occupy))
			if in != tc.inRange || s.free() != tc.freeLeft {
				t.Errorf("occupy(%s) in=%v free=%d; want in=%v free=%d", tc.occupy, in, s.free(), tc.inRange, tc.freeLeft)
			}
			s.release(cidr(t, tc.occupy))
			if s.free() != 4 {
				t.Errorf("after release free=%d, want 4", s.free())
			}
		})
	}
}

func TestAllocator_RebuiltFromNodes_NeverHandsOutAHeldSubnet(t *testing.T) {
	a := newAllocator(mustSet(t, "10.42.0.0/22", 24))
	// Before a restart nodes a and c got the first and third subnet.
	a.occupy("a", "uid-a", []*net.IPNet{cidr(t, "10.42.0.0/24")})
	a.occupy("c", "uid-c", []*net.IPNet{cidr(t, "10.42.2.0/24")})
	got := map[string]bool{}
	for _, n := range []string{"x", "y"} {
		c, err := a.allocate(n, types.UID("uid-"+n))
		if err != nil {
			t.Fatal(err)
		}
		got[c[0].String()] = true
	}
	if !got["10.42.1.0/24"] || !got["10.42.3.0/24"] {
		t.Fatalf("allocated %v, want the two subnets nobody held", got)
	}
	if _, err := a.allocate("z", "uid-z"); !errors.Is(err, errFull) {
		t.Fatalf("fifth node: err = %v, want errFull", err)
	}
	if !a.release("a") {
		t.Fatal("release of a node holding a subnet reported nothing freed")
	}
	c, err := a.allocate("z", "uid-z")
	if err != nil || c[0].String() != "10.42.0.0/24" {
		t.Fatalf("after a's deletion z got %v, %v; want 10.42.0.0/24", c, err)
	}
}

func TestAllocator_SameNodeSeenAgain_HoldsOnce(t *testing.T) {
	a := newAllocator(mustSet(t, "10.42.0.0/23", 24))
	held := []*net.IPNet{cidr(t, "10.42.0.0/24")}
	for range 3 {
		a.occupy("a", "uid-a", held)
	}
	a.release("a")
	if free := a.sets[0].free(); free != 2 {
		t.Fatalf("free after release = %d, want 2: repeated occupy counted more than once", free)
	}
}

func TestAllocator_NodeRecreated_OldIncarnationReleased(t *testing.T) {
	a := newAllocator(mustSet(t, "10.42.0.0/23", 24))
	if _, err := a.allocate("a", "old"); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.held("a", "new"); ok {
		t.Fatal("the new incarnation was reported as holding the old one's subnet")
	}
	if a.releaseIfNot("a", "old") {
		t.Fatal("releaseIfNot released the current incarnation")
	}
	if !a.releaseIfNot("a", "new") {
		t.Fatal("releaseIfNot kept the old incarnation's subnet")
	}
	if free := a.sets[0].free(); free != 2 {
		t.Fatalf("free = %d, want 2", free)
	}
}

func TestAllocator_DualStack_AllOrNothing(t *testing.T) {
	a := newAllocator(mustSet(t, "10.42.0.0/23", 24), mustSet(t, "fd00:42::/64", 64))
	got, err := a.allocate("a", "uid-a")
	if err != nil || len(got) != 2 || got[0].String() != "10.42.0.0/24" || got[1].String() != "fd00:42::/64" {
		t.Fatalf("allocate = %v, %v; want an IPv4 then an IPv6 subnet", got, err)
	}
	// The IPv6 range is now full: the IPv4 subnet taken for b is given back.
	if _, err := a.allocate("b", "uid-b"); !errors.Is(err, errFull) {
		t.Fatalf("allocate with a full IPv6 range = %v, want errFull", err)
	}
	if free := a.sets[0].free(); free != 1 {
		t.Fatalf("IPv4 free = %d, want 1", free)
	}
}

func TestAllocator_OccupyOutsideRange_Reported(t *testing.T) {
	a := newAllocator(mustSet(t, "10.42.0.0/16", 24))
	outside, shared := a.occupy("a", "uid-a", []*net.IPNet{cidr(t, "192.168.7.0/24")})
	if len(outside) != 1 || shared {
		t.Fatalf("outside=%v shared=%v, want the one CIDR outside", outside, shared)
	}
	_, shared = a.occupy("b", "uid-b", []*net.IPNet{cidr(t, "10.42.0.0/23")})
	_, shared2 := a.occupy("c", "uid-c", []*net.IPNet{cidr(t, "10.42.1.0/24")})
	if shared || !shared2 {
		t.Fatalf("shared = %v, %v; want only c's overlap reported", shared, shared2)
	}
}
