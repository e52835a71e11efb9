package nft

import (
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	goldenfile "skiff/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name, "the kernel's listing", got, *update)
}

func lineDiff(want, got string) string { return goldenfile.LineDiff(want, got) }

func mustApply(t testing.TB, c *Conn, tx *Tx) {
	t.Helper()
	if err := c.Apply(tx); err != nil {
		if tx.Len() > 200 {
			t.Fatalf("Apply of %d ops: %v", tx.Len(), err)
		}
		t.Fatalf("Apply: %v\n%s", err, tx)
	}
}

func TestApply_RepresentativeRuleset_KernelListingMatchesGolden(t *testing.T) {
	ns := addNS(t, "golden")
	c := openIn(t, ns)
	mustApply(t, c, fullSync(representative))
	golden(t, "representative.nft", listTable(t, ns, tableSkiff))

	// The same full sync again changes nothing: re-adding existing chains
	// and sets is allowed, and flushes make rules and elements exact.
	mustApply(t, c, fullSync(representative))
	golden(t, "representative.nft", listTable(t, ns, tableSkiff))
}

func TestApply_RuleComment_ListedByNft(t *testing.T) {
	ns := addNS(t, "comment")
	c := openIn(t, ns)
	tx := NewTx(tableSkiff)
	tx.AddTable()
	tx.AddChain(Chain{Name: "c"})
	tx.AddRule("c", "default/web/tcp/http cluster IP", MatchProto{Proto: UDP}, Counter{}, Verdict{Kind: Accept})
	mustApply(t, c, tx)
	want := `meta l4proto udp counter packets 0 bytes 0 accept comment "default/web/tcp/http cluster IP"`
	if got := listTable(t, ns, tableSkiff); !strings.Contains(got, want) {
		t.Errorf("listing lacks %q:\n%s", want, got)
	}
}

// chainRules extracts the rule lines of one chain from an nft listing.
func chainRules(listing, chain string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(listing, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "chain "+chain+" {":
			in = true
		case in && l == "}":
			return out
		case in && l != "" && !strings.HasPrefix(l, "type "):
			out = append(out, l)
		}
	}
	return out
}

func TestApply_IncrementalOps_ChangeOnlyWhatTheySay(t *testing.T) {
	ns := addNS(t, "incr")
	c := openIn(t, ns)
	mustApply(t, c, fullSync(representative))
	web := representative[0]
	webEl := web.elements()[mapServiceIPs.Name][0]

	// The web service loses its second endpoint: flush and refill its
	// service chain, drop the endpoint chain, keep the map element.
	one := web
	one.eps = web.eps[:1]
	gone := web.eps[1]
	tx := NewTx(tableSkiff)
	for _, cd := range one.chains() {
		tx.AddChain(cd.chain)
		tx.FlushChain(cd.chain.Name)
		for _, r := range cd.rules {
			tx.AddRule(cd.chain.Name, "", r...)
		}
	}
	// The endpoint map's elements name the gone chain: they are replaced
	// before the chain can go.
	for _, m := range one.endpointMaps() {
		tx.FlushSet(m.set)
		tx.AddElements(m.set, m.els...)
	}
	tx.FlushChain(web.epChain(gone))
	tx.DeleteChain(web.epChain(gone))
	// The empty service's element moves from reject to drop.
	empty := representative[3]
	rej := empty.elements()[mapNoEndpointServices.Name][0]
	drop := rej
	drop.Verdict = Verdict{Kind: Drop}
	tx.DeleteElements(mapNoEndpointServices, rej)
	tx.AddElements(mapNoEndpointServices, drop)
	mustApply(t, c, tx)

	got := listTable(t, ns, tableSkiff)
	wantSvc := []string{
		"ip daddr 10.96.0.10 ip saddr != 10.244.0.0/16 jump mark-for-masquerade",
		"numgen random mod 1 vmap @" + pickMap(web.svcChain()).Name,
	}
	if r := chainRules(got, web.svcChain()); !slices.Equal(r, wantSvc) {
		t.Errorf("service chain after update:\n got %q\nwant %q", r, wantSvc)
	}
	if strings.Contains(got, "chain "+web.epChain(gone)+" {") {
		t.Errorf("deleted endpoint chain still listed")
	}
	for _, want := range []string{
		mapServiceIPs.RenderKey(webEl) + " : goto " + web.svcChain(),
		"10.96.0.40 . tcp . 80 : drop",
		"0x00000000 : goto " + web.epChain(web.eps[0]),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("listing lacks element %q", want)
		}
	}
	if strings.Contains(got, "0x00000001 : goto") && strings.Contains(got, web.epChain(gone)) {
		t.Errorf("the endpoint map still names the gone endpoint")
	}
	if strings.Contains(got, "10.96.0.40 . tcp . 80 : goto reject-chain") {
		t.Errorf("deleted element still listed")
	}

	chains, sets, err := c.Existing(tableSkiff)
	if err != nil {
		t.Fatalf("Existing: %v", err)
	}
	if slices.Contains(chains, web.epChain(gone)) || !slices.Contains(chains, web.epChain(web.eps[0])) {
		t.Errorf("Existing chains do not reflect the update: %v", chains)
	}
	if !slices.Contains(sets, mapServiceIPs.Name) {
		t.Errorf("Existing sets lack %s: %v", mapServiceIPs.Name, sets)
	}
}

func TestApply_FailingOp_RejectsWholeBatchAndNamesTheOp(t *testing.T) {
	ns := addNS(t, "atomic")
	c := openIn(t, ns)
	mustApply(t, c, fullSync(representative))
	before := listTable(t, ns, tableSkiff)

	tx := NewTx(tableSkiff)
	tx.FlushChain("services")
	tx.AddChain(Chain{Name: "would-be-new"})
	tx.DeleteElements(mapServiceIPs, representative[0].elements()[mapServiceIPs.Name]...)
	tx.AddRule("services", "", jump("no-such-chain"))
	tx.AddRule("services", "", Verdict{Kind: Accept})
	err := c.Apply(tx)
	if err == nil {
		t.Fatalf("Apply of a rule jumping to a missing chain succeeded")
	}
	t.Logf("error: %v", err)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Index != 3 || !strings.Contains(oe.Op, "jump no-such-chain") {
		t.Errorf("error does not name the failing op (op 3, the jump): %#v", err)
	}
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("error does not carry the kernel's ENOENT: %v", err)
	}
	if after := listTable(t, ns, tableSkiff); after != before {
		t.Errorf("a failed batch changed the ruleset:\n%s", lineDiff(before, after))
	}

	// The Conn stays usable after a failure.
	ok := NewTx(tableSkiff)
	ok.AddChain(Chain{Name: "after-failure"})
	mustApply(t, c, ok)
}

func TestApply_InvalidStatement_FailsBeforeSending(t *testing.T) {
	ns := addNS(t, "invalid")
	c := openIn(t, ns)
	tests := []struct {
		name string
		stmt Stmt
	}{
		{"IPv6 DNAT in an ip table", DNAT{Addr: mustCIDR("fd00::1/128").IP, Port: 80}},
		{"jump without a chain", Verdict{Kind: Jump}},
		{"empty numgen", NumgenVMap{}},
		{"vmap without key", VMap{Map: "m"}},
		{"address match without network", MatchAddr{Field: FieldSAddr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx := NewTx(tableSkiff)
			tx.AddTable()
			tx.AddChain(Chain{Name: "c"})
			tx.AddRule("c", "", tt.stmt)
			if err := c.Apply(tx); err == nil || !strings.Contains(err.Error(), "op 2 ") {
				t.Errorf("Apply = %v, want an error naming op 2", err)
			}
			chains, _, err := c.Existing(tableSkiff)
			if err != nil {
				t.Fatalf("Existing: %v", err)
			}
			if len(chains) != 0 {
				t.Errorf("table created by a rejected batch: %v", chains)
			}
		})
	}
}

func TestExisting_MissingTable_EmptyWithoutError(t *testing.T) {
	ns := addNS(t, "missing")
	c := openIn(t, ns)
	chains, sets, err := c.Existing(Table{Family: IPv4, Name: "nothing-here"})
	if err != nil || len(chains) != 0 || len(sets) != 0 {
		t.Fatalf("Existing = %v, %v, %v; want empty and no error", chains, sets, err)
	}
}

func TestExisting_ListsChainsAndNamedSetsOfTheTableOnly(t *testing.T) {
	ns := addNS(t, "existing")
	c := openIn(t, ns)
	mustApply(t, c, fullSync(representative))
	other := NewTx(Table{Family: IPv4, Name: "other"})
	other.AddTable()
	other.AddChain(Chain{Name: "foreign"})
	other.AddSet(Set{Name: "foreign-set", Key: []KeyType{KeyIPv4Addr}})
	mustApply(t, c, other)

	chains, sets, err := c.Existing(tableSkiff)
	if err != nil {
		t.Fatalf("Existing: %v", err)
	}
	var wantChains []string
	for _, cd := range commonChains {
		wantChains = append(wantChains, cd.chain.Name)
	}
	var wantSets []string
	for _, m := range allMaps {
		wantSets = append(wantSets, m.Name)
	}
	for _, s := range representative {
		for _, cd := range s.chains() {
			wantChains = append(wantChains, cd.chain.Name)
		}
		if s.affinity > 0 {
			for _, e := range s.eps {
				wantSets = append(wantSets, s.affSet(e).Name)
			}
		}
		for _, m := range s.endpointMaps() {
			wantSets = append(wantSets, m.set.Name)
		}
	}
	slices.Sort(chains)
	slices.Sort(sets)
	slices.Sort(wantChains)
	slices.Sort(wantSets)
	if !slices.Equal(chains, wantChains) {
		t.Errorf("chains:\n got %v\nwant %v", chains, wantChains)
	}
	if !slices.Equal(sets, wantSets) {
		t.Errorf("sets (named only):\n got %v\nwant %v", sets, wantSets)
	}
}

func TestApply_ConcurrentApplies_AllLand(t *testing.T) {
	ns := addNS(t, "concurrent")
	shared, other := openIn(t, ns), openIn(t, ns)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		c := shared
		if i%2 == 1 {
			c = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx := NewTx(Table{Family: IPv4, Name: fmt.Sprintf("t%d", i)})
			tx.AddTable()
			tx.AddChain(Chain{Name: "c"})
			tx.AddSet(Set{Name: "s", Key: []KeyType{KeyIPv4Addr}})
			tx.AddRule("c", "", NumgenVMap{Targets: []Verdict{{Kind: Accept}, {Kind: Drop}}})
			errs <- c.Apply(tx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Apply: %v", err)
		}
	}
	for i := 0; i < 8; i++ {
		chains, _, err := shared.Existing(Table{Family: IPv4, Name: fmt.Sprintf("t%d", i)})
		if err != nil || len(chains) != 1 {
			t.Errorf("table t%d: chains %v, %v", i, chains, err)
		}
	}
}

// TestGeneration_BumpedByEveryCommit_OursOrNot shows the cheap check the
// proxier's periodic resync relies on: a commit by anyone (here the nft
// CLI, as an admin editing by hand would) changes the generation, and
// nothing else does.
func TestGeneration_BumpedByEveryCommit_OursOrNot(t *testing.T) {
	ns := addNS(t, "gen")
	c := openIn(t, ns)
	g0, err := c.Generation()
	if err != nil {
		t.Fatal(err)
	}
	if g1, err := c.Generation(); err != nil || g1 != g0 {
		t.Fatalf("generation moved without a commit: %d → %d (%v)", g0, g1, err)
	}
	tx := NewTx(tableSkiff)
	tx.AddTable()
	tx.AddChain(Chain{Name: "services"})
	mustApply(t, c, tx)
	g1, err := c.Generation()
	if err != nil || g1 == g0 {
		t.Fatalf("our commit left the generation at %d (%v)", g1, err)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "nft", "delete", "chain", "ip", "skiff", "services").CombinedOutput(); err != nil {
		t.Fatalf("nft delete chain: %v: %s", err, out)
	}
	g2, err := c.Generation()
	if err != nil || g2 == g1 {
		t.Fatalf("a hand edit left the generation at %d (%v)", g2, err)
	}
}

// TestApply_NamedNumgenMap_ListsAndSpreads covers the named form of the
// numgen map, which the nft CLI's type checker will not load from text
// (it wants a mark expression for a `type mark` key, while the kernel
// only sees a 4-byte register): the kernel listing shows the rule and the
// elements, and replacing the elements retargets the rule untouched.
func TestApply_NamedNumgenMap_ListsAndSpreads(t *testing.T) {
	ns := addNS(t, "named")
	c := openIn(t, ns)
	pick := Set{Name: "pick", Key: []KeyType{KeyMark}, Verdict: true}
	tx := NewTx(tableSkiff)
	tx.AddTable()
	tx.AddChain(Chain{Name: "in", Type: TypeFilter, Hook: HookInput})
	tx.AddChain(Chain{Name: "a"})
	tx.AddChain(Chain{Name: "b"})
	tx.AddSet(pick)
	tx.AddRule("in", "", NumgenVMap{Map: pick.Name, Mod: 2})
	tx.AddElements(pick, Element{Num: 0, Verdict: goTo("a")}, Element{Num: 1, Verdict: goTo("b")})
	mustApply(t, c, tx)
	got := listTable(t, ns, tableSkiff)
	for _, want := range []string{"type mark : verdict", "numgen random mod 2 vmap @pick", "0x00000000 : goto a", "0x00000001 : goto b"} {
		if !strings.Contains(got, want) {
			t.Errorf("listing lacks %q:\n%s", want, got)
		}
	}
	up := NewTx(tableSkiff)
	up.FlushSet(pick)
	up.AddElements(pick, Element{Num: 0, Verdict: goTo("b")}, Element{Num: 1, Verdict: goTo("a")})
	mustApply(t, c, up)
	got = listTable(t, ns, tableSkiff)
	if !strings.Contains(got, "0x00000000 : goto b") || !strings.Contains(got, "numgen random mod 2 vmap @pick") {
		t.Errorf("after replacing the elements:\n%s", got)
	}
}
