package cel

import (
	"fmt"
	"math"
	"net/netip"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// IPType and CIDRType are the CEL types of ip(...) and cidr(...) values.
var (
	IPType   = cel.OpaqueType("net.IP")
	CIDRType = cel.OpaqueType("net.CIDR")
)

// IPValue is an IP address as a CEL value.
type IPValue struct{ netip.Addr }

func (d IPValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if reflect.TypeOf(d.Addr).AssignableTo(typeDesc) {
		return d.Addr, nil
	}
	if reflect.TypeOf("").AssignableTo(typeDesc) {
		return d.Addr.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'IP' to '%v'", typeDesc)
}

func (d IPValue) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case IPType.TypeName():
		return d
	case types.TypeType.TypeName():
		return IPType
	case types.StringType.TypeName():
		return types.String(d.Addr.String())
	}
	return types.NewErr("type conversion error from '%s' to '%s'", IPType, t)
}

func (d IPValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(IPValue)
	if !ok {
		return types.ValOrErr(other, "no such overload")
	}
	return types.Bool(d.Addr == o.Addr)
}

func (d IPValue) Type() ref.Type { return IPType }
func (d IPValue) Value() any     { return d.Addr }

// Size is the address length in bytes, which the cost tracker uses.
func (d IPValue) Size() ref.Val { return types.Int(int(math.Ceil(float64(d.Addr.BitLen()) / 8))) }

// CIDRValue is a network prefix as a CEL value.
type CIDRValue struct{ netip.Prefix }

func (d CIDRValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if reflect.TypeOf(d.Prefix).AssignableTo(typeDesc) {
		return d.Prefix, nil
	}
	if reflect.TypeOf("").AssignableTo(typeDesc) {
		return d.Prefix.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'CIDR' to '%v'", typeDesc)
}

func (d CIDRValue) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case CIDRType.TypeName():
		return d
	case types.TypeType.TypeName():
		return CIDRType
	case types.StringType.TypeName():
		return types.String(d.Prefix.String())
	}
	return types.NewErr("type conversion error from '%s' to '%s'", CIDRType, t)
}

func (d CIDRValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(CIDRValue)
	if !ok {
		return types.ValOrErr(other, "no such overload")
	}
	return types.Bool(d.Prefix == o.Prefix)
}

func (d CIDRValue) Type() ref.Type { return CIDRType }
func (d CIDRValue) Value() any     { return d.Prefix }

// Size is the prefix length in bytes, which the cost tracker uses.
func (d CIDRValue) Size() ref.Val { return types.Int(int(math.Ceil(float64(d.Prefix.Bits()) / 8))) }

// IP is the Kubernetes IP library.
func IP() cel.EnvOption { return cel.Lib(ipLib{}) }

// CIDR is the Kubernetes CIDR library.
func CIDR() cel.EnvOption { return cel.Lib(cidrLib{}) }

type ipLib struct{}

func (ipLib) LibraryName() string { return "kubernetes.net.ip" }

func ipPredicate(name, id string, f func(netip.Addr) bool) cel.EnvOption {
	return cel.Function(name, cel.MemberOverload(id, []*cel.Type{IPType}, cel.BoolType, cel.UnaryBinding(func(arg ref.Val) ref.Val {
		ip, ok := arg.(IPValue)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		return types.Bool(f(ip.Addr))
	})))
}

func stringArg(arg ref.Val) (string, ref.Val) {
	s, ok := arg.Value().(string)
	if !ok {
		return "", types.MaybeNoSuchOverloadErr(arg)
	}
	return s, nil
}

func (ipLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Types(IPType),
		cel.Function("ip", cel.Overload("string_to_ip", []*cel.Type{cel.StringType}, IPType, cel.UnaryBinding(stringToIP))),
		cel.Function("family", cel.MemberOverload("ip_family", []*cel.Type{IPType}, cel.IntType, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			ip, ok := arg.(IPValue)
			if !ok {
				return types.MaybeNoSuchOverloadErr(arg)
			}
			switch {
			case ip.Addr.Is4():
				return types.Int(4)
			case ip.Addr.Is6():
				return types.Int(6)
			}
			return types.NewErr("IP address %q is not an IPv4 or IPv6 address", ip.Addr.String())
		}))),
		cel.Function("ip.isCanonical", cel.Overload("ip_is_canonical", []*cel.Type{cel.StringType}, cel.BoolType, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			s, e := stringArg(arg)
			if e != nil {
				return e
			}
			addr, err := parseIPAddr(s)
			if err != nil {
				return types.NewErr("%v", err)
			}
			return types.Bool(addr.String() == s)
		}))),
		ipPredicate("isUnspecified", "ip_is_unspecified", netip.Addr.IsUnspecified),
		ipPredicate("isLoopback", "ip_is_loopback", netip.Addr.IsLoopback),
		ipPredicate("isLinkLocalMulticast", "ip_is_link_local_multicast", netip.Addr.IsLinkLocalMulticast),
		ipPredicate("isLinkLocalUnicast", "ip_is_link_local_unicast", netip.Addr.IsLinkLocalUnicast),
		ipPredicate("isGlobalUnicast", "ip_is_global_unicast", netip.Addr.IsGlobalUnicast),
		cel.Function("isIP", cel.Overload("is_ip", []*cel.Type{cel.StringType}, cel.BoolType, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			s, e := stringArg(arg)
			if e != nil {
				return e
			}
			_, err := parseIPAddr(s)
			return types.Bool(err == nil)
		}))),
		cel.Function("string", cel.Overload("ip_to_string", []*cel.Type{IPType}, cel.StringType, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			ip, ok := arg.(IPValue)
			if !ok {
				return types.MaybeNoSuchOverloadErr(arg)
			}
			return types.String(ip.Addr.String())
		}))),
	}
}

func (ipLib) ProgramOptions() []cel.ProgramOption { return nil }

func stringToIP(arg ref.Val) ref.Val {
	s, e := stringArg(arg)
	if e != nil {
		return e
	}
	addr, err := parseIPAddr(s)
	if err != nil {
		return types.NewErr("%v", err)
	}
	return IPValue{Addr: addr}
}

// parseIPAddr rejects zones and IPv4-mapped IPv6 addresses, which upstream
// does not accept in API fields.
func parseIPAddr(raw string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(raw)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("IP Address %q parse error during conversion from string: %v", raw, err)
	}
	if addr.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("IP address %q with zone value is not allowed", raw)
	}
	if addr.Is4In6() {
		return netip.Addr{}, fmt.Errorf("IPv4-mapped IPv6 address %q is not allowed", raw)
	}
	return addr, nil
}

type cidrLib struct{}

func (cidrLib) LibraryName() string { return "kubernetes.net.cidr" }

func cidrUnary(f func(CIDRValue) ref.Val) cel.OverloadOpt {
	return cel.UnaryBinding(func(arg ref.Val) ref.Val {
		c, ok := arg.(CIDRValue)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		return f(c)
	})
}

func (cidrLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Types(CIDRType),
		cel.Function("cidr", cel.Overload("string_to_cidr", []*cel.Type{cel.StringType}, CIDRType, cel.UnaryBinding(stringToCIDR))),
		cel.Function("containsIP",
			cel.MemberOverload("cidr_contains_ip_string", []*cel.Type{CIDRType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(func(a, b ref.Val) ref.Val { return cidrContainsIP(a, stringToIP(b)) })),
			cel.MemberOverload("cidr_contains_ip_ip", []*cel.Type{CIDRType, IPType}, cel.BoolType, cel.BinaryBinding(cidrContainsIP))),
		cel.Function("containsCIDR",
			cel.MemberOverload("cidr_contains_cidr_string", []*cel.Type{CIDRType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(func(a, b ref.Val) ref.Val { return cidrContainsCIDR(a, stringToCIDR(b)) })),
			cel.MemberOverload("cidr_contains_cidr", []*cel.Type{CIDRType, CIDRType}, cel.BoolType, cel.BinaryBinding(cidrContainsCIDR))),
		cel.Function("ip", cel.MemberOverload("cidr_ip", []*cel.Type{CIDRType}, IPType,
			cidrUnary(func(c CIDRValue) ref.Val { return IPValue{Addr: c.Prefix.Addr()} }))),
		cel.Function("prefixLength", cel.MemberOverload("cidr_prefix_length", []*cel.Type{CIDRType}, cel.IntType,
			cidrUnary(func(c CIDRValue) ref.Val { return types.Int(c.Prefix.Bits()) }))),
		cel.Function("masked", cel.MemberOverload("cidr_masked", []*cel.Type{CIDRType}, CIDRType,
			cidrUnary(func(c CIDRValue) ref.Val { return CIDRValue{Prefix: c.Prefix.Masked()} }))),
		cel.Function("isCIDR", cel.Overload("is_cidr", []*cel.Type{cel.StringType}, cel.BoolType, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			s, e := stringArg(arg)
			if e != nil {
				return e
			}
			_, err := parseCIDR(s)
			return types.Bool(err == nil)
		}))),
		cel.Function("string", cel.Overload("cidr_to_string", []*cel.Type{CIDRType}, cel.StringType,
			cidrUnary(func(c CIDRValue) ref.Val { return types.String(c.Prefix.String()) }))),
	}
}

func (cidrLib) ProgramOptions() []cel.ProgramOption { return nil }

func stringToCIDR(arg ref.Val) ref.Val {
	s, e := stringArg(arg)
	if e != nil {
		return e
	}
	p, err := parseCIDR(s)
	if err != nil {
		return types.NewErr("network address parse error during conversion from string: %v", err)
	}
	return CIDRValue{Prefix: p}
}

func cidrContainsIP(a, b ref.Val) ref.Val {
	c, ok := a.(CIDRValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(b)
	}
	ip, ok := b.(IPValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(a)
	}
	return types.Bool(c.Contains(ip.Addr))
}

func cidrContainsCIDR(a, b ref.Val) ref.Val {
	c, ok := a.(CIDRValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(a)
	}
	o, ok := b.(CIDRValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(b)
	}
	return types.Bool(c.Overlaps(o.Prefix) && c.Prefix.Bits() <= o.Prefix.Bits())
}

func parseCIDR(raw string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(raw)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("network address parse error during conversion from string: %v", err)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("IPv4-mapped IPv6 address %q is not allowed", raw)
	}
	return p, nil
}
