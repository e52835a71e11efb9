package nft

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The expressions below are the ones nft itself emits for the same text
// (compare with `nft --debug=netlink`), so that `nft list` prints our rules
// exactly as a human would have written them.

// reg names the 32-bit register at index i (0-based) the way nft does:
// indexes on a 16-byte boundary use the legacy NFT_REG_1..4 numbers, the
// others NFT_REG32_xx. Both address the same register file, so a
// concatenation loaded into indexes 0, 1, 2 is one contiguous key.
func reg(i int) uint32 {
	if i%4 == 0 {
		return unix.NFT_REG_1 + uint32(i/4)
	}
	return unix.NFT_REG32_00 + uint32(i)
}

// fieldLen is the size in bytes of a packet field in family fam.
func fieldLen(fam Family, f Field) (uint32, error) {
	switch f {
	case FieldSAddr, FieldDAddr:
		if fam == IPv6 {
			return 16, nil
		}
		return 4, nil
	case FieldL4Proto:
		return 1, nil
	case FieldDPort:
		return 2, nil
	}
	return 0, fmt.Errorf("unknown field %d", f)
}

// addrOffset is where saddr/daddr start in the network header.
func addrOffset(fam Family, f Field) uint32 {
	switch {
	case fam == IPv6 && f == FieldSAddr:
		return 8
	case fam == IPv6:
		return 24
	case f == FieldSAddr:
		return 12
	}
	return 16
}

// loadField loads f into the register at index r.
func loadField(fam Family, f Field, r int) (expr.Any, error) {
	n, err := fieldLen(fam, f)
	if err != nil {
		return nil, err
	}
	switch f {
	case FieldL4Proto:
		return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg(r)}, nil
	case FieldDPort:
		// th dport: the destination port sits at offset 2 of TCP, UDP and
		// SCTP headers alike.
		return &expr.Payload{DestRegister: reg(r), Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: n}, nil
	}
	return &expr.Payload{DestRegister: reg(r), Base: expr.PayloadBaseNetworkHeader, Offset: addrOffset(fam, f), Len: n}, nil
}

// loadConcat loads fields into consecutive registers from index 0, each
// field starting on a 4-byte boundary as in nft's concatenations (the
// kernel zeroes a register's unused bytes on load, matching the zero
// padding of set keys).
func loadConcat(fam Family, fields []Field) ([]expr.Any, error) {
	out := make([]expr.Any, 0, len(fields))
	r := 0
	for _, f := range fields {
		e, err := loadField(fam, f, r)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		n, _ := fieldLen(fam, f)
		r += int(n+3) / 4
	}
	return out, nil
}

// anonMap is a constant verdict map that exists only for the rule it is
// created with (the numgen vmap's { 0 : goto a, 1 : goto b }).
type anonMap struct {
	set   *nftables.Set
	elems []nftables.SetElement
}

// ruleBuilder turns statements into expressions for one rule.
type ruleBuilder struct {
	table *nftables.Table
	fam   Family
	exprs []expr.Any
	anon  []anonMap
	// nextID hands out batch-unique set IDs for anonymous maps (the
	// lookup finds a set created in the same batch by ID).
	nextID func() uint32
}

func (b *ruleBuilder) add(es ...expr.Any) { b.exprs = append(b.exprs, es...) }

func (b *ruleBuilder) stmt(s Stmt) error {
	switch s := s.(type) {
	case MatchAddr:
		return b.matchAddr(s)
	case MatchProto:
		b.add(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg(0)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg(0), Data: []byte{byte(s.Proto)}})
	case MatchDPort:
		ld, _ := loadField(b.fam, FieldDPort, 0)
		b.add(ld, &expr.Cmp{Op: expr.CmpOpEq, Register: reg(0), Data: binaryutil.BigEndian.PutUint16(s.Port)})
	case MatchLocalDst:
		b.add(&expr.Fib{Register: reg(0), FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg(0), Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)})
	case MatchLoopbackIn:
		op := expr.CmpOpEq
		if s.Negate {
			op = expr.CmpOpNeq
		}
		b.add(&expr.Meta{Key: expr.MetaKeyIIF, Register: reg(0)},
			&expr.Cmp{Op: op, Register: reg(0), Data: native32(loopbackIfindex)})
	case MatchMarkUnset:
		b.add(loadMark(),
			&expr.Bitwise{SourceRegister: reg(0), DestRegister: reg(0), Len: 4, Mask: native32(s.Mark), Xor: native32(0)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg(0), Data: native32(0)})
	case MatchSAddrInSet:
		ld, _ := loadField(b.fam, FieldSAddr, 0)
		b.add(ld, &expr.Lookup{SourceRegister: reg(0), SetName: s.Set})
	case VMap:
		if len(s.Key) == 0 {
			return fmt.Errorf("vmap @%s without a key", s.Map)
		}
		lds, err := loadConcat(b.fam, s.Key)
		if err != nil {
			return err
		}
		b.add(lds...)
		b.add(&expr.Lookup{SourceRegister: reg(0), DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: s.Map})
	case NumgenVMap:
		return b.numgenVMap(s)
	case Reject:
		b.add(b.reject(s))
	case DNAT:
		return b.dnat(s)
	case Masquerade:
		b.add(&expr.Masq{FullyRandom: s.FullyRandom})
	case MarkOr:
		b.add(loadMark(),
			&expr.Bitwise{SourceRegister: reg(0), DestRegister: reg(0), Len: 4, Mask: native32(^s.Mark), Xor: native32(s.Mark)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg(0)})
	case MarkXor:
		b.add(loadMark(),
			&expr.Bitwise{SourceRegister: reg(0), DestRegister: reg(0), Len: 4, Mask: native32(^uint32(0)), Xor: native32(s.Mark)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg(0)})
	case UpdateSet:
		ld, err := loadField(b.fam, s.Field, 0)
		if err != nil {
			return err
		}
		b.add(ld, &expr.Dynset{SrcRegKey: reg(0), SetName: s.Set, Operation: unix.NFT_DYNSET_OP_UPDATE})
	case Counter:
		b.add(&expr.Counter{})
	case Verdict:
		v, err := verdictExpr(s)
		if err != nil {
			return err
		}
		b.add(v)
	default:
		return fmt.Errorf("unsupported statement %T", s)
	}
	return nil
}

// loopbackIfindex is the loopback interface's index in every network
// namespace (the kernel's LOOPBACK_IFINDEX).
const loopbackIfindex = 1

func loadMark() expr.Any { return &expr.Meta{Key: expr.MetaKeyMARK, Register: reg(0)} }

// native32 encodes a host-order 32-bit value (meta mark, fib result,
// numgen output) as the kernel keeps it in a register.
func native32(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

// matchAddr compares an address with a network. A prefix on a byte
// boundary loads only its bytes (no bitwise), as nft does.
func (b *ruleBuilder) matchAddr(s MatchAddr) error {
	if s.Field != FieldSAddr && s.Field != FieldDAddr {
		return fmt.Errorf("address match on field %d", s.Field)
	}
	if s.Net == nil {
		return fmt.Errorf("address match without a network")
	}
	ip, err := familyIP(b.fam, s.Net.IP)
	if err != nil {
		return err
	}
	ones, bits := s.Net.Mask.Size()
	if bits != len(ip)*8 {
		return fmt.Errorf("mask of %s does not fit family %s", s.Net, b.fam)
	}
	op := expr.CmpOpEq
	if s.Negate {
		op = expr.CmpOpNeq
	}
	off := addrOffset(b.fam, s.Field)
	if ones > 0 && ones%8 == 0 {
		n := ones / 8
		b.add(&expr.Payload{DestRegister: reg(0), Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(n)},
			&expr.Cmp{Op: op, Register: reg(0), Data: ip[:n]})
		return nil
	}
	mask := net.IP(s.Net.Mask)
	b.add(&expr.Payload{DestRegister: reg(0), Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(len(ip))},
		&expr.Bitwise{SourceRegister: reg(0), DestRegister: reg(0), Len: uint32(len(ip)), Mask: mask, Xor: make([]byte, len(ip))},
		&expr.Cmp{Op: op, Register: reg(0), Data: ip.Mask(s.Net.Mask)})
	return nil
}

// familyIP gives ip in the table family's length, or an error when the
// address belongs to the other family.
func familyIP(fam Family, ip net.IP) (net.IP, error) {
	if fam == IPv6 {
		if ip.To4() == nil && ip.To16() != nil {
			return ip.To16(), nil
		}
	} else if v4 := ip.To4(); v4 != nil {
		return v4, nil
	}
	return nil, fmt.Errorf("address %v is not %s", ip, fam)
}

func (b *ruleBuilder) numgenVMap(s NumgenVMap) error {
	if s.Map != "" {
		if s.Mod == 0 {
			return fmt.Errorf("numgen vmap @%s with mod 0", s.Map)
		}
		b.add(&expr.Numgen{Register: reg(0), Modulus: s.Mod, Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: reg(0), DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: s.Map})
		return nil
	}
	if len(s.Targets) == 0 {
		return fmt.Errorf("numgen vmap without targets")
	}
	id := b.nextID()
	set := &nftables.Set{
		Table: b.table, ID: id, Name: "__map%d",
		Anonymous: true, Constant: true, IsMap: true,
		KeyType: nftables.TypeInteger, DataType: nftables.TypeVerdict,
	}
	elems := make([]nftables.SetElement, len(s.Targets))
	for i, t := range s.Targets {
		v, err := verdictExpr(t)
		if err != nil {
			return err
		}
		elems[i] = nftables.SetElement{Key: native32(uint32(i)), VerdictData: v}
	}
	b.anon = append(b.anon, anonMap{set: set, elems: elems})
	b.add(&expr.Numgen{Register: reg(0), Modulus: uint32(len(s.Targets)), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: reg(0), DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: set.Name, SetID: id})
	return nil
}

// reject gives nft's plain `reject` for the family (ICMP or ICMPv6 port
// unreachable) or a TCP reset.
func (b *ruleBuilder) reject(s Reject) expr.Any {
	switch {
	case s.TCPReset:
		return &expr.Reject{Type: unix.NFT_REJECT_TCP_RST}
	case b.fam == IPv6:
		return &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 4} // ICMPV6_PORT_UNREACH
	}
	return &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3} // ICMP_PORT_UNREACH
}

func (b *ruleBuilder) dnat(s DNAT) error {
	ip, err := familyIP(b.fam, s.Addr)
	if err != nil {
		return fmt.Errorf("dnat: %w", err)
	}
	nat := &expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg(0)}
	if b.fam == IPv6 {
		nat.Family = unix.NFPROTO_IPV6
	}
	b.add(&expr.Immediate{Register: reg(0), Data: ip})
	if s.Port != 0 {
		// The port goes to the next 16-byte register so an IPv6 address
		// fits before it, as nft lays it out.
		b.add(&expr.Immediate{Register: reg(4), Data: binaryutil.BigEndian.PutUint16(s.Port)})
		nat.RegProtoMin = reg(4)
		nat.Specified = true
	}
	b.add(nat)
	return nil
}

func verdictExpr(v Verdict) (*expr.Verdict, error) {
	var k expr.VerdictKind
	switch v.Kind {
	case Accept:
		k = expr.VerdictAccept
	case Drop:
		k = expr.VerdictDrop
	case Return:
		k = expr.VerdictReturn
	case Jump:
		k = expr.VerdictJump
	case Goto:
		k = expr.VerdictGoto
	default:
		return nil, fmt.Errorf("unknown verdict %d", v.Kind)
	}
	if (v.Kind == Jump || v.Kind == Goto) != (v.Chain != "") {
		return nil, fmt.Errorf("verdict %s: chain name only with jump and goto", v)
	}
	return &expr.Verdict{Kind: k, Chain: v.Chain}, nil
}

// keyType maps our field type to nft's datatype.
func keyType(k KeyType) (nftables.SetDatatype, error) {
	switch k {
	case KeyIPv4Addr:
		return nftables.TypeIPAddr, nil
	case KeyIPv6Addr:
		return nftables.TypeIP6Addr, nil
	case KeyInetProto:
		return nftables.TypeInetProto, nil
	case KeyInetService:
		return nftables.TypeInetService, nil
	case KeyMark:
		return nftables.TypeMark, nil
	}
	return nftables.SetDatatype{}, fmt.Errorf("unknown key type %q", k)
}

// dynamicSetSize bounds a set rules add to, as nft does by default for
// `flags dynamic` (it prints as `size 65535`).
const dynamicSetSize = 65535

// setSpec describes s for google/nftables.
func setSpec(t *nftables.Table, s Set) (*nftables.Set, error) {
	if len(s.Key) == 0 {
		return nil, fmt.Errorf("set %s has no key", s.Name)
	}
	types := make([]nftables.SetDatatype, len(s.Key))
	for i, k := range s.Key {
		dt, err := keyType(k)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", s.Name, err)
		}
		types[i] = dt
	}
	ns := &nftables.Set{Table: t, Name: s.Name, KeyType: types[0], KeyByteOrder: binaryutil.BigEndian}
	if len(s.Key) == 1 && s.Key[0] == KeyMark {
		ns.KeyByteOrder = binaryutil.NativeEndian // numgen and meta mark write host order
	}
	if len(types) > 1 {
		kt, err := nftables.ConcatSetType(types...)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", s.Name, err)
		}
		ns.KeyType, ns.Concatenation = kt, true
	}
	if s.Verdict {
		ns.IsMap, ns.DataType = true, nftables.TypeVerdict
	}
	if s.Timeout > 0 {
		ns.HasTimeout, ns.Dynamic, ns.Timeout, ns.Size = true, true, s.Timeout, dynamicSetSize
	}
	return ns, nil
}

// elementKey encodes e's key in s's field order. A concatenation pads
// every field to 4 bytes (zeros), as the registers the lookup reads do.
func elementKey(s Set, e Element) ([]byte, error) {
	concat := len(s.Key) > 1
	key := make([]byte, 0, 4*len(s.Key)+12)
	for _, k := range s.Key {
		var part []byte
		switch k {
		case KeyIPv4Addr, KeyIPv6Addr:
			want := IPv4
			if k == KeyIPv6Addr {
				want = IPv6
			}
			ip, err := familyIP(want, e.Addr)
			if err != nil {
				return nil, fmt.Errorf("set %s element: %w", s.Name, err)
			}
			part = ip
		case KeyInetProto:
			part = []byte{byte(e.Proto)}
		case KeyInetService:
			part = binary.BigEndian.AppendUint16(nil, e.Port)
		case KeyMark:
			part = native32(e.Num)
		default:
			return nil, fmt.Errorf("set %s: unknown key type %q", s.Name, k)
		}
		key = append(key, part...)
		if concat {
			for len(key)%4 != 0 {
				key = append(key, 0)
			}
		}
	}
	return key, nil
}

// setElements converts elements for s (with their verdicts in a map).
func setElements(s Set, els []Element, withVerdict bool) ([]nftables.SetElement, error) {
	out := make([]nftables.SetElement, len(els))
	for i, e := range els {
		k, err := elementKey(s, e)
		if err != nil {
			return nil, err
		}
		out[i].Key = k
		if s.Verdict && withVerdict {
			v, err := verdictExpr(e.Verdict)
			if err != nil {
				return nil, fmt.Errorf("set %s element %s: %w", s.Name, s.RenderKey(e), err)
			}
			out[i].VerdictData = v
		}
	}
	return out, nil
}
