package clusterdns

import (
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

func (s *Server) serveDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	resp, zone := s.answer(req)
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	fit(resp, req, tcp)
	// Counted before the write, so that a client holding the answer can
	// rely on the metrics already including it; the duration is the
	// server's own time, not the socket's.
	s.metrics.observe(zone, resp.Rcode, time.Since(start))
	if err := w.WriteMsg(resp); err != nil {
		s.log.Debug("cluster dns: write answer", "client", w.RemoteAddr(), "err", err)
	}
}

// answer builds the response to req and says which zone answered it.
func (s *Server) answer(req *dns.Msg) (*dns.Msg, string) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	if req.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m, zoneCluster
	}
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m, zoneCluster
	}
	q := req.Question[0]
	lname := strings.ToLower(q.Name)
	opt := req.IsEdns0()
	do := opt != nil && opt.Do()
	if s.zone.contains(lname) {
		if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
			m.Rcode = dns.RcodeRefused
			return m, zoneCluster
		}
		if target := s.zone.answer(m, q, lname); target != "" {
			s.chase(m, q, target, do)
		}
		return m, zoneCluster
	}
	if q.Qtype == dns.TypePTR && isReverse(lname) {
		if targets := s.idx.lookupPTR(lname); len(targets) > 0 {
			m.Authoritative = true
			for _, t := range targets {
				m.Answer = append(m.Answer, ptrRR(q.Name, t))
			}
			return m, zoneCluster
		}
	}
	return s.forward(req, m, q, do), zoneForward
}

// forward answers from the upstreams, keeping the client's ID and
// question (its spelling of the name, which some resolvers check).
func (s *Server) forward(req, m *dns.Msg, q dns.Question, do bool) *dns.Msg {
	up, err := s.fwd.resolve(s.baseCtx, q, do)
	if err != nil {
		s.log.Debug("cluster dns: forward failed", "name", q.Name, "err", err)
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	up.Id = req.Id
	up.Question = m.Question
	up.Response = true
	up.Opcode = req.Opcode
	up.RecursionDesired = req.RecursionDesired
	up.RecursionAvailable = true
	up.CheckingDisabled = req.CheckingDisabled
	return up
}

// chase resolves the target of an ExternalName's CNAME upstream and adds
// the records, as stub resolvers don't follow CNAMEs themselves. The
// response code becomes the target's (RFC 6604): NXDOMAIN means the last
// name of the chain does not exist.
func (s *Server) chase(m *dns.Msg, q dns.Question, target string, do bool) {
	up, err := s.fwd.resolve(s.baseCtx, dns.Question{Name: target, Qtype: q.Qtype, Qclass: dns.ClassINET}, do)
	if err != nil {
		s.log.Debug("cluster dns: resolve external name", "name", target, "err", err)
		m.Rcode = dns.RcodeServerFailure
		return
	}
	m.Rcode = up.Rcode
	m.Answer = append(m.Answer, up.Answer...)
	if len(up.Answer) == 0 {
		m.Ns = up.Ns
	}
}

// fit makes the response fit the client's buffer: 512 bytes over UDP
// without EDNS0, the advertised size with it, 64 KiB over TCP. TC is set
// only when answer or authority records had to go: a shorter additional
// section costs the client a query, not a correct answer.
func fit(resp, req *dns.Msg, tcp bool) {
	size := dns.MinMsgSize
	if tcp {
		size = dns.MaxMsgSize
	}
	resp.Extra = removeOPT(resp.Extra)
	if opt := req.IsEdns0(); opt != nil {
		if !tcp {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		resp.SetEdns0(serverUDPSize, opt.Do())
	}
	answers, authority := len(resp.Answer), len(resp.Ns)
	resp.Truncate(size)
	resp.Truncated = len(resp.Answer) < answers || len(resp.Ns) < authority
}

func removeOPT(rrs []dns.RR) []dns.RR {
	out := rrs[:0]
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}
