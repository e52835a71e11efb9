package clusterdns

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// reportLatency adds p50 and p99 of per-query durations to the benchmark's
// figures (printed, never asserted: the machine is shared).
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	pct := func(p float64) float64 {
		return float64(d[int(p*float64(len(d)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// benchUDP runs queries for names in turn over one connected UDP socket,
// as a pod's resolver does.
func benchUDP(b *testing.B, addr string, names []string, want int) {
	conn, err := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Dial(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	m := new(dns.Msg)
	var lat []time.Duration
	i := 0
	for b.Loop() {
		m.SetQuestion(names[i%len(names)], dns.TypeA)
		i++
		start := time.Now()
		r, _, err := c.ExchangeWithConn(m, conn)
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if r.Rcode != want || len(r.Answer) == 0 {
			b.Fatalf("%s: %s", m.Question[0].Name, describe(r))
		}
	}
	reportLatency(b, lat)
}

// benchHandler measures the server side alone: building and sizing the
// answer, without sockets.
func benchHandler(b *testing.B, s *Server, names []string) {
	var lat []time.Duration
	i := 0
	for b.Loop() {
		req := new(dns.Msg)
		req.SetQuestion(names[i%len(names)], dns.TypeA)
		i++
		start := time.Now()
		resp, _ := s.answer(req)
		fit(resp, req, false)
		if _, err := resp.Pack(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if len(resp.Answer) == 0 {
			b.Fatalf("%s: %s", req.Question[0].Name, describe(resp))
		}
	}
	reportLatency(b, lat)
}

func BenchmarkQuery_ServiceA_5000Services(b *testing.B) {
	const services = 5000
	objs := make([]runtime.Object, 0, services)
	names := make([]string, 0, services)
	for i := range services {
		ns := fmt.Sprintf("ns%d", i%50)
		name := fmt.Sprintf("svc%d", i)
		objs = append(objs, service(ns, name, []string{fmt.Sprintf("10.43.%d.%d", i/250, i%250+1)},
			svcPort("http", corev1.ProtocolTCP, 80)))
		names = append(names, name+"."+ns+".svc.cluster.local.")
	}
	env := startServer(b, Config{}, objs...)
	eventually(b, "all services indexed", func() (bool, string) {
		r := env.ask(b, "udp", names[len(names)-1], dns.TypeA, 0)
		return len(r.Answer) == 1, describe(r)
	})
	b.Run("udp", func(b *testing.B) { benchUDP(b, env.srv.UDPAddr().String(), names, dns.RcodeSuccess) })
	b.Run("handler", func(b *testing.B) { benchHandler(b, env.srv, names) })
}

func BenchmarkQuery_Forwarded_Cached(b *testing.B) {
	up := startUpstream(b, answerA("192.0.2.7"))
	env := startServer(b, Config{Upstreams: []string{up.addr}})
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("host%d.example.org.", i)
		env.ask(b, "udp", names[i], dns.TypeA, 0) // warm the cache
	}
	before := len(up.seen())
	b.Run("udp", func(b *testing.B) { benchUDP(b, env.srv.UDPAddr().String(), names, dns.RcodeSuccess) })
	b.Run("handler", func(b *testing.B) { benchHandler(b, env.srv, names) })
	if n := len(up.seen()) - before; n != 0 {
		b.Errorf("upstream asked %d times during the benchmark: answers not cached", n)
	}
}
