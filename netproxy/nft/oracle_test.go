package nft

import (
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

var expires = regexp.MustCompile(`expires [0-9a-z]+`)

// everyStatement is a transaction using every statement type, in both
// address families.
func everyStatement(fam Family) *Tx {
	addr, peer, prefix, odd := "10.1.2.3", "10.9.8.7", "10.244.0.0/16", "10.240.0.0/12"
	key := KeyIPv4Addr
	if fam == IPv6 {
		addr, peer, prefix, odd = "fd00::1", "fd00::99", "fd00:244::/64", "fd00:240::/28"
		key = KeyIPv6Addr
	}
	tx := NewTx(Table{Family: fam, Name: "every"})
	tx.AddTable()
	for _, c := range []Chain{
		{Name: "pre", Type: TypeNAT, Hook: HookPrerouting, Priority: -100},
		{Name: "in", Type: TypeFilter, Hook: HookInput},
		{Name: "post", Type: TypeNAT, Hook: HookPostrouting, Priority: 100},
		{Name: "a"}, {Name: "b"},
	} {
		tx.AddChain(c)
	}
	triple := Set{Name: "triple", Key: []KeyType{key, KeyInetProto, KeyInetService}, Verdict: true}
	pair := Set{Name: "pair", Key: []KeyType{KeyInetProto, KeyInetService}, Verdict: true}
	ports := Set{Name: "ports", Key: []KeyType{KeyInetService}, Verdict: true}
	seen := Set{Name: "seen", Key: []KeyType{key}, Timeout: 90 * time.Second}
	for _, s := range []Set{triple, pair, ports, seen} {
		tx.AddSet(s)
	}
	ip, pip := net.ParseIP(addr), net.ParseIP(peer)
	host := &net.IPNet{IP: ip, Mask: net.CIDRMask(len(ip.To16())*8, len(ip.To16())*8)}
	if fam == IPv4 {
		host = hostNet(addr)
	}
	rules := [][]Stmt{
		{MatchAddr{Field: FieldDAddr, Net: host}, MatchAddr{Field: FieldSAddr, Net: mustCIDR(prefix), Negate: true}, jump("a")},
		{MatchAddr{Field: FieldSAddr, Net: mustCIDR(odd)}, Verdict{Kind: Return}},
		{MatchProto{Proto: UDP}, MatchDPort{Port: 53}, Counter{}, Verdict{Kind: Accept}},
		{MatchLocalDst{}, VMap{Key: protoPort, Map: pair.Name}},
		{MatchAddr{Field: FieldDAddr, Net: host}, MatchLoopbackIn{Negate: true}, Verdict{Kind: Drop}},
		{MatchLoopbackIn{}, Verdict{Kind: Accept}},
		{VMap{Key: addrProtoPort, Map: triple.Name}},
		{VMap{Key: []Field{FieldDPort}, Map: ports.Name}},
		{MatchSAddrInSet{Set: seen.Name}, goTo("b")},
		{UpdateSet{Set: seen.Name, Field: FieldSAddr}},
		{NumgenVMap{Targets: []Verdict{goTo("a"), goTo("b"), {Kind: Drop}}}},
		{MatchProto{Proto: TCP}, Reject{TCPReset: true}},
		{Reject{}},
	}
	for _, r := range rules {
		tx.AddRule("in", "", r...)
	}
	tx.AddRule("pre", "to the pod", MatchProto{Proto: TCP}, DNAT{Addr: pip, Port: 8080})
	tx.AddRule("pre", "", DNAT{Addr: pip})
	tx.AddRule("post", "", MatchMarkUnset{Mark: masqMark}, Verdict{Kind: Return})
	tx.AddRule("post", "", MarkXor{Mark: masqMark})
	tx.AddRule("post", "", Masquerade{FullyRandom: true})
	tx.AddRule("post", "", Masquerade{})
	tx.AddRule("a", "", MarkOr{Mark: masqMark})
	tx.AddElements(triple, Element{Addr: ip, Proto: TCP, Port: 80, Verdict: goTo("a")}, Element{Addr: pip, Proto: SCTP, Port: 9, Verdict: Verdict{Kind: Drop}})
	tx.AddElements(pair, Element{Proto: UDP, Port: 30053, Verdict: jump("b")})
	tx.AddElements(ports, Element{Port: 443, Verdict: Verdict{Kind: Accept}})
	tx.AddElements(seen, Element{Addr: pip})
	return tx
}

// TestApply_KernelListing_EqualsNftLoadingTheSameText applies each
// transaction through netlink in one namespace and has the nft CLI load
// the transaction's own rendering in another: the listings must be the
// same, so our encoding is nft's, statement for statement.
func TestApply_KernelListing_EqualsNftLoadingTheSameText(t *testing.T) {
	tests := []struct {
		name string
		tx   *Tx
	}{
		// Not the representative ruleset: its named numgen maps are
		// what nft's type checker refuses from text (see
		// TestApply_NamedNumgenMap_ListsAndSpreads); its kernel listing is
		// checked against a golden file instead.
		{"every statement ip", everyStatement(IPv4)},
		{"every statement ip6", everyStatement(IPv6)},
		{"maps beyond one message", bigMaps(1500)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours, cli := addNS(t, "ours"), addNS(t, "cli")
			mustApply(t, openIn(t, ours), tt.tx)
			load := exec.Command("ip", "netns", "exec", cli, "nft", "-f", "-")
			load.Stdin = strings.NewReader(tt.tx.String())
			if out, err := load.CombinedOutput(); err != nil {
				t.Fatalf("nft -f of the rendering: %v\n%s\n%s", err, out, tt.tx)
			}
			// Timeout elements count down: compare them without it.
			got := expires.ReplaceAllString(listTable(t, ours, tt.tx.Table), "expires …")
			want := expires.ReplaceAllString(listTable(t, cli, tt.tx.Table), "expires …")
			if got != want {
				t.Errorf("netlink listing differs from nft's for the same text:\n%s", lineDiff(want, got))
			}
		})
	}
}

// bigMaps has a numgen vmap over n long-named chains and a named map
// with 2n elements: element lists beyond what one netlink attribute
// holds (64 KiB), which must be split across messages.
func bigMaps(n int) *Tx {
	tx := NewTx(Table{Family: IPv4, Name: "big"})
	tx.AddTable()
	m := Set{Name: "m", Key: []KeyType{KeyIPv4Addr, KeyInetProto, KeyInetService}, Verdict: true}
	tx.AddSet(m)
	targets := make([]Verdict, n)
	var els []Element
	for i := range targets {
		name := fmt.Sprintf("endpoint-%08d-a-namespace-with-a-long-name/a-service-with-a-long-name/tcp/https-metrics__10.244.%d.%d/8443", i, i/256, i%256)
		tx.AddChain(Chain{Name: name})
		targets[i] = goTo(name)
		ip := net.IPv4(10, 96, byte(i/256), byte(i%256))
		els = append(els, Element{Addr: ip, Proto: TCP, Port: 80, Verdict: goTo(name)}, Element{Addr: ip, Proto: UDP, Port: 53, Verdict: jump(name)})
	}
	tx.AddChain(Chain{Name: "svc"})
	tx.AddRule("svc", "", NumgenVMap{Targets: targets})
	tx.AddElements(m, els...)
	return tx
}
