package clusterdns

import (
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// clusterTTL is the TTL of every cluster answer: short, as Services and
// endpoints change under the clients' feet (CoreDNS's kubernetes plugin
// uses the same).
const clusterTTL = 5

// maxChain bounds CNAME chains inside the zone (ExternalName Services
// pointing at each other), so a loop ends.
const maxChain = 8

// zone answers the names of the cluster domain, authoritatively.
type zone struct {
	domain string // lowercase FQDN: "cluster.local."
	idx    *index
	soa    *dns.SOA
	ns     *dns.NS
	static map[string]*node // the apex, svc., pod., and the server's own name
}

func newZone(domain string, idx *index, self netip.Addr) *zone {
	nsName := "ns.dns." + domain
	z := &zone{
		domain: domain,
		idx:    idx,
		soa: &dns.SOA{
			Hdr:     dns.RR_Header{Name: domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: clusterTTL},
			Ns:      nsName,
			Mbox:    "hostmaster." + domain,
			Serial:  uint32(time.Now().Unix()),
			Refresh: 7200,
			Retry:   1800,
			Expire:  86400,
			Minttl:  clusterTTL,
		},
		ns: &dns.NS{
			Hdr: dns.RR_Header{Name: domain, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: clusterTTL},
			Ns:  nsName,
		},
		static: map[string]*node{
			domain:          {},
			"svc." + domain: {},
			"pod." + domain: {},
			"dns." + domain: {},
		},
	}
	self = self.Unmap()
	if self.IsValid() && !self.IsUnspecified() {
		z.static[nsName] = &node{addrs: []netip.Addr{self}}
	}
	return z
}

// contains reports whether the lowercase name is in the cluster domain.
func (z *zone) contains(name string) bool {
	return name == z.domain || strings.HasSuffix(name, "."+z.domain)
}

// answer fills m, already a reply to q, from the cluster's records; lname
// is q.Name in lowercase. A CNAME that leaves the zone is put in the
// answer and its target returned, for the caller to resolve.
func (z *zone) answer(m *dns.Msg, q dns.Question, lname string) (chase string) {
	m.Authoritative = true
	owner, name := q.Name, lname
	for depth := 0; ; depth++ {
		res := z.find(name)
		if !res.exists {
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{z.soa}
			return ""
		}
		n := res.node
		if n != nil && n.cname != "" && q.Qtype != dns.TypeCNAME {
			m.Answer = append(m.Answer, cnameRR(owner, n.cname))
			if !z.contains(n.cname) {
				return n.cname
			}
			if depth == maxChain {
				m.Rcode = dns.RcodeServerFailure
				return ""
			}
			owner, name = n.cname, n.cname
			continue
		}
		before := len(m.Answer)
		z.records(m, owner, name, q.Qtype, n)
		if len(m.Answer) == before {
			m.Ns = []dns.RR{z.soa}
		}
		return ""
	}
}

// find looks a lowercase name up: the fixed names, pod names, then the
// Services' index.
func (z *zone) find(name string) lookupResult {
	if n, ok := z.static[name]; ok {
		return lookupResult{node: n, exists: true}
	}
	if a, ok := z.podAddr(name); ok {
		return lookupResult{node: &node{addrs: []netip.Addr{a}}, exists: true}
	}
	return z.idx.lookup(name)
}

// podAddr parses <a-b-c-d>.<ns>.pod.<domain> (IPv6 with dashes for
// colons). Any namespace is accepted: pod names are not checked against
// pods, as with CoreDNS's "pods insecure".
func (z *zone) podAddr(name string) (netip.Addr, bool) {
	rest, ok := strings.CutSuffix(name, ".pod."+z.domain)
	if !ok {
		return netip.Addr{}, false
	}
	label, ns, ok := strings.Cut(rest, ".")
	if !ok || ns == "" || strings.Contains(ns, ".") {
		return netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ".")); err == nil && a.Is4() {
		return a, true
	}
	if a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ":")); err == nil && a.Is6() && !a.Is4In6() {
		return a, true
	}
	return netip.Addr{}, false
}

// records appends n's records of type qtype, owned by owner, to m.
func (z *zone) records(m *dns.Msg, owner, name string, qtype uint16, n *node) {
	if name == z.domain {
		switch qtype {
		case dns.TypeSOA:
			m.Answer = append(m.Answer, z.soa)
		case dns.TypeNS:
			m.Answer = append(m.Answer, z.ns)
			if self := z.static[z.ns.Ns]; self != nil {
				m.Extra = appendAddrs(m.Extra, z.ns.Ns, self.addrs, dns.TypeANY)
			}
		}
		return
	}
	if n == nil {
		return
	}
	switch qtype {
	case dns.TypeA, dns.TypeAAAA, dns.TypeANY:
		m.Answer = appendAddrs(m.Answer, owner, n.addrs, qtype)
	case dns.TypeCNAME:
		if n.cname != "" {
			m.Answer = append(m.Answer, cnameRR(owner, n.cname))
		}
	case dns.TypeSRV:
		z.srvRecords(m, owner, n)
	}
}

// srvRecords answers SRV with the targets' addresses in the additional
// section, which spares headless clients one query per endpoint.
func (z *zone) srvRecords(m *dns.Msg, owner string, n *node) {
	if len(n.srvs) == 0 {
		return
	}
	weight := uint16(max(1, 100/len(n.srvs)))
	targets := make([]string, 0, len(n.srvs))
	seen := make(map[string]bool, len(n.srvs))
	for _, s := range n.srvs {
		m.Answer = append(m.Answer, &dns.SRV{
			Hdr:      dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: clusterTTL},
			Priority: 0,
			Weight:   weight,
			Port:     s.port,
			Target:   s.target,
		})
		if !seen[s.target] {
			seen[s.target] = true
			targets = append(targets, s.target)
		}
	}
	for i, tn := range z.idx.lookupMany(targets) {
		if tn != nil {
			m.Extra = appendAddrs(m.Extra, targets[i], tn.addrs, dns.TypeANY)
		}
	}
}

// appendAddrs appends A and/or AAAA records (qtype ANY: both).
func appendAddrs(rrs []dns.RR, owner string, addrs []netip.Addr, qtype uint16) []dns.RR {
	for _, a := range addrs {
		switch {
		case a.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
			b := a.As4()
			rrs = append(rrs, &dns.A{
				Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: clusterTTL},
				A:   net.IP(b[:]),
			})
		case a.Is6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
			b := a.As16()
			rrs = append(rrs, &dns.AAAA{
				Hdr:  dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: clusterTTL},
				AAAA: net.IP(b[:]),
			})
		}
	}
	return rrs
}

func cnameRR(owner, target string) dns.RR {
	return &dns.CNAME{
		Hdr:    dns.RR_Header{Name: owner, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: clusterTTL},
		Target: target,
	}
}

func ptrRR(owner, target string) dns.RR {
	return &dns.PTR{
		Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: clusterTTL},
		Ptr: target,
	}
}

// isReverse reports whether a lowercase name is in a reverse zone, whose
// names are answered when they are cluster addresses and forwarded
// otherwise.
func isReverse(name string) bool {
	return strings.HasSuffix(name, ".in-addr.arpa.") || strings.HasSuffix(name, ".ip6.arpa.")
}
