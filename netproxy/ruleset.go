package netproxy

import (
	"net"

	"skiff/netproxy/nft"
)

// masqueradeMark is the packet-mark bit that asks nat-postrouting to
// masquerade a packet whose DNAT was decided earlier.
const masqueradeMark = 0x4000

// Names of the table's fixed chains and maps.
const (
	chainServices       = "services"
	chainMasquerading   = "masquerading"
	chainMarkMasquerade = "mark-for-masquerade"
	chainReject         = "reject-chain"

	mapServiceIPs          = "service-ips"
	mapServiceNodePorts    = "service-nodeports"
	mapNoEndpointServices  = "no-endpoint-services"
	mapNoEndpointNodePorts = "no-endpoint-nodeports"
)

// chainDef is a chain with its rules, in order.
type chainDef struct {
	chain nft.Chain
	rules [][]nft.Stmt
}

var (
	keyAddrProtoPort = []nft.Field{nft.FieldDAddr, nft.FieldL4Proto, nft.FieldDPort}
	keyProtoPort     = []nft.Field{nft.FieldL4Proto, nft.FieldDPort}
)

func jump(chain string) nft.Verdict      { return nft.Verdict{Kind: nft.Jump, Chain: chain} }
func goTo(chain string) nft.Verdict      { return nft.Verdict{Kind: nft.Goto, Chain: chain} }
func rule(s ...nft.Stmt) []nft.Stmt      { return s }
func rules(r ...[]nft.Stmt) [][]nft.Stmt { return r }

// tableChains are the base chains, then the common regular chains, of the
// family's table: the part of the ruleset that never depends on Services.
func (f *family) tableChains() []chainDef {
	noEndpointServices := rule(nft.VMap{Key: keyAddrProtoPort, Map: mapNoEndpointServices})
	return []chainDef{
		// Loopback addresses only come from the node itself: a host port
		// on 127.0.0.1 is not for the network, even with route_localnet.
		{nft.Chain{Name: "nat-prerouting", Type: nft.TypeNAT, Hook: nft.HookPrerouting, Priority: -100},
			rules(rule(jump(chainServices)),
				rule(nft.MatchAddr{Field: nft.FieldDAddr, Net: f.loopback, Negate: true}, jump(chainHostPorts)))},
		{nft.Chain{Name: "nat-output", Type: nft.TypeNAT, Hook: nft.HookOutput, Priority: -100},
			rules(rule(jump(chainServices)), rule(jump(chainHostPorts)))},
		// route_localnet (set for host ports on 127.0.0.1) would also let
		// the network reach the node's loopback services: what claims a
		// loopback address and did not come in on lo is dropped before
		// routing (and before NAT, which can only have rewritten it for
		// replies to the node's own masqueraded connections).
		{nft.Chain{Name: "filter-prerouting", Type: nft.TypeFilter, Hook: nft.HookPrerouting, Priority: -150},
			rules(rule(nft.MatchAddr{Field: nft.FieldDAddr, Net: f.loopback}, nft.MatchLoopbackIn{Negate: true},
				nft.Verdict{Kind: nft.Drop}))},
		{nft.Chain{Name: "nat-postrouting", Type: nft.TypeNAT, Hook: nft.HookPostrouting, Priority: 100},
			rules(rule(jump(chainMasquerading)))},
		{nft.Chain{Name: "filter-input", Type: nft.TypeFilter, Hook: nft.HookInput, Priority: 0},
			rules(noEndpointServices,
				rule(nft.MatchLocalDst{}, nft.VMap{Key: keyProtoPort, Map: mapNoEndpointNodePorts}))},
		{nft.Chain{Name: "filter-forward", Type: nft.TypeFilter, Hook: nft.HookForward, Priority: 0},
			append(rules(noEndpointServices), f.unclaimedServiceIPs()...)},
		{nft.Chain{Name: "filter-output", Type: nft.TypeFilter, Hook: nft.HookOutput, Priority: 0},
			append(rules(noEndpointServices), f.unclaimedServiceIPs()...)},

		{nft.Chain{Name: chainServices}, rules(
			rule(nft.VMap{Key: keyAddrProtoPort, Map: mapServiceIPs}),
			// Loopback is left out: a NodePort on 127.0.0.1 would need
			// route_localnet to be routed back out.
			rule(nft.MatchAddr{Field: nft.FieldDAddr, Net: f.loopback, Negate: true}, nft.MatchLocalDst{},
				nft.VMap{Key: keyProtoPort, Map: mapServiceNodePorts}))},
		// Host ports published on one address first, then those on every
		// local address: two lookups at most, whatever their number.
		{nft.Chain{Name: chainHostPorts}, rules(
			rule(nft.VMap{Key: keyAddrProtoPort, Map: mapHostPortIPs}),
			rule(nft.MatchLocalDst{}, nft.VMap{Key: keyProtoPort, Map: mapHostPortAny}))},
		{nft.Chain{Name: chainMasquerading}, rules(
			rule(nft.MatchMarkUnset{Mark: masqueradeMark}, nft.Verdict{Kind: nft.Return}),
			// Clearing the bit keeps a packet that is forwarded again (to
			// another node) from being masqueraded twice.
			rule(nft.MarkXor{Mark: masqueradeMark}),
			rule(nft.Masquerade{FullyRandom: true}))},
		{nft.Chain{Name: chainMarkMasquerade}, rules(rule(nft.MarkOr{Mark: masqueradeMark}))},
		{nft.Chain{Name: chainReject}, rules(
			rule(nft.MatchProto{Proto: nft.TCP}, nft.Reject{TCPReset: true}),
			rule(nft.Reject{}))},
	}
}

// unclaimedServiceIPs refuse what is left addressed to the Service range
// after DNAT (which rewrote every claimed address): a Service that is gone,
// or a port it does not have. The addresses served on the node itself are
// let through first.
func (f *family) unclaimedServiceIPs() [][]nft.Stmt {
	var out [][]nft.Stmt
	if len(f.serviceCIDRs) == 0 {
		return nil
	}
	for _, ip := range f.localServiceIPs {
		out = append(out, rule(nft.MatchAddr{Field: nft.FieldDAddr, Net: f.host(ip)}, nft.Verdict{Kind: nft.Return}))
	}
	for _, c := range f.serviceCIDRs {
		out = append(out, rule(nft.MatchAddr{Field: nft.FieldDAddr, Net: c}, goTo(chainReject)))
	}
	return out
}

// tableMaps are the table's verdict maps. newFamily relies on the order.
func (f *family) tableMaps() []nft.Set {
	addrProtoPort := []nft.KeyType{f.addrKey, nft.KeyInetProto, nft.KeyInetService}
	protoPort := []nft.KeyType{nft.KeyInetProto, nft.KeyInetService}
	return []nft.Set{
		{Name: mapServiceIPs, Key: addrProtoPort, Verdict: true},
		{Name: mapServiceNodePorts, Key: protoPort, Verdict: true},
		{Name: mapNoEndpointServices, Key: addrProtoPort, Verdict: true},
		{Name: mapNoEndpointNodePorts, Key: protoPort, Verdict: true},
		{Name: mapHostPortIPs, Key: addrProtoPort, Verdict: true},
		{Name: mapHostPortAny, Key: protoPort, Verdict: true},
	}
}

// mapElement is one element of one of the table's maps.
type mapElement struct {
	set *nft.Set
	el  nft.Element
}

// endpointMap is a chooser chain's named numgen map: element i leads to
// the i-th endpoint chain. Named, because the kernel binds a rule to an
// anonymous map by walking the whole batch: with one per Service a full
// sync at 5,000 Services spent seconds on that alone.
type endpointMap struct {
	set      nft.Set
	elements []nft.Element
}

// portRules is everything one service port puts in a table: its chains
// (service, external, local, then endpoints), its affinity sets, its
// endpoint maps and its elements in the table's maps.
type portRules struct {
	chains []chainDef
	sets   []nft.Set
	// maps are the endpoint maps of the service and local chains (none for
	// a chain with a single endpoint: it leads there directly).
	maps     []endpointMap
	elements []mapElement
	// endpoints is the number of endpoint chains, the last of chains.
	endpoints int
}

// choosers are the chains that pick an endpoint: service, external, local.
func (r *portRules) choosers() []chainDef { return r.chains[:len(r.chains)-r.endpoints] }

// endpointChains are the chains that DNAT to one endpoint each.
func (r *portRules) endpointChains() []chainDef { return r.chains[len(r.chains)-r.endpoints:] }

func (r *portRules) ruleCount() int {
	n := 0
	for _, c := range r.chains {
		n += len(c.rules)
	}
	return n
}

// elementCount counts the port's elements: in the table's maps and in its
// own endpoint maps.
func (r *portRules) elementCount() int {
	n := len(r.elements)
	for _, m := range r.maps {
		n += len(m.elements)
	}
	return n
}

// maxNameLen is the longest chain or set name the kernel takes
// (NFT_NAME_MAXLEN less the terminating NUL).
const maxNameLen = 255

// objectName is "<prefix><hash>-<suffix>", the suffix cut to fit the
// kernel's limit: the hash, of the whole suffix, keeps names unique, and
// every name goes through here so that a cut one is always cut alike.
// Kubernetes' name limits keep real ids well below it.
func objectName(prefix, hash, suffix string) string {
	if room := maxNameLen - len(prefix) - len(hash) - 1; len(suffix) > room {
		suffix = suffix[:room]
	}
	return prefix + hash + "-" + suffix
}

// endpointNames are the chain and affinity set of one endpoint of a port.
type endpointNames struct{ chain, affinity string }

func (sp *servicePort) endpointNames(ep endpoint) endpointNames {
	suffix := sp.id + "__" + ep.String()
	h := shortHash(suffix)
	return endpointNames{chain: objectName("endpoint-", h, suffix), affinity: objectName("affinity-", h, suffix)}
}

// Name prefixes of the endpoint maps of service and local chains.
const (
	endpointsPrefix      = "endpoints-"
	localEndpointsPrefix = "local-endpoints-"
)

// portNames are the names of a port's own chains and endpoint maps.
type portNames struct {
	service, external, local         string
	serviceEndpoints, localEndpoints string
}

func (sp *servicePort) names() portNames {
	return portNames{
		service:          objectName("service-", sp.hash, sp.id),
		external:         objectName("external-", sp.hash, sp.id),
		local:            objectName("local-", sp.hash, sp.id),
		serviceEndpoints: objectName(endpointsPrefix, sp.hash, sp.id),
		localEndpoints:   objectName(localEndpointsPrefix, sp.hash, sp.id),
	}
}

// externalEndpoints are the endpoints external traffic ends on.
func (sp *servicePort) externalEndpoints() []endpoint {
	if sp.externalLocal {
		return sp.localEndpoints
	}
	return sp.clusterEndpoints
}

// portRules builds the chains, sets and map elements of one service port.
func (f *family) portRules(sp *servicePort) *portRules {
	r := &portRules{}
	n := sp.names()
	names := make(map[string]endpointNames, len(sp.clusterEndpoints))
	nameOf := func(ep endpoint) endpointNames {
		k := ep.String()
		n, ok := names[k]
		if !ok {
			n = sp.endpointNames(ep)
			names[k] = n
		}
		return n
	}

	if len(sp.clusterEndpoints) > 0 {
		var rs [][]nft.Stmt
		if f.podCIDR != nil {
			rs = append(rs, rule(nft.MatchAddr{Field: nft.FieldDAddr, Net: f.host(sp.clusterIP)},
				nft.MatchAddr{Field: nft.FieldSAddr, Net: f.podCIDR, Negate: true}, jump(chainMarkMasquerade)))
		}
		rs = append(rs, r.balance(sp, sp.clusterEndpoints, n.serviceEndpoints, nameOf)...)
		r.chains = append(r.chains, chainDef{nft.Chain{Name: n.service}, rs})
	}
	extEndpoints := sp.externalEndpoints()
	if sp.hasExternal() && len(extEndpoints) > 0 {
		var rs [][]nft.Stmt
		if !sp.externalLocal {
			rs = rules(rule(jump(chainMarkMasquerade)), rule(goTo(n.service)))
		} else {
			if f.podCIDR != nil && len(sp.clusterEndpoints) > 0 {
				// Pods reaching a NodePort or LB IP take the cluster path:
				// only traffic from outside keeps its source.
				rs = append(rs, rule(nft.MatchAddr{Field: nft.FieldSAddr, Net: f.podCIDR}, goTo(n.service)))
			}
			rs = append(rs, rule(goTo(n.local)))
		}
		r.chains = append(r.chains, chainDef{nft.Chain{Name: n.external}, rs})
	}
	if sp.externalLocal && len(sp.localEndpoints) > 0 {
		r.chains = append(r.chains, chainDef{nft.Chain{Name: n.local}, r.balance(sp, sp.localEndpoints, n.localEndpoints, nameOf)})
	}
	before := len(r.chains)
	r.addEndpointChains(f, sp, nameOf)
	r.endpoints = len(r.chains) - before
	r.elements = f.portElements(sp, n.service, n.external)
	return r
}

// balance is the affinity rules (if any) then the random choice among eps
// through the endpoint map mapName, which it adds to r. A single endpoint
// is gone to directly, as kube-proxy does: the common one-replica Service
// then needs no map.
func (r *portRules) balance(sp *servicePort, eps []endpoint, mapName string, nameOf func(endpoint) endpointNames) [][]nft.Stmt {
	rs := make([][]nft.Stmt, 0, len(eps)+1)
	if sp.affinity > 0 {
		for _, ep := range eps {
			n := nameOf(ep)
			rs = append(rs, rule(nft.MatchSAddrInSet{Set: n.affinity}, goTo(n.chain)))
		}
	}
	if len(eps) == 1 {
		return append(rs, rule(goTo(nameOf(eps[0]).chain)))
	}
	m := endpointMap{
		set:      nft.Set{Name: mapName, Key: []nft.KeyType{nft.KeyMark}, Verdict: true},
		elements: make([]nft.Element, len(eps)),
	}
	for i, ep := range eps {
		m.elements[i] = nft.Element{Num: uint32(i), Verdict: goTo(nameOf(ep).chain)}
	}
	r.maps = append(r.maps, m)
	return append(rs, rule(nft.NumgenVMap{Map: mapName, Mod: uint32(len(eps))}))
}

// addEndpointChains adds a chain (and an affinity set) per endpoint used
// by the port's chains, in address order.
func (r *portRules) addEndpointChains(f *family, sp *servicePort, nameOf func(endpoint) endpointNames) {
	eps := sp.clusterEndpoints
	if len(sp.localEndpoints) > 0 {
		eps = mergeEndpoints(sp.clusterEndpoints, sp.localEndpoints)
	}
	for _, ep := range eps {
		n := nameOf(ep)
		rs := make([][]nft.Stmt, 0, 3)
		// Hairpin: a pod reaching itself through its Service must see the
		// reply come from the Service, so its own source is rewritten.
		rs = append(rs, rule(nft.MatchAddr{Field: nft.FieldSAddr, Net: f.host(ep.ip)}, jump(chainMarkMasquerade)))
		if sp.affinity > 0 {
			rs = append(rs, rule(nft.UpdateSet{Set: n.affinity, Field: nft.FieldSAddr}))
			r.sets = append(r.sets, nft.Set{Name: n.affinity, Key: []nft.KeyType{f.addrKey}, Timeout: sp.affinity})
		}
		rs = append(rs, rule(nft.MatchProto{Proto: sp.proto}, nft.DNAT{Addr: ep.ip, Port: ep.port}))
		r.chains = append(r.chains, chainDef{nft.Chain{Name: n.chain}, rs})
	}
}

// mergeEndpoints is the sorted union of two sorted lists.
func mergeEndpoints(a, b []endpoint) []endpoint {
	out := make([]endpoint, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b):
			out, i = append(out, a[i]), i+1
		case i == len(a):
			out, j = append(out, b[j]), j+1
		default:
			c := compareEndpoints(a[i], b[j])
			if c <= 0 {
				out, i = append(out, a[i]), i+1
			} else {
				out, j = append(out, b[j]), j+1
			}
			if c == 0 {
				j++
			}
		}
	}
	return out
}

// portElements are the port's map elements: where its cluster IP, external
// IPs and NodePort lead, or why they are refused.
func (f *family) portElements(sp *servicePort, serviceChain, externalChain string) []mapElement {
	reject, drop := goTo(chainReject), nft.Verdict{Kind: nft.Drop}
	els := make([]mapElement, 0, 2+len(sp.externalIPs))
	ipEl := func(set *nft.Set, ip net.IP, v nft.Verdict) {
		els = append(els, mapElement{set, nft.Element{Addr: ip, Proto: sp.proto, Port: sp.port, Verdict: v}})
	}
	switch {
	case !sp.hasEndpoints:
		ipEl(f.noEPServices, sp.clusterIP, reject)
	case len(sp.clusterEndpoints) == 0:
		ipEl(f.noEPServices, sp.clusterIP, drop)
	default:
		ipEl(f.serviceIPs, sp.clusterIP, goTo(serviceChain))
	}
	if !sp.hasExternal() {
		return els
	}
	extSet, npSet, v := f.serviceIPs, f.nodePorts, goTo(externalChain)
	switch {
	case !sp.hasEndpoints:
		extSet, npSet, v = f.noEPServices, f.noEPNPs, reject
	case len(sp.externalEndpoints()) == 0:
		extSet, npSet, v = f.noEPServices, f.noEPNPs, drop
	}
	for _, ip := range sp.externalIPs {
		ipEl(extSet, ip, v)
	}
	if sp.nodePort != 0 {
		els = append(els, mapElement{npSet, nft.Element{Proto: sp.proto, Port: sp.nodePort, Verdict: v}})
	}
	return els
}
