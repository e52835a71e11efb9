package clusterdns

import (
	"slices"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// clusterObjects is a small cluster: a dual-stack ClusterIP Service with
// two named ports, a headless StatefulSet-like Service with one endpoint
// not ready, one publishing not-ready addresses, ExternalName Services in
// and out of the zone, and a Service of the same name elsewhere.
func clusterObjects() []runtime.Object {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	return []runtime.Object{
		service("default", "web", []string{"10.43.0.20", "fd00:43::20"},
			svcPort("http", tcp, 80), svcPort("dns", udp, 53), svcPort("", tcp, 8080)),
		service("other", "web", []string{"10.43.1.1"}),
		headless("default", "db", svcPort("pg", tcp, 5432)),
		slice("default", "db-abc", "db", discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{slicePort("pg", tcp, 5432)},
			ep{"10.42.0.5", "db-0", true}, ep{"10.42.0.6", "db-1", true},
			ep{"10.42.0.7", "", true}, ep{"10.42.0.8", "db-3", false}),
		slice("default", "db-v6", "db", discoveryv1.AddressTypeIPv6,
			[]discoveryv1.EndpointPort{slicePort("pg", tcp, 5432)},
			ep{"fd00:42::5", "db-0", true}),
		headless("default", "pub", svcPort("p", tcp, 1)),
		func() runtime.Object {
			s := headless("default", "pub2")
			s.Spec.PublishNotReadyAddresses = true
			return s
		}(),
		slice("default", "pub-1", "pub", discoveryv1.AddressTypeIPv4, nil, ep{"10.42.1.9", "", false}),
		slice("default", "pub2-1", "pub2", discoveryv1.AddressTypeIPv4, nil, ep{"10.42.1.10", "", false}),
		externalName("default", "ext", "svc.Example.org"),
		externalName("default", "alias", "web.default.svc.cluster.local"),
	}
}

const soaData = "SOA ns.dns.cluster.local. hostmaster.cluster.local."

func TestClusterZone_AnswersEveryRecordKind(t *testing.T) {
	up := startUpstream(t, func(_ string, req, reply *dns.Msg) {
		if q := req.Question[0]; q.Name == "svc.example.org." && q.Qtype == dns.TypeA {
			reply.Answer = append(reply.Answer, aRecord(q.Name, 60, "192.0.2.10"))
		}
	})
	env := startServer(t, Config{Upstreams: []string{up.addr}}, clusterObjects()...)

	const web = "web.default.svc.cluster.local."
	const db = "db.default.svc.cluster.local."
	tests := []struct {
		name      string
		qname     string
		qtype     uint16
		rcode     int
		answer    []string
		extra     []string
		soaInAuth bool
	}{
		{"service A", web, dns.TypeA, dns.RcodeSuccess, []string{"A 10.43.0.20"}, nil, false},
		{"service AAAA", web, dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00:43::20"}, nil, false},
		{"names are case-insensitive", "WEB.Default.SVC.Cluster.LOCAL.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.43.0.20"}, nil, false},
		{"same service name in another namespace", "web.other.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.43.1.1"}, nil, false},
		{"SRV of a named port targets the service", "_http._tcp." + web, dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 0 100 80 " + web}, []string{"A 10.43.0.20", "AAAA fd00:43::20"}, false},
		{"SRV of a udp port", "_dns._udp." + web, dns.TypeSRV, dns.RcodeSuccess, []string{"SRV 0 100 53 " + web}, []string{"A 10.43.0.20", "AAAA fd00:43::20"}, false},
		{"SRV at the service lists every named port", web, dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 0 50 53 " + web, "SRV 0 50 80 " + web}, []string{"A 10.43.0.20", "AAAA fd00:43::20"}, false},
		{"SRV of a port under the wrong protocol does not exist", "_http._udp." + web, dns.TypeSRV, dns.RcodeNameError, nil, nil, true},
		{"protocol label alone is an empty non-terminal", "_tcp." + web, dns.TypeSRV, dns.RcodeSuccess, nil, nil, true},
		{"headless A lists ready endpoints", db, dns.TypeA, dns.RcodeSuccess,
			[]string{"A 10.42.0.5", "A 10.42.0.6", "A 10.42.0.7"}, nil, false},
		{"headless AAAA from the IPv6 slice", db, dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00:42::5"}, nil, false},
		{"endpoint hostname", "db-0." + db, dns.TypeA, dns.RcodeSuccess, []string{"A 10.42.0.5"}, nil, false},
		{"endpoint hostname in both families", "db-0." + db, dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00:42::5"}, nil, false},
		{"endpoint without hostname by dashed address", "10-42-0-7." + db, dns.TypeA, dns.RcodeSuccess, []string{"A 10.42.0.7"}, nil, false},
		{"not-ready endpoint has no name", "db-3." + db, dns.TypeA, dns.RcodeNameError, nil, nil, true},
		{"headless SRV: one per endpoint, addresses in additional", "_pg._tcp." + db, dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 0 33 5432 10-42-0-7." + db, "SRV 0 33 5432 db-0." + db, "SRV 0 33 5432 db-1." + db},
			[]string{"A 10.42.0.5", "A 10.42.0.6", "A 10.42.0.7", "AAAA fd00:42::5"}, false},
		{"headless without ready endpoints is NODATA", "pub.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, true},
		{"publishNotReadyAddresses lists not-ready endpoints", "pub2.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.42.1.10"}, nil, false},
		{"ExternalName is a CNAME, chased upstream", "ext.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess,
			[]string{"A 192.0.2.10", "CNAME svc.example.org."}, nil, false},
		{"ExternalName asked for its CNAME", "ext.default.svc.cluster.local.", dns.TypeCNAME, dns.RcodeSuccess,
			[]string{"CNAME svc.example.org."}, nil, false},
		{"ExternalName into the zone is chased in the zone", "alias.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess,
			[]string{"A 10.43.0.20", "CNAME " + web}, nil, false},
		{"PTR of a cluster IP", "20.0.43.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR " + web}, nil, false},
		{"PTR of an IPv6 cluster IP", mustReverse(t, "fd00:43::20"), dns.TypePTR, dns.RcodeSuccess, []string{"PTR " + web}, nil, false},
		{"PTR of a headless endpoint with hostname", "5.0.42.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR db-0." + db}, nil, false},
		{"PTR of a headless endpoint without hostname", "7.0.42.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR 10-42-0-7." + db}, nil, false},
		{"pod name", "10-244-1-5.default.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.244.1.5"}, nil, false},
		{"IPv6 pod name", "fd00--5.default.pod.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00::5"}, nil, false},
		{"unknown service is NXDOMAIN", "nope.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, nil, true},
		{"search expansion of a name is NXDOMAIN", web + "default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, nil, true},
		{"namespace with services is NODATA", "default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, true},
		{"namespace without services is NXDOMAIN", "empty.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, nil, true},
		{"svc label is NODATA", "svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, true},
		{"other name under the domain is NXDOMAIN", "google.com.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, nil, true},
		{"existing name, other type is NODATA", web, dns.TypeTXT, dns.RcodeSuccess, nil, nil, true},
		{"zone apex SOA", "cluster.local.", dns.TypeSOA, dns.RcodeSuccess, []string{soaData}, nil, false},
	}
	for _, netw := range []string{"udp", "tcp"} {
		for _, tt := range tests {
			t.Run(netw+"/"+tt.name, func(t *testing.T) {
				r := env.ask(t, netw, tt.qname, tt.qtype, 0)
				if r.Rcode != tt.rcode {
					t.Fatalf("rcode %s, want %s (%s)", dns.RcodeToString[r.Rcode], dns.RcodeToString[tt.rcode], describe(r))
				}
				if !r.Authoritative && !isReverse(tt.qname) {
					t.Errorf("answer not authoritative")
				}
				answer := trimSOA(section(r.Answer))
				want := trimSOA(sorted(tt.answer))
				if !slices.Equal(answer, want) {
					t.Errorf("answer %q, want %q", answer, want)
				}
				if extra := section(r.Extra); tt.extra != nil && !slices.Equal(extra, sorted(tt.extra)) {
					t.Errorf("additional %q, want %q", extra, sorted(tt.extra))
				}
				hasSOA := len(r.Ns) == 1 && r.Ns[0].Header().Rrtype == dns.TypeSOA
				if hasSOA != tt.soaInAuth {
					t.Errorf("authority %q, want SOA: %v", section(r.Ns), tt.soaInAuth)
				}
				for _, rr := range r.Answer {
					if rr.Header().Name != "svc.example.org." && rr.Header().Ttl != clusterTTL {
						t.Errorf("TTL %d, want %d on %s", rr.Header().Ttl, clusterTTL, rr)
					}
				}
				if len(r.Answer) > 0 && r.Answer[0].Header().Name != tt.qname {
					t.Errorf("first answer owner %q, want the question's spelling %q", r.Answer[0].Header().Name, tt.qname)
				}
			})
		}
	}
}

// trimSOA keeps the SOA's names only: its serial is the start time.
func trimSOA(rrs []string) []string {
	out := slices.Clone(rrs)
	for i, s := range out {
		if len(s) > len(soaData) && s[:len(soaData)] == soaData {
			out[i] = soaData
		}
	}
	return out
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return out
}

func mustReverse(t *testing.T, ip string) string {
	rev, err := dns.ReverseAddr(ip)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}
