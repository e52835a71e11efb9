package clusterdns

import (
	"context"
	"slices"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUpdates_ServiceAndEndpointChanges_ShowInAnswers(t *testing.T) {
	// Reverse names the cluster doesn't know go upstream, which knows none.
	up := startUpstream(t, func(_ string, _, reply *dns.Msg) { reply.Rcode = dns.RcodeNameError })
	env := startServer(t, Config{Upstreams: []string{up.addr}})
	ctx := context.Background()
	cs := env.client
	const name = "late.team.svc.cluster.local."
	expect := func(what, qname string, qtype uint16, rcode int, answer ...string) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			r := env.ask(t, "udp", qname, qtype, 0)
			return r.Rcode == rcode && slices.Equal(section(r.Answer), sorted(answer)), describe(r)
		})
	}

	expect("unknown before creation", name, dns.TypeA, dns.RcodeNameError)
	expect("namespace unknown before creation", "team.svc.cluster.local.", dns.TypeA, dns.RcodeNameError)

	if _, err := cs.CoreV1().Services("team").Create(ctx, service("team", "late", []string{"10.43.5.5"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("service created → A", name, dns.TypeA, dns.RcodeSuccess, "A 10.43.5.5")
	expect("namespace now exists", "team.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess)
	expect("PTR of the new cluster IP", "5.5.43.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "PTR "+name)

	tcp := corev1.ProtocolTCP
	if _, err := cs.CoreV1().Services("team").Create(ctx, headless("team", "hl"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sl := slice("team", "hl-1", "hl", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{slicePort("web", tcp, 8080)},
		ep{"10.42.3.1", "a", true}, ep{"10.42.3.2", "b", true})
	if _, err := cs.DiscoveryV1().EndpointSlices("team").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const hl = "hl.team.svc.cluster.local."
	expect("headless endpoints appear", hl, dns.TypeA, dns.RcodeSuccess, "A 10.42.3.1", "A 10.42.3.2")

	notReady := false
	sl.Endpoints[1].Conditions.Ready = &notReady
	if _, err := cs.DiscoveryV1().EndpointSlices("team").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("not-ready endpoint leaves the service", hl, dns.TypeA, dns.RcodeSuccess, "A 10.42.3.1")
	expect("not-ready endpoint's hostname is gone", "b."+hl, dns.TypeA, dns.RcodeNameError)
	expect("not-ready endpoint's PTR is gone", "2.3.42.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError)
	expect("SRV follows", "_web._tcp."+hl, dns.TypeSRV, dns.RcodeSuccess, "SRV 0 100 8080 a."+hl)

	if err := cs.CoreV1().Services("team").Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("service deleted → NXDOMAIN", name, dns.TypeA, dns.RcodeNameError)
	if err := cs.CoreV1().Services("team").Delete(ctx, "hl", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("headless deleted → NXDOMAIN", hl, dns.TypeA, dns.RcodeNameError)
	expect("namespace without services → NXDOMAIN", "team.svc.cluster.local.", dns.TypeA, dns.RcodeNameError)
}
