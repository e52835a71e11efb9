package clusterdns

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// answerA answers every A question with ip, TTL 60.
func answerA(ip string) func(string, *dns.Msg, *dns.Msg) {
	return func(_ string, req, reply *dns.Msg) {
		if q := req.Question[0]; q.Qtype == dns.TypeA {
			reply.Answer = append(reply.Answer, aRecord(q.Name, 60, ip))
		}
	}
}

// closedPort returns a loopback UDP address nothing listens on: queries to
// it fail at once with "connection refused".
func closedPort(t *testing.T) string {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	c.Close()
	return addr
}

func TestForward_AnswerRelayedAndCached_UpstreamAskedOnce(t *testing.T) {
	up := startUpstream(t, answerA("192.0.2.1"))
	env := startServer(t, Config{Upstreams: []string{up.addr}})

	for i, name := range []string{"www.example.org.", "WWW.Example.ORG."} {
		r := env.ask(t, "udp", name, dns.TypeA, 0)
		if r.Rcode != dns.RcodeSuccess || !slices.Equal(section(r.Answer), []string{"A 192.0.2.1"}) {
			t.Fatalf("ask %d: %s", i, describe(r))
		}
		if r.Question[0].Name != name {
			t.Errorf("ask %d: question %q, want the client's spelling %q", i, r.Question[0].Name, name)
		}
		if r.Authoritative {
			t.Errorf("ask %d: forwarded answer marked authoritative", i)
		}
	}
	if got := up.seen(); len(got) != 1 {
		t.Errorf("upstream saw %q, want one query", got)
	}
	if hits := metricValue(t, env.reg, "skiff_dns_cache_hits_total", nil); hits != 1 {
		t.Errorf("cache hits %v, want 1", hits)
	}
	if n := metricValue(t, env.reg, "skiff_dns_requests_total", map[string]string{"zone": "forward", "rcode": "NOERROR"}); n != 2 {
		t.Errorf("forward NOERROR requests %v, want 2", n)
	}
	if n := metricValue(t, env.reg, "skiff_dns_request_duration_seconds", map[string]string{"zone": "forward"}); n != 2 {
		t.Errorf("forward duration samples %v, want 2", n)
	}
}

func TestForward_ConcurrentIdenticalMisses_ShareOneUpstreamQuery(t *testing.T) {
	release := make(chan struct{})
	up := startUpstream(t, func(netw string, req, reply *dns.Msg) {
		<-release
		answerA("192.0.2.2")(netw, req, reply)
	})
	env := startServer(t, Config{Upstreams: []string{up.addr}})
	const clients = 8
	var wg sync.WaitGroup
	results := make(chan *dns.Msg, clients)
	for range clients {
		wg.Go(func() { results <- env.ask(t, "tcp", "slow.example.org.", dns.TypeA, 0) })
	}
	k := cacheKey{name: "slow.example.org.", qtype: dns.TypeA, qclass: dns.ClassINET}
	eventually(t, "all clients waiting on one query", func() (bool, string) {
		w := env.srv.fwd.flight.waiters(k)
		return w == clients-1, fmt.Sprintf("%d waiters", w)
	})
	close(release)
	wg.Wait()
	close(results)
	for r := range results {
		if !slices.Equal(section(r.Answer), []string{"A 192.0.2.2"}) {
			t.Errorf("client got %s", describe(r))
		}
	}
	if got := up.seen(); len(got) != 1 {
		t.Errorf("upstream saw %q, want one query for %d clients", got, clients)
	}
}

func TestForward_Upstreams(t *testing.T) {
	alive := startUpstream(t, answerA("192.0.2.3"))
	refusing := startUpstream(t, func(_ string, _, reply *dns.Msg) { reply.Rcode = dns.RcodeRefused })
	tests := []struct {
		name       string
		upstreams  func(t *testing.T) []string
		rcode      int
		answer     []string
		fwdErrors  float64
		aliveAsked int
	}{
		{"all down: SERVFAIL", func(t *testing.T) []string { return []string{closedPort(t), closedPort(t)} },
			dns.RcodeServerFailure, []string{}, 2, 0},
		{"first down: the next answers", func(t *testing.T) []string { return []string{closedPort(t), alive.addr} },
			dns.RcodeSuccess, []string{"A 192.0.2.3"}, 1, 1},
		{"first refuses: the next answers", func(t *testing.T) []string { return []string{refusing.addr, alive.addr} },
			dns.RcodeSuccess, []string{"A 192.0.2.3"}, 1, 1},
		{"none configured: SERVFAIL", func(t *testing.T) []string { return []string{} },
			dns.RcodeServerFailure, []string{}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(alive.seen())
			env := startServer(t, Config{Upstreams: tt.upstreams(t)})
			r := env.ask(t, "udp", "x.example.org.", dns.TypeA, 0)
			if r.Rcode != tt.rcode || !slices.Equal(section(r.Answer), tt.answer) {
				t.Errorf("got %s, want rcode %s answer %q", describe(r), dns.RcodeToString[tt.rcode], tt.answer)
			}
			if n := metricValue(t, env.reg, "skiff_dns_forward_errors_total", nil); n != tt.fwdErrors {
				t.Errorf("forward errors %v, want %v", n, tt.fwdErrors)
			}
			if n := len(alive.seen()) - before; n != tt.aliveAsked {
				t.Errorf("live upstream asked %d times, want %d", n, tt.aliveAsked)
			}
		})
	}
}

func TestForward_TruncatedUDPAnswer_RetriedOverTCP(t *testing.T) {
	const records = 60
	up := startUpstream(t, func(netw string, req, reply *dns.Msg) {
		if netw == "udp" {
			reply.Truncated = true
			return
		}
		for i := range records {
			reply.Answer = append(reply.Answer, aRecord(req.Question[0].Name, 60, fmt.Sprintf("198.51.100.%d", i+1)))
		}
	})
	env := startServer(t, Config{Upstreams: []string{up.addr}})

	full := env.ask(t, "tcp", "many.example.org.", dns.TypeA, 0)
	if len(full.Answer) != records || full.Truncated {
		t.Errorf("over TCP: %d answers truncated=%v, want all %d", len(full.Answer), full.Truncated, records)
	}
	if got, want := up.seen(), []string{"udp A many.example.org.", "tcp A many.example.org."}; !slices.Equal(got, want) {
		t.Errorf("upstream saw %q, want %q", got, want)
	}
	// The cached complete answer still has to fit a plain UDP client.
	r, n := rawUDP(t, env.srv.UDPAddr().String(), "many.example.org.", dns.TypeA, 0)
	if !r.Truncated || n > 512 {
		t.Errorf("over UDP without EDNS0: truncated=%v in %d bytes, want truncated within 512", r.Truncated, n)
	}
}

func TestForward_NegativeAnswers_CachedPerSOA(t *testing.T) {
	soa := func(name string, minttl uint32) dns.RR {
		return &dns.SOA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 300},
			Ns: "ns." + name, Mbox: "h." + name, Minttl: minttl}
	}
	up := startUpstream(t, func(_ string, req, reply *dns.Msg) {
		switch name := req.Question[0].Name; {
		case strings.HasPrefix(name, "nx."):
			reply.Rcode = dns.RcodeNameError
			reply.Ns = append(reply.Ns, soa("example.org.", 60))
		case strings.HasPrefix(name, "nodata."):
			reply.Ns = append(reply.Ns, soa("example.org.", 60))
		case strings.HasPrefix(name, "nosoa."):
			reply.Rcode = dns.RcodeNameError
		case strings.HasPrefix(name, "fail."):
			reply.Rcode = dns.RcodeServerFailure
		}
	})
	env := startServer(t, Config{Upstreams: []string{up.addr}})
	tests := []struct {
		name    string
		rcode   int
		queries int
	}{
		{"nx.example.org.", dns.RcodeNameError, 1},
		{"nodata.example.org.", dns.RcodeSuccess, 1},
		{"nosoa.example.org.", dns.RcodeNameError, 2},
		{"fail.example.org.", dns.RcodeServerFailure, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 {
				if r := env.ask(t, "udp", tt.name, dns.TypeA, 0); r.Rcode != tt.rcode {
					t.Fatalf("got %s, want %s", describe(r), dns.RcodeToString[tt.rcode])
				}
			}
			var n int
			for _, q := range up.seen() {
				if strings.HasSuffix(q, " "+tt.name) {
					n++
				}
			}
			if n != tt.queries {
				t.Errorf("upstream asked %d times for two asks, want %d", n, tt.queries)
			}
		})
	}
}

func TestUpstreamsFromResolvConf_SkipOnlyThisServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	content := "# generated\nsearch example.org\nnameserver 10.43.0.10\nnameserver 127.0.0.53\nnameserver 192.0.2.53\nnameserver fe80::1%eth0\noptions ndots:2\nnameserver bogus\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	servers, err := readResolvConf(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		self string
		port int
		want []string
	}{
		{"cluster DNS address skipped, loopback stub kept", "10.43.0.10", 53,
			[]string{"127.0.0.53:53", "192.0.2.53:53", "[fe80::1%eth0]:53"}},
		{"listening on every address at 53: loopback is us", "0.0.0.0", 53,
			[]string{"10.43.0.10:53", "192.0.2.53:53", "[fe80::1%eth0]:53"}},
		{"listening on every address at another port: loopback is not us", "0.0.0.0", 5353,
			[]string{"10.43.0.10:53", "127.0.0.53:53", "192.0.2.53:53", "[fe80::1%eth0]:53"}},
		{"the stub itself", "127.0.0.53", 53,
			[]string{"10.43.0.10:53", "192.0.2.53:53", "[fe80::1%eth0]:53"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := upstreamsFrom(servers, netip.MustParseAddr(tt.self), tt.port)
			if !slices.Equal(got, tt.want) {
				t.Errorf("upstreams %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := readResolvConf(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing resolv.conf read without error")
	}
}

func TestForward_DOBit_ForwardedAndCachedApart(t *testing.T) {
	var mu sync.Mutex
	var upstreamDO []bool
	up := startUpstream(t, func(netw string, req, reply *dns.Msg) {
		answerA("192.0.2.4")(netw, req, reply)
		opt := req.IsEdns0()
		mu.Lock()
		upstreamDO = append(upstreamDO, opt != nil && opt.Do())
		mu.Unlock()
	})
	env := startServer(t, Config{Upstreams: []string{up.addr}})
	ask := func(do bool) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("signed.example.org.", dns.TypeA)
		m.SetEdns0(1232, do)
		r, _, err := (&dns.Client{Net: "udp"}).Exchange(m, env.srv.UDPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, do := range []bool{false, true, false, true} {
		r := ask(do)
		opt := r.IsEdns0()
		if opt == nil || opt.Do() != do {
			t.Errorf("DO=%v asked, reply OPT %v", do, opt)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(upstreamDO, []bool{false, true}) {
		t.Errorf("upstream saw DO bits %v (%q), want one query without then one with", upstreamDO, up.seen())
	}
}

func TestMetrics_RequestsCountedByZoneAndRcode(t *testing.T) {
	env := startServer(t, Config{}, service("default", "web", []string{"10.43.0.20"}))
	env.ask(t, "udp", "web.default.svc.cluster.local.", dns.TypeA, 0)
	env.ask(t, "udp", "nope.default.svc.cluster.local.", dns.TypeA, 0)
	env.ask(t, "tcp", "nope.default.svc.cluster.local.", dns.TypeA, 0)
	env.ask(t, "udp", "elsewhere.example.", dns.TypeA, 0)
	for _, c := range []struct {
		zone, rcode string
		want        float64
	}{
		{"cluster", "NOERROR", 1}, {"cluster", "NXDOMAIN", 2}, {"forward", "SERVFAIL", 1},
	} {
		if n := metricValue(t, env.reg, "skiff_dns_requests_total", map[string]string{"zone": c.zone, "rcode": c.rcode}); n != c.want {
			t.Errorf("requests{zone=%s,rcode=%s} = %v, want %v", c.zone, c.rcode, n, c.want)
		}
	}
	if n := metricValue(t, env.reg, "skiff_dns_request_duration_seconds", map[string]string{"zone": "cluster"}); n != 3 {
		t.Errorf("cluster duration samples %v, want 3", n)
	}
}

func TestPickUpstreams_BareAddressesGetPort53(t *testing.T) {
	got, err := pickUpstreams(Config{Upstreams: []string{"192.0.2.1", "192.0.2.2:5353", "fd00::1", "[fd00::2]:54"}}, netip.MustParseAddr("10.43.0.10"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"192.0.2.1:53", "192.0.2.2:5353", "[fd00::1]:53", "[fd00::2]:54"}
	if !slices.Equal(got, want) {
		t.Errorf("upstreams %q, want %q", got, want)
	}
}

// TestForward_ResolvConfRewritten_NewResolversUsed: a DHCP or VPN client
// rewriting the node's resolv.conf moves forwarding to the new resolvers
// without a restart; a file that disappears keeps the old ones.
func TestForward_ResolvConfRewritten_NewResolversUsed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An empty Upstreams list leaves the resolvers to the file.
	s := startServer(t, Config{ResolvConf: path, ResolvConfCheck: 20 * time.Millisecond}).srv
	if got := *s.fwd.upstreams.Load(); !slices.Equal(got, []string{"192.0.2.1:53"}) {
		t.Fatalf("upstreams at start %v", got)
	}
	if err := os.WriteFile(path, []byte("nameserver 192.0.2.2\nnameserver 192.0.2.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"192.0.2.2:53", "192.0.2.3:53"}
	eventually(t, "the rewritten resolv.conf is followed", func() (bool, string) {
		got := *s.fwd.upstreams.Load()
		return slices.Equal(got, want), fmt.Sprint(got)
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := *s.fwd.upstreams.Load(); !slices.Equal(got, want) {
		t.Errorf("after resolv.conf went away upstreams are %v, want the last ones %v", got, want)
	}
}
