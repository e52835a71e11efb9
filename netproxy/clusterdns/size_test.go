package clusterdns

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// rawUDP sends one query and returns the reply and its size on the wire.
func rawUDP(t *testing.T, addr, name string, qtype uint16, udpSize uint16) (*dns.Msg, int) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	if udpSize > 0 {
		q.SetEdns0(udpSize, false)
	}
	wire, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatalf("unpack reply: %v", err)
	}
	return r, n
}

func TestHeadless_BigAnswer_TruncatedOverUDP_CompleteOverTCP(t *testing.T) {
	const endpoints = 300
	tcp := corev1.ProtocolTCP
	var eps []ep
	for i := range endpoints {
		eps = append(eps, ep{fmt.Sprintf("10.42.%d.%d", i/250, i%250+1), fmt.Sprintf("big-%d", i), true})
	}
	env := startServer(t, Config{},
		headless("default", "big", svcPort("http", tcp, 80)),
		slice("default", "big-1", "big", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("http", tcp, 80)}, eps...))
	const name = "big.default.svc.cluster.local."
	const srvName = "_http._tcp." + name

	tests := []struct {
		name    string
		qname   string
		qtype   uint16
		udpSize uint16 // 0: no EDNS0
		limit   int
	}{
		{"A without EDNS0 fits 512 bytes", name, dns.TypeA, 0, 512},
		{"A with EDNS0 1232", name, dns.TypeA, 1232, 1232},
		{"A with EDNS0 4096", name, dns.TypeA, 4096, 4096},
		{"SRV without EDNS0", srvName, dns.TypeSRV, 0, 512},
		{"SRV with EDNS0 1232", srvName, dns.TypeSRV, 1232, 1232},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, n := rawUDP(t, env.srv.UDPAddr().String(), tt.qname, tt.qtype, tt.udpSize)
			if n > tt.limit {
				t.Errorf("UDP reply is %d bytes, client allows %d", n, tt.limit)
			}
			if !r.Truncated {
				t.Errorf("UDP reply of %d answers (of %d) not marked truncated", len(r.Answer), endpoints)
			}
			if len(r.Answer) == 0 || len(r.Answer) >= endpoints {
				t.Errorf("UDP reply has %d answers, want some but fewer than %d", len(r.Answer), endpoints)
			}
			if (tt.udpSize > 0) != (r.IsEdns0() != nil) {
				t.Errorf("reply EDNS0 %v, request EDNS0 %v", r.IsEdns0() != nil, tt.udpSize > 0)
			}
			full := env.ask(t, "tcp", tt.qname, tt.qtype, tt.udpSize)
			if full.Truncated || len(full.Answer) != endpoints {
				t.Errorf("TCP reply: truncated=%v with %d answers, want all %d", full.Truncated, len(full.Answer), endpoints)
			}
			t.Logf("udp %d bytes, %d answers; tcp %d answers, %d additional", n, len(r.Answer), len(full.Answer), len(full.Extra))
		})
	}
}

func TestResponse_FitsEDNS0Size_NotTruncated(t *testing.T) {
	const endpoints = 40 // ~700 bytes: over 512, under 1232
	var eps []ep
	for i := range endpoints {
		eps = append(eps, ep{fmt.Sprintf("10.42.0.%d", i+1), "", true})
	}
	env := startServer(t, Config{},
		headless("default", "mid"),
		slice("default", "mid-1", "mid", discoveryv1.AddressTypeIPv4, nil, eps...))
	const name = "mid.default.svc.cluster.local."

	small, n := rawUDP(t, env.srv.UDPAddr().String(), name, dns.TypeA, 0)
	if !small.Truncated || n > 512 {
		t.Errorf("without EDNS0: truncated=%v, %d bytes; want truncated within 512", small.Truncated, n)
	}
	big, n := rawUDP(t, env.srv.UDPAddr().String(), name, dns.TypeA, 1232)
	if big.Truncated || len(big.Answer) != endpoints {
		t.Errorf("with EDNS0 1232: truncated=%v, %d answers in %d bytes; want all %d", big.Truncated, len(big.Answer), n, endpoints)
	}
}
