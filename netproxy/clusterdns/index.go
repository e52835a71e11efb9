package clusterdns

import (
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// svcKey names a Service (or an EndpointSlice): namespace and name.
type svcKey struct{ ns, name string }

type serviceKind int

const (
	kindClusterIP serviceKind = iota
	kindHeadless
	kindExternalName
)

// serviceInfo is what DNS needs of a Service, copied out of the informer's
// object so the index never holds API objects.
type serviceInfo struct {
	kind            serviceKind
	clusterIPs      []netip.Addr
	externalName    string // lowercase FQDN
	ports           []portInfo
	publishNotReady bool
}

// portInfo is a named port; name and proto are lowercase, as SRV labels are.
type portInfo struct {
	name, proto string
	port        uint16
}

type sliceInfo struct {
	ports     []portInfo
	endpoints []endpointInfo
}

type endpointInfo struct {
	addrs    []netip.Addr
	hostname string
	ready    bool
}

// serviceState is one Service with its EndpointSlices, and what it put in
// the index last time, so a change removes exactly that and nothing else.
type serviceState struct {
	svc    *serviceInfo // nil while only slices are known
	slices map[string]*sliceInfo
	names  []string
	ptrs   []string
}

// node is every record of one owner name. Nodes are immutable once in the
// index: a change builds new ones, so a reader may keep one after
// unlocking.
type node struct {
	addrs []netip.Addr
	cname string
	srvs  []srvRecord
}

type srvRecord struct {
	target string
	port   uint16
}

type ptrOwner struct {
	svc    svcKey
	target string
}

// index maps lowercase owner names and reverse names to records. Every
// informer event rebuilds the records of the one Service it touches, so a
// query is a map lookup whatever the number of Services.
type index struct {
	domain string // lowercase FQDN: "cluster.local."

	mu       sync.RWMutex
	services map[svcKey]*serviceState
	sliceSvc map[svcKey]string // slice → name of its Service (same namespace)
	names    map[string]*node
	ptrs     map[string][]ptrOwner
	nsCount  map[string]int // Services per namespace: <ns>.svc.<domain> exists
}

func newIndex(domain string) *index {
	return &index{
		domain:   domain,
		services: make(map[svcKey]*serviceState),
		sliceSvc: make(map[svcKey]string),
		names:    make(map[string]*node),
		ptrs:     make(map[string][]ptrOwner),
		nsCount:  make(map[string]int),
	}
}

// setService records a Service (info nil: deleted) and rebuilds its records.
func (x *index) setService(key svcKey, info *serviceInfo) {
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.services[key]
	if st == nil {
		if info == nil {
			return
		}
		st = &serviceState{slices: make(map[string]*sliceInfo)}
		x.services[key] = st
	}
	switch {
	case st.svc == nil && info != nil:
		x.nsCount[key.ns]++
	case st.svc != nil && info == nil:
		if x.nsCount[key.ns]--; x.nsCount[key.ns] <= 0 {
			delete(x.nsCount, key.ns)
		}
	}
	st.svc = info
	x.rebuild(key, st)
}

// setSlice records an EndpointSlice of Service svcName (info nil: deleted)
// and rebuilds the records of the Service it belongs to, and of the one it
// belonged to if its service-name label changed.
func (x *index) setSlice(slice svcKey, svcName string, info *sliceInfo) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.sliceSvc[slice]; ok && (old != svcName || info == nil) {
		oldKey := svcKey{slice.ns, old}
		if st := x.services[oldKey]; st != nil {
			delete(st.slices, slice.name)
			x.rebuild(oldKey, st)
		}
		delete(x.sliceSvc, slice)
	}
	if info == nil || svcName == "" {
		return
	}
	key := svcKey{slice.ns, svcName}
	st := x.services[key]
	if st == nil {
		st = &serviceState{slices: make(map[string]*sliceInfo)}
		x.services[key] = st
	}
	st.slices[slice.name] = info
	x.sliceSvc[slice] = svcName
	x.rebuild(key, st)
}

// rebuild replaces what one Service contributes to the index. Called with
// x.mu held.
func (x *index) rebuild(key svcKey, st *serviceState) {
	for _, n := range st.names {
		delete(x.names, n)
	}
	for _, r := range st.ptrs {
		x.removePTR(r, key)
	}
	st.names, st.ptrs = st.names[:0], st.ptrs[:0]
	if st.svc == nil {
		if len(st.slices) == 0 {
			delete(x.services, key)
		}
		return
	}
	names, ptrs := buildRecords(key, st, x.domain)
	for n, nd := range names {
		x.names[n] = nd
		st.names = append(st.names, n)
	}
	for r, target := range ptrs {
		x.ptrs[r] = append(x.ptrs[r], ptrOwner{svc: key, target: target})
		st.ptrs = append(st.ptrs, r)
	}
}

func (x *index) removePTR(rev string, key svcKey) {
	owners := slices.DeleteFunc(x.ptrs[rev], func(o ptrOwner) bool { return o.svc == key })
	if len(owners) == 0 {
		delete(x.ptrs, rev)
		return
	}
	x.ptrs[rev] = owners
}

// recordSet collects one Service's records while they are built.
type recordSet struct {
	names map[string]*node
	ptrs  map[string]string
	srvs  map[string]map[srvRecord]bool // dedup: dual-stack slices repeat hostnames
}

func (r *recordSet) node(name string) *node {
	n := r.names[name]
	if n == nil {
		n = &node{}
		r.names[name] = n
	}
	return n
}

func (r *recordSet) addSRV(name string, rec srvRecord) {
	seen := r.srvs[name]
	if seen == nil {
		seen = make(map[srvRecord]bool)
		r.srvs[name] = seen
	}
	if seen[rec] {
		return
	}
	seen[rec] = true
	n := r.node(name)
	n.srvs = append(n.srvs, rec)
}

// portName is the owner of a port's SRV records; it also creates the
// empty non-terminal _<proto>.<base> so that name answers NODATA.
func (r *recordSet) portName(p portInfo, base string) string {
	r.node("_" + p.proto + "." + base)
	name := "_" + p.name + "._" + p.proto + "." + base
	r.node(name)
	return name
}

// buildRecords computes every name and reverse name one Service owns. All
// its names end in <svc>.<ns>.svc.<domain>, so no other Service can own
// them.
func buildRecords(key svcKey, st *serviceState, domain string) (map[string]*node, map[string]string) {
	r := &recordSet{
		names: make(map[string]*node),
		ptrs:  make(map[string]string),
		srvs:  make(map[string]map[srvRecord]bool),
	}
	base := strings.ToLower(key.name + "." + key.ns + ".svc." + domain)
	svc := st.svc
	top := r.node(base)
	switch svc.kind {
	case kindExternalName:
		top.cname = svc.externalName
	case kindClusterIP:
		top.addrs = svc.clusterIPs
		for _, ip := range svc.clusterIPs {
			r.ptrs[reverseName(ip)] = base
		}
		for _, p := range svc.ports {
			rec := srvRecord{target: base, port: p.port}
			r.addSRV(r.portName(p, base), rec)
			r.addSRV(base, rec)
		}
	case kindHeadless:
		for _, p := range svc.ports {
			r.portName(p, base)
		}
		buildHeadless(r, st, base)
	}
	return r.names, r.ptrs
}

func buildHeadless(r *recordSet, st *serviceState, base string) {
	sliceNames := make([]string, 0, len(st.slices))
	for n := range st.slices {
		sliceNames = append(sliceNames, n)
	}
	slices.Sort(sliceNames)
	seen := make(map[netip.Addr]bool)
	for _, sn := range sliceNames {
		sl := st.slices[sn]
		for _, ep := range sl.endpoints {
			if !ep.ready && !st.svc.publishNotReady {
				continue
			}
			for _, a := range ep.addrs {
				if seen[a] {
					continue
				}
				seen[a] = true
				top := r.node(base)
				top.addrs = append(top.addrs, a)
				target := endpointLabel(ep.hostname, a) + "." + base
				tn := r.node(target)
				tn.addrs = append(tn.addrs, a)
				r.ptrs[reverseName(a)] = target
				for _, p := range sl.ports {
					rec := srvRecord{target: target, port: p.port}
					r.addSRV(r.portName(p, base), rec)
					r.addSRV(base, rec)
				}
			}
		}
	}
}

// endpointLabel names an endpoint under its Service: its hostname (set for
// StatefulSet pods) or its address with dashes, as CoreDNS does.
func endpointLabel(hostname string, a netip.Addr) string {
	if hostname != "" {
		return strings.ToLower(hostname)
	}
	s := a.String()
	if a.Is4() {
		return strings.ReplaceAll(s, ".", "-")
	}
	return strings.ReplaceAll(s, ":", "-")
}

func reverseName(a netip.Addr) string {
	rev, _ := dns.ReverseAddr(a.String()) // a valid address always reverses
	return rev
}

// lookupResult is what the index knows of one name.
type lookupResult struct {
	node   *node // nil for an empty non-terminal
	exists bool
}

// lookup finds a lowercase name of the cluster zone. Beside the Services'
// own names, <ns>.svc.<domain> exists while the namespace has a Service, so
// search-path expansion gets NODATA there, not NXDOMAIN.
func (x *index) lookup(name string) lookupResult {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if n, ok := x.names[name]; ok {
		return lookupResult{node: n, exists: true}
	}
	if ns, ok := strings.CutSuffix(name, ".svc."+x.domain); ok && !strings.Contains(ns, ".") {
		return lookupResult{exists: x.nsCount[ns] > 0}
	}
	return lookupResult{}
}

// lookupMany finds several names under one lock (an SRV answer's targets).
func (x *index) lookupMany(names []string) []*node {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*node, len(names))
	for i, n := range names {
		out[i] = x.names[n]
	}
	return out
}

// lookupPTR returns the names a lowercase reverse name points to, sorted.
func (x *index) lookupPTR(rev string) []string {
	x.mu.RLock()
	owners := x.ptrs[rev]
	out := make([]string, 0, len(owners))
	for _, o := range owners {
		out = append(out, o.target)
	}
	x.mu.RUnlock()
	slices.Sort(out)
	return slices.Compact(out)
}
