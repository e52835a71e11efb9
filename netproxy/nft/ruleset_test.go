package nft

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net"
	"strings"
	"time"
)

// This file builds, for the tests, the ruleset the proxier generates (see
// the netproxy package): the same shape and names, from a small
// description of service ports.

const masqMark = 0x4000

var (
	tableSkiff  = Table{Family: IPv4, Name: "skiff"}
	clusterCIDR = mustCIDR("10.244.0.0/16")

	mapServiceIPs          = Set{Name: "service-ips", Key: []KeyType{KeyIPv4Addr, KeyInetProto, KeyInetService}, Verdict: true}
	mapServiceNodePorts    = Set{Name: "service-nodeports", Key: []KeyType{KeyInetProto, KeyInetService}, Verdict: true}
	mapNoEndpointServices  = Set{Name: "no-endpoint-services", Key: []KeyType{KeyIPv4Addr, KeyInetProto, KeyInetService}, Verdict: true}
	mapNoEndpointNodePorts = Set{Name: "no-endpoint-nodeports", Key: []KeyType{KeyInetProto, KeyInetService}, Verdict: true}
	allMaps                = []Set{mapServiceIPs, mapServiceNodePorts, mapNoEndpointServices, mapNoEndpointNodePorts}

	addrProtoPort = []Field{FieldDAddr, FieldL4Proto, FieldDPort}
	protoPort     = []Field{FieldL4Proto, FieldDPort}
)

func jump(c string) Verdict { return Verdict{Kind: Jump, Chain: c} }
func goTo(c string) Verdict { return Verdict{Kind: Goto, Chain: c} }
func hash8(s string) string {
	h := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(h[:])[:8]
}

type chainDef struct {
	chain Chain
	rules [][]Stmt
}

var commonChains = []chainDef{
	{Chain{Name: "nat-prerouting", Type: TypeNAT, Hook: HookPrerouting, Priority: -100}, [][]Stmt{{jump("services")}}},
	{Chain{Name: "nat-output", Type: TypeNAT, Hook: HookOutput, Priority: -100}, [][]Stmt{{jump("services")}}},
	{Chain{Name: "nat-postrouting", Type: TypeNAT, Hook: HookPostrouting, Priority: 100}, [][]Stmt{{jump("masquerading")}}},
	{Chain{Name: "filter-input", Type: TypeFilter, Hook: HookInput}, [][]Stmt{
		{VMap{Key: addrProtoPort, Map: mapNoEndpointServices.Name}},
		{MatchLocalDst{}, VMap{Key: protoPort, Map: mapNoEndpointNodePorts.Name}},
	}},
	{Chain{Name: "filter-forward", Type: TypeFilter, Hook: HookForward}, [][]Stmt{{VMap{Key: addrProtoPort, Map: mapNoEndpointServices.Name}}}},
	{Chain{Name: "filter-output", Type: TypeFilter, Hook: HookOutput}, [][]Stmt{{VMap{Key: addrProtoPort, Map: mapNoEndpointServices.Name}}}},
	{Chain{Name: "services"}, [][]Stmt{
		{VMap{Key: addrProtoPort, Map: mapServiceIPs.Name}},
		{MatchAddr{Field: FieldDAddr, Net: mustCIDR("127.0.0.0/8"), Negate: true}, MatchLocalDst{}, VMap{Key: protoPort, Map: mapServiceNodePorts.Name}},
	}},
	{Chain{Name: "masquerading"}, [][]Stmt{
		{MatchMarkUnset{Mark: masqMark}, Verdict{Kind: Return}},
		{MarkXor{Mark: masqMark}},
		{Masquerade{FullyRandom: true}},
	}},
	{Chain{Name: "mark-for-masquerade"}, [][]Stmt{{MarkOr{Mark: masqMark}}}},
	{Chain{Name: "reject-chain"}, [][]Stmt{
		{MatchProto{Proto: TCP}, Reject{TCPReset: true}},
		{Reject{}},
	}},
}

type endpoint struct {
	ip    string
	port  uint16
	local bool
}

// svcPort describes one service port the way the proxier sees it.
type svcPort struct {
	ns, name, portName string
	proto              Proto
	clusterIP          string
	port               uint16
	nodePort           uint16
	lbIPs              []string
	eps                []endpoint
	etpLocal           bool
	// itpLocalDrop: internalTrafficPolicy Local without a local endpoint.
	itpLocalDrop bool
	affinity     time.Duration
}

func (s svcPort) id() string {
	return fmt.Sprintf("%s/%s/%s/%s", s.ns, s.name, s.proto, s.portName)
}
func (s svcPort) suffix() string     { return hash8(s.id()) + "-" + s.id() }
func (s svcPort) svcChain() string   { return "service-" + s.suffix() }
func (s svcPort) extChain() string   { return "external-" + s.suffix() }
func (s svcPort) localChain() string { return "local-" + s.suffix() }
func (s svcPort) hasExternal() bool  { return s.nodePort != 0 || len(s.lbIPs) > 0 }
func (s svcPort) epSuffix(e endpoint) string {
	id := fmt.Sprintf("%s__%s/%d", s.id(), e.ip, e.port)
	return hash8(id) + "-" + id
}
func (s svcPort) epChain(e endpoint) string { return "endpoint-" + s.epSuffix(e) }
func (s svcPort) affSet(e endpoint) Set {
	return Set{Name: "affinity-" + s.epSuffix(e), Key: []KeyType{KeyIPv4Addr}, Timeout: s.affinity}
}

func (s svcPort) localEps() []endpoint {
	var out []endpoint
	for _, e := range s.eps {
		if e.local {
			out = append(out, e)
		}
	}
	return out
}

// chains gives the service port's chains with their rules.
func (s svcPort) chains() []chainDef {
	if len(s.eps) == 0 {
		return nil
	}
	svc := chainDef{chain: Chain{Name: s.svcChain()}, rules: [][]Stmt{{
		MatchAddr{Field: FieldDAddr, Net: hostNet(s.clusterIP)},
		MatchAddr{Field: FieldSAddr, Net: clusterCIDR, Negate: true},
		jump("mark-for-masquerade"),
	}}}
	svc.rules = append(svc.rules, s.pick(s.svcChain(), s.eps)...)
	out := []chainDef{svc}
	if s.hasExternal() {
		ext := chainDef{chain: Chain{Name: s.extChain()}}
		if s.etpLocal {
			ext.rules = [][]Stmt{{MatchAddr{Field: FieldSAddr, Net: clusterCIDR}, goTo(s.svcChain())}, {goTo(s.localChain())}}
			out = append(out, ext, chainDef{chain: Chain{Name: s.localChain()}, rules: s.pick(s.localChain(), s.localEps())})
		} else {
			ext.rules = [][]Stmt{{jump("mark-for-masquerade")}, {goTo(s.svcChain())}}
			out = append(out, ext)
		}
	}
	for _, e := range s.eps {
		rules := [][]Stmt{{MatchAddr{Field: FieldSAddr, Net: hostNet(e.ip)}, jump("mark-for-masquerade")}}
		if s.affinity > 0 {
			rules = append(rules, []Stmt{UpdateSet{Set: s.affSet(e).Name, Field: FieldSAddr}})
		}
		rules = append(rules, []Stmt{MatchProto{Proto: s.proto}, DNAT{Addr: net.ParseIP(e.ip), Port: e.port}})
		out = append(out, chainDef{chain: Chain{Name: s.epChain(e)}, rules: rules})
	}
	return out
}

// pick is the endpoint choice: affinity rules, then the numgen lookup in
// the chain's named endpoint map.
func (s svcPort) pick(chain string, eps []endpoint) [][]Stmt {
	var rules [][]Stmt
	for _, e := range eps {
		if s.affinity > 0 {
			rules = append(rules, []Stmt{MatchSAddrInSet{Set: s.affSet(e).Name}, goTo(s.epChain(e))})
		}
	}
	if len(eps) == 0 {
		return rules
	}
	return append(rules, []Stmt{NumgenVMap{Map: pickMap(chain).Name, Mod: uint32(len(eps))}})
}

// pickMap is the named numgen map of a chain that picks an endpoint.
func pickMap(chain string) Set {
	name := "endpoints-" + strings.TrimPrefix(chain, "service-")
	if strings.HasPrefix(chain, "local-") {
		name = "local-endpoints-" + strings.TrimPrefix(chain, "local-")
	}
	return Set{Name: name, Key: []KeyType{KeyMark}, Verdict: true}
}

// endpointMap is one named numgen map with its elements.
type endpointMap struct {
	set Set
	els []Element
}

// endpointMaps gives the service port's named numgen maps.
func (s svcPort) endpointMaps() []endpointMap {
	mk := func(chain string, eps []endpoint) endpointMap {
		m := endpointMap{set: pickMap(chain)}
		for i, e := range eps {
			m.els = append(m.els, Element{Num: uint32(i), Verdict: goTo(s.epChain(e))})
		}
		return m
	}
	if len(s.eps) == 0 {
		return nil
	}
	out := []endpointMap{mk(s.svcChain(), s.eps)}
	if s.hasExternal() && s.etpLocal && len(s.localEps()) > 0 {
		out = append(out, mk(s.localChain(), s.localEps()))
	}
	return out
}

// elements gives the service port's map elements, by map.
func (s svcPort) elements() map[string][]Element {
	out := map[string][]Element{}
	add := func(m Set, e Element) { out[m.Name] = append(out[m.Name], e) }
	ip := net.ParseIP(s.clusterIP)
	switch {
	case s.itpLocalDrop:
		add(mapNoEndpointServices, Element{Addr: ip, Proto: s.proto, Port: s.port, Verdict: Verdict{Kind: Drop}})
	case len(s.eps) == 0:
		add(mapNoEndpointServices, Element{Addr: ip, Proto: s.proto, Port: s.port, Verdict: goTo("reject-chain")})
	default:
		add(mapServiceIPs, Element{Addr: ip, Proto: s.proto, Port: s.port, Verdict: goTo(s.svcChain())})
	}
	if !s.hasExternal() || len(s.eps) == 0 {
		return out
	}
	for _, lb := range s.lbIPs {
		add(mapServiceIPs, Element{Addr: net.ParseIP(lb), Proto: s.proto, Port: s.port, Verdict: goTo(s.extChain())})
	}
	if s.nodePort != 0 {
		add(mapServiceNodePorts, Element{Proto: s.proto, Port: s.nodePort, Verdict: goTo(s.extChain())})
	}
	return out
}

func setByName(name string) Set {
	for _, m := range allMaps {
		if m.Name == name {
			return m
		}
	}
	panic("no map " + name)
}

// fullSync is the proxier's full resync of services: everything a rule
// or an element refers to is created before it, in the same batch.
func fullSync(services []svcPort) *Tx {
	tx := NewTx(tableSkiff)
	tx.AddTable()
	var all []chainDef
	all = append(all, commonChains...)
	for _, s := range services {
		all = append(all, s.chains()...)
	}
	for _, c := range all {
		tx.AddChain(c.chain)
	}
	for _, m := range allMaps {
		tx.AddSet(m)
		tx.FlushSet(m)
	}
	for _, s := range services {
		for _, m := range s.endpointMaps() {
			tx.AddSet(m.set)
			tx.FlushSet(m.set)
		}
	}
	for _, s := range services {
		if s.affinity > 0 && len(s.eps) > 0 {
			for _, e := range s.eps {
				tx.AddSet(s.affSet(e))
			}
		}
	}
	for _, c := range all {
		tx.FlushChain(c.chain.Name)
		for _, r := range c.rules {
			tx.AddRule(c.chain.Name, "", r...)
		}
	}
	for _, m := range allMaps {
		var els []Element
		for _, s := range services {
			els = append(els, s.elements()[m.Name]...)
		}
		tx.AddElements(m, els...)
	}
	for _, s := range services {
		for _, m := range s.endpointMaps() {
			tx.AddElements(m.set, m.els...)
		}
	}
	return tx
}

// representative is the golden-test ruleset: a ClusterIP service with two
// endpoints, a NodePort+LoadBalancer service with externalTrafficPolicy
// Local, one with ClientIP affinity, one without endpoints and one whose
// cluster IP drops (internalTrafficPolicy Local, no local endpoint).
var representative = []svcPort{
	{ns: "default", name: "web", portName: "http", proto: TCP, clusterIP: "10.96.0.10", port: 80,
		eps: []endpoint{{ip: "10.244.1.5", port: 8080, local: true}, {ip: "10.244.2.7", port: 8080}}},
	{ns: "shop", name: "front", portName: "https", proto: TCP, clusterIP: "10.96.0.20", port: 443,
		nodePort: 30443, lbIPs: []string{"203.0.113.10"}, etpLocal: true,
		eps: []endpoint{{ip: "10.244.1.8", port: 8443, local: true}, {ip: "10.244.2.9", port: 8443}}},
	{ns: "default", name: "sticky", portName: "grpc", proto: TCP, clusterIP: "10.96.0.30", port: 9000,
		affinity: 10800 * time.Second,
		eps:      []endpoint{{ip: "10.244.1.10", port: 9000, local: true}, {ip: "10.244.2.11", port: 9000}}},
	{ns: "default", name: "empty", portName: "http", proto: TCP, clusterIP: "10.96.0.40", port: 80},
	{ns: "kube-system", name: "metrics", portName: "dns", proto: UDP, clusterIP: "10.96.0.50", port: 53,
		itpLocalDrop: true},
}

// syntheticServices makes n ClusterIP service ports with m endpoints each.
func syntheticServices(n, m int) []svcPort {
	out := make([]svcPort, n)
	for i := range out {
		s := svcPort{ns: "ns" + fmt.Sprint(i%100), name: fmt.Sprintf("svc%d", i), portName: "http", proto: TCP,
			clusterIP: fmt.Sprintf("10.96.%d.%d", i/256, i%256), port: 80}
		for j := 0; j < m; j++ {
			k := i*m + j
			s.eps = append(s.eps, endpoint{ip: fmt.Sprintf("10.244.%d.%d", k/256, k%256), port: 8080})
		}
		out[i] = s
	}
	return out
}
