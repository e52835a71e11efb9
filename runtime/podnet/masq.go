package podnet

import (
	"fmt"
	"net"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
)

// TableName is the nftables table (family ip) that podnet owns. The service
// proxy owns `ip skiff`; nothing else touches this one.
const TableName = "skiff-podnet"

// multicastNet is never masqueraded.
var multicastNet = &net.IPNet{IP: net.IPv4(224, 0, 0, 0).To4(), Mask: net.CIDRMask(4, 32)}

// addrMatch is `ip saddr|daddr [!=] cidr`.
type addrMatch struct {
	dst bool // daddr, else saddr
	neq bool
	net *net.IPNet
}

// natRule is a list of matches and a verdict: "return" or "masquerade".
type natRule struct {
	match   []addrMatch
	verdict string
}

// masqRules is the postrouting rule set: pod → pod stays untouched; pod →
// anything outside the cluster CIDR (except multicast) leaves with the
// node's address.
func masqRules(cluster *net.IPNet) []natRule {
	return []natRule{
		{match: []addrMatch{{net: cluster}, {dst: true, net: cluster}}, verdict: "return"},
		{match: []addrMatch{{net: cluster}, {dst: true, neq: true, net: multicastNet}}, verdict: "masquerade"},
	}
}

// renderMasq renders the table as `nft list table ip skiff-podnet` prints it.
func renderMasq(cluster *net.IPNet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n", TableName)
	b.WriteString("\tchain postrouting {\n")
	b.WriteString("\t\ttype nat hook postrouting priority srcnat; policy accept;\n")
	for _, r := range masqRules(cluster) {
		b.WriteString("\t\t")
		for _, m := range r.match {
			field := "saddr"
			if m.dst {
				field = "daddr"
			}
			op := ""
			if m.neq {
				op = "!= "
			}
			fmt.Fprintf(&b, "ip %s %s%s ", field, op, m.net)
		}
		if r.verdict == "masquerade" {
			b.WriteString("masquerade fully-random\n")
		} else {
			b.WriteString(r.verdict + "\n")
		}
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// exprs compiles a rule to nftables expressions.
func (r natRule) exprs() []expr.Any {
	var out []expr.Any
	for _, m := range r.match {
		offset := uint32(12) // saddr in the IPv4 header
		if m.dst {
			offset = 16
		}
		op := expr.CmpOpEq
		if m.neq {
			op = expr.CmpOpNeq
		}
		out = append(out,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: []byte(m.net.Mask), Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: op, Register: 1, Data: []byte(m.net.IP.Mask(m.net.Mask).To4())},
		)
	}
	if r.verdict == "masquerade" {
		out = append(out, &expr.Masq{FullyRandom: true})
	} else {
		out = append(out, &expr.Verdict{Kind: expr.VerdictReturn})
	}
	return out
}

// syncMasq replaces the podnet table in ns with the masquerade rules, in one
// atomic transaction (add, delete, add again: works whether or not the
// table exists, and never leaves a moment without rules).
func syncMasq(ns netns.NsHandle, cluster *net.IPNet) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return fmt.Errorf("podnet: nftables: %w", err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	c.AddTable(table)
	c.DelTable(table)
	c.AddTable(table)
	policy := nftables.ChainPolicyAccept
	chain := c.AddChain(&nftables.Chain{
		Name:     "postrouting",
		Table:    table,
		Type:     nftables.ChainTypeNAT,
		Hooknum:  nftables.ChainHookPostrouting,
		Priority: nftables.ChainPriorityNATSource,
		Policy:   &policy,
	})
	for _, r := range masqRules(cluster) {
		c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: r.exprs()})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("podnet: program nftables table %s: %w", TableName, err)
	}
	return nil
}
