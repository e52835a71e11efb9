package podnet

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

func TestMasqRulesRenderAsFixture(t *testing.T) {
	want, err := os.ReadFile("testdata/masq.nft")
	if err != nil {
		t.Fatal(err)
	}
	if got := renderMasq(clusterCIDR); got != string(want) {
		t.Fatalf("renderMasq:\n%s\nwant:\n%s", got, want)
	}
	for i, r := range masqRules(clusterCIDR) {
		// payload+bitwise+cmp per match, then the verdict
		if got, want := len(r.exprs()), 3*len(r.match)+1; got != want {
			t.Errorf("rule %d compiles to %d expressions, want %d", i, got, want)
		}
	}
}

func TestAllocatorSkipsReservedAddressesAndPersists(t *testing.T) {
	dir := t.TempDir()
	a, err := loadAllocator(dir)
	if err != nil {
		t.Fatal(err)
	}
	cidr := mustCIDR("10.0.0.0/29") // usable: .2 … .6
	var got []string
	for i := range 5 {
		r, err := a.assign(record{UID: fmt.Sprintf("u%d", i)}, cidr)
		if err != nil {
			t.Fatalf("assign %d: %v", i, err)
		}
		got = append(got, r.IP)
	}
	if fmt.Sprint(got) != "[10.0.0.2 10.0.0.3 10.0.0.4 10.0.0.5 10.0.0.6]" {
		t.Fatalf("allocated %v", got)
	}
	if _, err := a.assign(record{UID: "u5"}, cidr); !errors.Is(err, ErrPodCIDRFull) {
		t.Fatalf("assign in a full CIDR: %v, want ErrPodCIDRFull", err)
	}
	if r, _ := a.assign(record{UID: "u1"}, cidr); r.IP != "10.0.0.3" {
		t.Fatalf("re-assign u1 = %s, want its own 10.0.0.3", r.IP)
	}
	if err := a.release("u1"); err != nil {
		t.Fatal(err)
	}
	if r, err := a.assign(record{UID: "u9"}, cidr); err != nil || r.IP != "10.0.0.3" {
		t.Fatalf("assign after release = %v %v, want the freed 10.0.0.3", r.IP, err)
	}

	// A new allocator on the same directory (agent restart) sees everything.
	b, err := loadAllocator(dir)
	if err != nil {
		t.Fatal(err)
	}
	if recs := b.list(); len(recs) != 5 {
		t.Fatalf("reloaded %d allocations, want 5: %+v", len(recs), recs)
	}
	if r, _ := b.get("u9"); r.IP != "10.0.0.3" {
		t.Fatalf("reloaded u9 = %+v", r)
	}
	if b.isFree(mustCIDR("10.0.0.3/32").IP) {
		t.Fatalf("reloaded allocator thinks 10.0.0.3 is free")
	}
}

func TestAllocatorMovesAPodWhosePodCIDRChanged(t *testing.T) {
	a, err := loadAllocator(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.assign(record{UID: "u"}, mustCIDR("10.0.1.0/24")); err != nil {
		t.Fatal(err)
	}
	r, err := a.assign(record{UID: "u"}, mustCIDR("10.0.2.0/24"))
	if err != nil || r.IP != "10.0.2.2" {
		t.Fatalf("assign in the new CIDR = %v %v", r.IP, err)
	}
	if !a.isFree(mustCIDR("10.0.1.2/32").IP) {
		t.Fatalf("old address not released")
	}
}

func TestInvalidUIDsAreRejected(t *testing.T) {
	for _, uid := range []string{"", ".", "..", "a/b", "x.tmp", string(make([]byte, 201))} {
		if err := validUID(uid); !errors.Is(err, ErrInvalidUID) {
			t.Errorf("validUID(%q) = %v, want ErrInvalidUID", uid, err)
		}
	}
	if err := validUID("0b8c2f9e-1d2c-4f6a-9c1e-7d1b2a3c4d5e"); err != nil {
		t.Errorf("a UUID was rejected: %v", err)
	}
}

func TestStableMACIsDeterministicUnicastAndLocal(t *testing.T) {
	a, b := stableMAC("node-1", "vxlan"), stableMAC("node-1", "vxlan")
	if a.String() != b.String() {
		t.Fatalf("MAC not stable: %s vs %s", a, b)
	}
	if a[0]&0x01 != 0 || a[0]&0x02 == 0 {
		t.Fatalf("MAC %s is not a locally administered unicast address", a)
	}
	if stableMAC("node-2", "vxlan").String() == a.String() || stableMAC("node-1", "bridge").String() == a.String() {
		t.Fatalf("MACs of different nodes or purposes collide")
	}
}
