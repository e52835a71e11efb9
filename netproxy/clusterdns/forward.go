package clusterdns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// upstreamUDPSize is the EDNS0 buffer advertised to upstreams: the size
// that avoids IP fragmentation (DNS flag day 2020); bigger answers come
// over TCP.
const upstreamUDPSize = 1232

// errNoUpstream is returned when there is nowhere to forward to.
var errNoUpstream = errors.New("no upstream resolver")

// forwarder resolves names outside the cluster through the node's
// resolvers, with a cache in front.
type forwarder struct {
	// upstreams (host:port) are swapped whole when resolv.conf changes.
	upstreams atomic.Pointer[[]string]
	udp, tcp  *dns.Client
	timeout   time.Duration
	cache     *answerCache
	maxTTL    time.Duration
	flight    flight
	metrics   *metrics
	log       *slog.Logger
	now       func() time.Time
}

// resolve returns the answer to q: a private copy the caller may modify,
// its TTLs aged by the time it spent in the cache.
func (f *forwarder) resolve(ctx context.Context, q dns.Question, do bool) (*dns.Msg, error) {
	k := cacheKey{name: strings.ToLower(q.Name), qtype: q.Qtype, qclass: q.Qclass, do: do}
	if m, age, ok := f.cache.get(k, f.now()); ok {
		f.metrics.cacheHits.Inc()
		return agedCopy(m, age), nil
	}
	f.metrics.cacheMisses.Inc()
	m, _, err := f.flight.do(k, func() (*dns.Msg, error) {
		m, err := f.exchange(ctx, q, do)
		if err != nil {
			return nil, err
		}
		f.cache.put(k, m, cacheTTL(m, f.maxTTL), f.now())
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errNoUpstream
	}
	return m.Copy(), nil
}

// agedCopy copies a cached answer, taking the time it has been kept off
// every TTL so clients don't keep it longer than its owner allowed.
func agedCopy(m *dns.Msg, age time.Duration) *dns.Msg {
	c := m.Copy()
	sec := uint32(age / time.Second)
	for _, s := range [][]dns.RR{c.Answer, c.Ns, c.Extra} {
		for _, rr := range s {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT {
				continue
			}
			if h.Ttl > sec {
				h.Ttl -= sec
			} else {
				h.Ttl = 0
			}
		}
	}
	return c
}

// exchange asks the upstreams in turn until one answers: over UDP, then
// over TCP when the answer did not fit. A refusal counts as a failure, as
// another resolver may well answer.
func (f *forwarder) exchange(ctx context.Context, q dns.Question, do bool) (*dns.Msg, error) {
	upstreams := *f.upstreams.Load()
	if len(upstreams) == 0 {
		return nil, errNoUpstream
	}
	req := new(dns.Msg)
	req.Id = dns.Id()
	req.RecursionDesired = true
	req.Question = []dns.Question{q}
	req.SetEdns0(upstreamUDPSize, do)
	var errs []error
	for _, up := range upstreams {
		m, err := f.exchangeOne(ctx, req, up)
		if err == nil && m.Rcode == dns.RcodeRefused {
			err = errors.New("refused")
		}
		if err == nil {
			return m, nil
		}
		f.metrics.forwardErrors.Inc()
		f.log.Debug("upstream failed", "upstream", up, "name", q.Name, "err", err)
		errs = append(errs, fmt.Errorf("%s: %w", up, err))
	}
	return nil, errors.Join(errs...)
}

func (f *forwarder) exchangeOne(ctx context.Context, req *dns.Msg, up string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	m, _, err := f.udp.ExchangeContext(ctx, req, up)
	if err != nil {
		return nil, fmt.Errorf("udp: %w", err)
	}
	if !m.Truncated {
		return m, nil
	}
	m, _, err = f.tcp.ExchangeContext(ctx, req, up)
	if err != nil {
		return nil, fmt.Errorf("tcp after truncated udp answer: %w", err)
	}
	return m, nil
}

// readResolvConf returns the nameservers of a resolv.conf as host:53.
func readResolvConf(path string) ([]netip.Addr, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read resolver config: %w", err)
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		// A zone index (fe80::1%eth0) is kept: link-local resolvers need it.
		if a, err := netip.ParseAddr(fields[1]); err == nil {
			out = append(out, a.Unmap())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read resolver config %s: %w", path, err)
	}
	return out, nil
}

// upstreamsFrom picks, among resolv.conf's nameservers, those that are not
// this server: never the cluster DNS address, and not a local address
// when the server listens on every address at the same port. A loopback
// stub such as systemd-resolved's 127.0.0.53 is kept, since it is another
// process.
func upstreamsFrom(servers []netip.Addr, self netip.Addr, port int) []string {
	var out []string
	for _, a := range servers {
		if a.WithZone("") == self {
			continue
		}
		if port == 53 && self.IsUnspecified() && a.IsLoopback() {
			continue
		}
		out = append(out, net.JoinHostPort(a.String(), "53"))
	}
	return out
}
