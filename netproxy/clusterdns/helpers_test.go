package clusterdns

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// testEnv is a running server fed by a fake clientset.
type testEnv struct {
	srv    *Server
	client *fake.Clientset
	reg    *prometheus.Registry
	stop   func() // stops the server and waits for Run; runs again harmlessly at cleanup
}

// startServer runs a server on 127.0.0.1 (free port) until the test ends.
func startServer(t testing.TB, cfg Config, objs ...runtime.Object) *testEnv {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	reg := prometheus.NewRegistry()
	cfg.Informers = factory
	if cfg.Addr == nil {
		cfg.Addr = net.IPv4(127, 0, 0, 1)
	}
	cfg.Registerer = reg
	if cfg.Upstreams == nil {
		cfg.Upstreams = []string{}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
	})
	t.Cleanup(stop)
	return &testEnv{srv: s, client: client, reg: reg, stop: stop}
}

// ask sends one query over netw ("udp" or "tcp"); udpSize > 0 adds EDNS0
// with that buffer size.
func (e *testEnv) ask(t testing.TB, netw, name string, qtype uint16, udpSize uint16) *dns.Msg {
	t.Helper()
	addr := e.srv.UDPAddr().String()
	if netw == "tcp" {
		addr = e.srv.TCPAddr().String()
	}
	return exchange(t, netw, addr, name, qtype, udpSize)
}

func exchange(t testing.TB, netw, addr, name string, qtype uint16, udpSize uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if udpSize > 0 {
		m.SetEdns0(udpSize, false)
	}
	c := &dns.Client{Net: netw, Timeout: 10 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("query %s %s over %s: %v", name, dns.TypeToString[qtype], netw, err)
	}
	return r
}

// rrData is a record without owner, TTL and class: "A 10.43.0.20".
func rrData(rr dns.RR) string {
	f := strings.Fields(rr.String())
	return strings.Join(f[3:], " ")
}

// section lists a section's records as rrData, sorted, OPT left out.
func section(rrs []dns.RR) []string {
	out := []string{}
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rrData(rr))
		}
	}
	slices.Sort(out)
	return out
}

// eventually polls until check passes; informer events arrive
// asynchronously. The deadline is generous: only a change that never
// shows up fails.
func eventually(t testing.TB, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, got := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened; last saw %s", what, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describe(m *dns.Msg) string {
	return fmt.Sprintf("rcode=%s answer=%v ns=%v", dns.RcodeToString[m.Rcode], section(m.Answer), section(m.Ns))
}

// fixtures

func service(ns, name string, clusterIPs []string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: clusterIPs, Ports: ports},
	}
	if len(clusterIPs) > 0 {
		s.Spec.ClusterIP = clusterIPs[0]
	}
	return s
}

func headless(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return service(ns, name, []string{corev1.ClusterIPNone}, ports...)
}

func externalName(ns, name, target string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: target},
	}
}

func svcPort(name string, proto corev1.Protocol, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port}
}

type ep struct {
	addr, hostname string
	ready          bool
}

func slice(ns, name, svcName string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName},
		},
		AddressType: family,
		Ports:       ports,
	}
	for _, e := range eps {
		ready := e.ready
		d := discoveryv1.Endpoint{Addresses: []string{e.addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if e.hostname != "" {
			h := e.hostname
			d.Hostname = &h
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

func slicePort(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port}
}

// fakeUpstream is a resolver run by the test, on UDP and TCP at one port.
type fakeUpstream struct {
	addr string

	mu      sync.Mutex
	queries []string // "udp A example.org."
}

// startUpstream serves handle until the test ends; handle gets the
// transport ("udp"/"tcp") and fills the reply.
func startUpstream(t testing.TB, handle func(netw string, req, reply *dns.Msg)) *fakeUpstream {
	t.Helper()
	u, l, err := listen(net.IPv4(127, 0, 0, 1), 0)
	if err != nil {
		t.Fatalf("fake upstream: %v", err)
	}
	f := &fakeUpstream{addr: u.LocalAddr().String()}
	mk := func(netw string) dns.Handler {
		return dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
			q := req.Question[0]
			f.mu.Lock()
			f.queries = append(f.queries, netw+" "+dns.TypeToString[q.Qtype]+" "+strings.ToLower(q.Name))
			f.mu.Unlock()
			reply := new(dns.Msg)
			reply.SetReply(req)
			handle(netw, req, reply)
			_ = w.WriteMsg(reply)
		})
	}
	servers := []*dns.Server{
		{PacketConn: u, Handler: mk("udp")},
		{Listener: l, Handler: mk("tcp")},
	}
	for _, s := range servers {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() { _ = s.ActivateAndServe() }()
		<-started
	}
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Shutdown()
		}
	})
	return f
}

func (f *fakeUpstream) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.queries)
}

func aRecord(name string, ttl uint32, ip string) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(ip).To4()}
}

// metricValue reads a counter (or a histogram's sample count) with the
// given labels from the registry; 0 when absent.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	metrics:
		for _, m := range fam.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metrics
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
