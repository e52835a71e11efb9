// Package nft describes nftables changes as data — a table, its chains,
// rules, sets and verdict maps, and a transaction of operations on them —
// renders a transaction as nft-like text (for golden-file tests and logs)
// and applies it to the kernel in one atomic netlink batch through
// google/nftables. Nothing here knows about Services: the proxier builds
// transactions, this package only carries them.
package nft

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// Family is the table's address family.
type Family uint8

const (
	IPv4 Family = iota + 1 // nft "ip"
	IPv6                   // nft "ip6"
)

func (f Family) String() string {
	if f == IPv6 {
		return "ip6"
	}
	return "ip"
}

// Table names the one table a transaction works on.
type Table struct {
	Family Family
	Name   string
}

// ChainType is a base chain's type.
type ChainType string

const (
	TypeNAT    ChainType = "nat"
	TypeFilter ChainType = "filter"
)

// Hook is where a base chain is attached.
type Hook string

const (
	HookPrerouting  Hook = "prerouting"
	HookInput       Hook = "input"
	HookForward     Hook = "forward"
	HookOutput      Hook = "output"
	HookPostrouting Hook = "postrouting"
)

// Chain is a chain; it is a base chain when Hook is set.
type Chain struct {
	Name     string
	Type     ChainType
	Hook     Hook
	Priority int32
}

// IsBase says whether the chain is attached to a hook.
func (c Chain) IsBase() bool { return c.Hook != "" }

// KeyType is one field of a set's (possibly concatenated) key.
type KeyType string

const (
	KeyIPv4Addr    KeyType = "ipv4_addr"
	KeyIPv6Addr    KeyType = "ipv6_addr"
	KeyInetProto   KeyType = "inet_proto"
	KeyInetService KeyType = "inet_service"
	// KeyMark is a 32-bit host-order integer (nft's type mark): the key of
	// a named numgen map.
	KeyMark KeyType = "mark"
)

// Set is a named set, or a verdict map when Verdict is set.
type Set struct {
	Name string
	// Key lists the key's fields in order; more than one is a
	// concatenation (ipv4_addr . inet_proto . inet_service).
	Key []KeyType
	// Verdict makes it a map from the key to a verdict.
	Verdict bool
	// Timeout > 0 makes elements expire (flags dynamic,timeout): rules may
	// add to it with UpdateSet.
	Timeout time.Duration
}

// Proto is an IP protocol number.
type Proto uint8

const (
	TCP  Proto = 6
	UDP  Proto = 17
	SCTP Proto = 132
)

func (p Proto) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return fmt.Sprint(uint8(p))
}

// Element is one set or map element. Only the fields the set's Key names
// are used, in the Key's order.
type Element struct {
	Addr  net.IP // ipv4_addr / ipv6_addr
	Proto Proto  // inet_proto
	Port  uint16 // inet_service
	Num   uint32 // mark
	// Verdict is the value, in a verdict map.
	Verdict Verdict
}

// VerdictKind is what a verdict does.
type VerdictKind uint8

const (
	Accept VerdictKind = iota + 1
	Drop
	Return
	Jump
	Goto
)

// Verdict ends (or branches) rule evaluation. It is also a statement.
type Verdict struct {
	Kind  VerdictKind
	Chain string // for Jump and Goto
}

// Field is a packet field used in a verdict-map key or a set update.
type Field uint8

const (
	FieldSAddr   Field = iota + 1 // ip saddr / ip6 saddr
	FieldDAddr                    // ip daddr / ip6 daddr
	FieldL4Proto                  // meta l4proto
	FieldDPort                    // th dport
)

// Stmt is one statement of a rule. The set of statements is closed: the
// types below, each rendered by Render and turned into netlink
// expressions by the applier.
type Stmt interface {
	// Render gives the statement in nft syntax for family f.
	Render(f Family) string
	isStmt()
}

// MatchAddr matches the source or destination address against a network
// (a single address when the mask is full).
type MatchAddr struct {
	Field  Field // FieldSAddr or FieldDAddr
	Net    *net.IPNet
	Negate bool
}

// MatchProto matches the layer-4 protocol (meta l4proto).
type MatchProto struct{ Proto Proto }

// MatchDPort matches the transport destination port (th dport).
type MatchDPort struct{ Port uint16 }

// MatchLocalDst matches packets addressed to one of the host's own
// addresses (fib daddr type local).
type MatchLocalDst struct{}

// MatchLoopbackIn matches packets that came in on the loopback interface
// (iif "lo"; it is interface 1 in every network namespace), or, Negate,
// on any other.
type MatchLoopbackIn struct{ Negate bool }

// MatchMarkUnset matches when none of Mark's bits are set in the packet
// mark (meta mark & Mark == 0).
type MatchMarkUnset struct{ Mark uint32 }

// MatchSAddrInSet matches when the source address is in the named set.
type MatchSAddrInSet struct{ Set string }

// VMap looks the concatenation of Key up in the named verdict map and
// applies the verdict found; no element means no match.
type VMap struct {
	Key []Field
	Map string
}

// NumgenVMap picks one of N targets at random (numgen random mod N).
//
// With Map empty the targets are Targets, in an anonymous verdict map bound
// to the rule. With Map set, the targets are the elements 0..Mod-1 of that
// named verdict map (key KeyMark) and Targets is unused. The named form is
// what the proxier uses: the kernel resolves an anonymous map created in a
// batch by walking the whole batch, so thousands of them in one full sync
// cost time quadratic in its size, while a named map is found by name.
type NumgenVMap struct {
	Targets []Verdict
	Map     string
	Mod     uint32
}

// Reject refuses the packet at once: a TCP reset when TCPReset (the rule
// must match tcp first), else ICMP port unreachable.
type Reject struct{ TCPReset bool }

// DNAT rewrites the destination (the rule must match the protocol first
// when Port is set).
type DNAT struct {
	Addr net.IP
	Port uint16
}

// Masquerade rewrites the source to the outgoing interface's address.
type Masquerade struct{ FullyRandom bool }

// MarkOr sets bits in the packet mark (meta mark set meta mark | Mark).
type MarkOr struct{ Mark uint32 }

// MarkXor flips bits in the packet mark (meta mark set meta mark ^ Mark).
type MarkXor struct{ Mark uint32 }

// UpdateSet adds the packet's field to a timeout set, or refreshes it
// (update @set { ip saddr }).
type UpdateSet struct {
	Set   string
	Field Field
}

// Counter counts packets and bytes.
type Counter struct{}

func (MatchAddr) isStmt()       {}
func (MatchProto) isStmt()      {}
func (MatchDPort) isStmt()      {}
func (MatchLocalDst) isStmt()   {}
func (MatchLoopbackIn) isStmt() {}
func (MatchMarkUnset) isStmt()  {}
func (MatchSAddrInSet) isStmt() {}
func (VMap) isStmt()            {}
func (NumgenVMap) isStmt()      {}
func (Reject) isStmt()          {}
func (DNAT) isStmt()            {}
func (Masquerade) isStmt()      {}
func (MarkOr) isStmt()          {}
func (MarkXor) isStmt()         {}
func (UpdateSet) isStmt()       {}
func (Counter) isStmt()         {}
func (Verdict) isStmt()         {}

func (f Field) render(fam Family) string {
	switch f {
	case FieldSAddr:
		return fam.String() + " saddr"
	case FieldDAddr:
		return fam.String() + " daddr"
	case FieldL4Proto:
		return "meta l4proto"
	case FieldDPort:
		return "th dport"
	}
	return fmt.Sprintf("field(%d)", uint8(f))
}

func (s MatchAddr) Render(f Family) string {
	op := " "
	if s.Negate {
		op = " != "
	}
	return s.Field.render(f) + op + netString(s.Net)
}

func netString(n *net.IPNet) string {
	if n == nil {
		return "<nil>"
	}
	if ones, bits := n.Mask.Size(); ones == bits {
		return n.IP.String()
	}
	return n.String()
}

func (s MatchProto) Render(Family) string  { return "meta l4proto " + s.Proto.String() }
func (s MatchDPort) Render(Family) string  { return fmt.Sprintf("th dport %d", s.Port) }
func (MatchLocalDst) Render(Family) string { return "fib daddr type local" }
func (s MatchLoopbackIn) Render(Family) string {
	if s.Negate {
		return `iif != "lo"`
	}
	return `iif "lo"`
}
func (s MatchMarkUnset) Render(Family) string {
	return fmt.Sprintf("meta mark & 0x%08x == 0x00000000", s.Mark)
}
func (s MatchSAddrInSet) Render(f Family) string {
	return FieldSAddr.render(f) + " @" + s.Set
}

func (s VMap) Render(f Family) string {
	parts := make([]string, len(s.Key))
	for i, k := range s.Key {
		parts[i] = k.render(f)
	}
	return strings.Join(parts, " . ") + " vmap @" + s.Map
}

func (s NumgenVMap) Render(Family) string {
	if s.Map != "" {
		return fmt.Sprintf("numgen random mod %d vmap @%s", s.Mod, s.Map)
	}
	parts := make([]string, len(s.Targets))
	for i, v := range s.Targets {
		parts[i] = fmt.Sprintf("%d : %s", i, v.String())
	}
	return fmt.Sprintf("numgen random mod %d vmap { %s }", len(s.Targets), strings.Join(parts, ", "))
}

func (s Reject) Render(Family) string {
	if s.TCPReset {
		return "reject with tcp reset"
	}
	return "reject"
}

func (s DNAT) Render(f Family) string {
	if s.Port == 0 {
		return "dnat to " + s.Addr.String()
	}
	if f == IPv6 {
		return fmt.Sprintf("dnat to [%s]:%d", s.Addr, s.Port)
	}
	return fmt.Sprintf("dnat to %s:%d", s.Addr, s.Port)
}

func (s Masquerade) Render(Family) string {
	if s.FullyRandom {
		return "masquerade fully-random"
	}
	return "masquerade"
}

func (s MarkOr) Render(Family) string { return fmt.Sprintf("meta mark set meta mark | 0x%08x", s.Mark) }
func (s MarkXor) Render(Family) string {
	return fmt.Sprintf("meta mark set meta mark ^ 0x%08x", s.Mark)
}
func (s UpdateSet) Render(f Family) string {
	return fmt.Sprintf("update @%s { %s }", s.Set, s.Field.render(f))
}
func (Counter) Render(Family) string   { return "counter" }
func (v Verdict) Render(Family) string { return v.String() }

func (v Verdict) String() string {
	switch v.Kind {
	case Accept:
		return "accept"
	case Drop:
		return "drop"
	case Return:
		return "return"
	case Jump:
		return "jump " + v.Chain
	case Goto:
		return "goto " + v.Chain
	}
	return fmt.Sprintf("verdict(%d)", v.Kind)
}

// Rule is one rule, appended to Chain.
type Rule struct {
	Chain   string
	Stmts   []Stmt
	Comment string
}

// OpKind is what one operation of a transaction does.
type OpKind uint8

const (
	OpAddTable OpKind = iota + 1
	OpAddChain        // create if missing (no error if it exists)
	OpFlushChain
	OpDeleteChain
	OpAddRule
	OpAddSet // create if missing
	OpFlushSet
	OpDeleteSet
	OpAddElements
	OpDeleteElements
)

// Op is one operation. Which fields matter depends on Kind.
type Op struct {
	Kind     OpKind
	Chain    Chain // AddChain, FlushChain, DeleteChain (Name only for the last two)
	Rule     Rule
	Set      Set // AddSet, FlushSet, DeleteSet, AddElements, DeleteElements
	Elements []Element
}

// Tx is an ordered list of operations on one table, applied atomically:
// either all of them take effect or none does.
type Tx struct {
	Table Table
	Ops   []Op
}

// NewTx starts a transaction on table.
func NewTx(t Table) *Tx { return &Tx{Table: t} }

func (tx *Tx) add(op Op) { tx.Ops = append(tx.Ops, op) }

// AddTable creates the table if it is missing.
func (tx *Tx) AddTable() { tx.add(Op{Kind: OpAddTable}) }

// AddChain creates the chain if it is missing.
func (tx *Tx) AddChain(c Chain) { tx.add(Op{Kind: OpAddChain, Chain: c}) }

// FlushChain removes every rule of the chain.
func (tx *Tx) FlushChain(name string) { tx.add(Op{Kind: OpFlushChain, Chain: Chain{Name: name}}) }

// DeleteChain removes the (empty, unreferenced) chain.
func (tx *Tx) DeleteChain(name string) { tx.add(Op{Kind: OpDeleteChain, Chain: Chain{Name: name}}) }

// AddRule appends a rule to chain.
func (tx *Tx) AddRule(chain, comment string, stmts ...Stmt) {
	tx.add(Op{Kind: OpAddRule, Rule: Rule{Chain: chain, Stmts: stmts, Comment: comment}})
}

// AddSet creates the set or map if it is missing.
func (tx *Tx) AddSet(s Set) { tx.add(Op{Kind: OpAddSet, Set: s}) }

// FlushSet removes every element of the set or map.
func (tx *Tx) FlushSet(s Set) { tx.add(Op{Kind: OpFlushSet, Set: s}) }

// DeleteSet removes the (unreferenced) set or map.
func (tx *Tx) DeleteSet(s Set) { tx.add(Op{Kind: OpDeleteSet, Set: s}) }

// AddElements adds elements to a set or map (replacing nothing: delete an
// element first to change its verdict).
func (tx *Tx) AddElements(s Set, els ...Element) {
	if len(els) > 0 {
		tx.add(Op{Kind: OpAddElements, Set: s, Elements: els})
	}
}

// DeleteElements removes elements by key.
func (tx *Tx) DeleteElements(s Set, els ...Element) {
	if len(els) > 0 {
		tx.add(Op{Kind: OpDeleteElements, Set: s, Elements: els})
	}
}

// Len is the number of operations.
func (tx *Tx) Len() int { return len(tx.Ops) }

// String renders the transaction one operation per line, in nft's
// command syntax, for golden files and debugging.
func (tx *Tx) String() string {
	var b strings.Builder
	for _, op := range tx.Ops {
		b.WriteString(tx.renderOp(op))
		b.WriteByte('\n')
	}
	return b.String()
}

func (tx *Tx) renderOp(op Op) string {
	t := tx.Table.Family.String() + " " + tx.Table.Name
	f := tx.Table.Family
	switch op.Kind {
	case OpAddTable:
		return "add table " + t
	case OpAddChain:
		if op.Chain.IsBase() {
			return fmt.Sprintf("add chain %s %s { type %s hook %s priority %d ; }", t, op.Chain.Name, op.Chain.Type, op.Chain.Hook, op.Chain.Priority)
		}
		return fmt.Sprintf("add chain %s %s", t, op.Chain.Name)
	case OpFlushChain:
		return fmt.Sprintf("flush chain %s %s", t, op.Chain.Name)
	case OpDeleteChain:
		return fmt.Sprintf("delete chain %s %s", t, op.Chain.Name)
	case OpAddRule:
		parts := make([]string, 0, len(op.Rule.Stmts)+1)
		for _, s := range op.Rule.Stmts {
			parts = append(parts, s.Render(f))
		}
		if op.Rule.Comment != "" {
			parts = append(parts, fmt.Sprintf("comment %q", op.Rule.Comment))
		}
		return fmt.Sprintf("add rule %s %s %s", t, op.Rule.Chain, strings.Join(parts, " "))
	case OpAddSet:
		return fmt.Sprintf("add %s %s %s { %s}", op.Set.kind(), t, op.Set.Name, op.Set.renderSpec())
	case OpFlushSet:
		return fmt.Sprintf("flush %s %s %s", op.Set.kind(), t, op.Set.Name)
	case OpDeleteSet:
		return fmt.Sprintf("delete %s %s %s", op.Set.kind(), t, op.Set.Name)
	case OpAddElements:
		return fmt.Sprintf("add element %s %s { %s }", t, op.Set.Name, op.Set.renderElements(op.Elements, true))
	case OpDeleteElements:
		return fmt.Sprintf("delete element %s %s { %s }", t, op.Set.Name, op.Set.renderElements(op.Elements, false))
	}
	return fmt.Sprintf("# unknown op %d", op.Kind)
}

func (s Set) kind() string {
	if s.Verdict {
		return "map"
	}
	return "set"
}

func (s Set) renderSpec() string {
	keys := make([]string, len(s.Key))
	for i, k := range s.Key {
		keys[i] = string(k)
	}
	spec := "type " + strings.Join(keys, " . ")
	if s.Verdict {
		spec += " : verdict"
	}
	spec += " ; "
	if s.Timeout > 0 {
		spec += fmt.Sprintf("flags dynamic,timeout ; timeout %ds ; ", int64(s.Timeout/time.Second))
	}
	return spec
}

// RenderKey renders an element's key in the set's field order.
func (s Set) RenderKey(e Element) string {
	parts := make([]string, 0, len(s.Key))
	for _, k := range s.Key {
		switch k {
		case KeyIPv4Addr, KeyIPv6Addr:
			parts = append(parts, e.Addr.String())
		case KeyInetProto:
			parts = append(parts, e.Proto.String())
		case KeyInetService:
			parts = append(parts, fmt.Sprint(e.Port))
		case KeyMark:
			parts = append(parts, fmt.Sprint(e.Num))
		}
	}
	return strings.Join(parts, " . ")
}

func (s Set) renderElements(els []Element, withValue bool) string {
	parts := make([]string, len(els))
	for i, e := range els {
		parts[i] = s.RenderKey(e)
		if s.Verdict && withValue {
			parts[i] += " : " + e.Verdict.String()
		}
	}
	return strings.Join(parts, ", ")
}
