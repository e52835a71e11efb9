package netproxy

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"skiff/netproxy/nft"
)

// summary renders the parts of a service port the endpoint rules decide.
func summary(sp *servicePort) string {
	list := func(eps []endpoint) string {
		s := make([]string, len(eps))
		for i, e := range eps {
			s[i] = e.String()
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	return fmt.Sprintf("%s has=%t cluster=%s local=%s", sp.id, sp.hasEndpoints, list(sp.clusterEndpoints), list(sp.localEndpoints))
}

func TestBuildServicePorts_EndpointChoice(t *testing.T) {
	web := func() *corev1.Service { return service("ns", "web", "10.43.0.1", httpPort) }
	sl := func(eps ...discoveryv1.Endpoint) []*discoveryv1.EndpointSlice {
		return []*discoveryv1.EndpointSlice{endpointSlice("ns", "web", "web-1", slicePorts(httpPort), eps...)}
	}
	iTPLocal := func() *corev1.Service {
		s := web()
		s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
		return s
	}
	eTPLocal := func(withNodePort bool) *corev1.Service {
		p := httpPort
		s := web()
		s.Spec.Type = corev1.ServiceTypeClusterIP
		if withNodePort {
			p.NodePort = 30001
			s.Spec.Type = corev1.ServiceTypeNodePort
		}
		s.Spec.Ports = []corev1.ServicePort{p}
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		return s
	}
	otherPort := svcPort("metrics", "", 9090, 9090)
	udpHTTP := svcPort("http", corev1.ProtocolUDP, 80, 8080)
	tests := []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   string
	}{
		{"ReadyAndNilReady_BothUsable", web(), sl(ep("10.42.0.2", "node-b", readyNil), ep("10.42.0.1", "node-a", ready)),
			"ns/web/tcp/http has=true cluster=[10.42.0.1/8080 10.42.0.2/8080] local=[]"},
		{"ReadyAndTerminating_OnlyReady", web(), sl(ep("10.42.0.1", "node-a", ready), ep("10.42.0.2", "node-a", terminating)),
			"ns/web/tcp/http has=true cluster=[10.42.0.1/8080] local=[]"},
		{"NoneReady_ServingTerminatingUsed", web(), sl(ep("10.42.0.1", "node-a", terminating), ep("10.42.0.2", "node-a", drained), ep("10.42.0.3", "node-a", notReady)),
			"ns/web/tcp/http has=true cluster=[10.42.0.1/8080] local=[]"},
		{"NotReadyNotServing_NoEndpoints", web(), sl(ep("10.42.0.2", "node-a", drained), ep("10.42.0.3", "node-a", notReady)),
			"ns/web/tcp/http has=false cluster=[] local=[]"},
		{"DuplicateAcrossSlices_CountedOnce", web(), append(sl(ep("10.42.0.1", "node-a", notReady)), sl(ep("10.42.0.1", "node-a", ready))...),
			"ns/web/tcp/http has=true cluster=[10.42.0.1/8080] local=[]"},
		{"SliceOfOtherPortName_Ignored", web(), []*discoveryv1.EndpointSlice{endpointSlice("ns", "web", "w", slicePorts(otherPort), ep("10.42.0.1", "node-a", ready))},
			"ns/web/tcp/http has=false cluster=[] local=[]"},
		{"SliceOfOtherProtocol_Ignored", web(), []*discoveryv1.EndpointSlice{endpointSlice("ns", "web", "w", slicePorts(udpHTTP), ep("10.42.0.1", "node-a", ready))},
			"ns/web/tcp/http has=false cluster=[] local=[]"},
		{"IPv6Slice_IgnoredInIPv4Table", web(), func() []*discoveryv1.EndpointSlice {
			s := sl(ep("fd00::1", "node-a", ready))
			s[0].AddressType = discoveryv1.AddressTypeIPv6
			return s
		}(), "ns/web/tcp/http has=false cluster=[] local=[]"},
		{"InternalLocal_ClusterChainLocalOnly", iTPLocal(), sl(ep("10.42.0.1", "node-a", ready), ep("10.42.0.2", "node-b", ready)),
			"ns/web/tcp/http has=true cluster=[10.42.0.1/8080] local=[]"},
		{"InternalLocalNoLocal_HasEndpointsButNoneForCluster", iTPLocal(), sl(ep("10.42.0.2", "node-b", ready)),
			"ns/web/tcp/http has=true cluster=[] local=[]"},
		{"InternalLocalOnlyLocalTerminating_ItIsUsed", iTPLocal(), sl(ep("10.42.0.1", "node-a", terminating), ep("10.42.0.2", "node-b", ready)),
			"ns/web/tcp/http has=true cluster=[10.42.0.1/8080] local=[]"},
		{"ExternalLocalWithNodePort_LocalEndpointsKept", eTPLocal(true), sl(ep("10.42.0.1", "node-a", ready), ep("10.42.0.2", "node-b", ready)),
			"ns/web/tcp/http has=true cluster=[10.42.0.1/8080 10.42.0.2/8080] local=[10.42.0.1/8080]"},
		{"ExternalLocalWithoutExternalAccess_Ignored", eTPLocal(false), sl(ep("10.42.0.1", "node-a", ready), ep("10.42.0.2", "node-b", ready)),
			"ns/web/tcp/http has=true cluster=[10.42.0.1/8080 10.42.0.2/8080] local=[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ports := buildServicePorts(tc.svc, tc.slices, v4(), testOpts())
			if len(ports) != 1 {
				t.Fatalf("%d ports, want 1", len(ports))
			}
			if got := summary(ports[0]); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestBuildServicePorts_ServiceFields(t *testing.T) {
	lb := service("ns", "lb", "10.43.0.5", svcPort("", "", 80, 80))
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb.Spec.Ports[0].NodePort = 30080
	lb.Spec.ClusterIPs = []string{"fd43::5", "10.43.0.5"}
	lb.Spec.ExternalIPs = []string{"198.51.100.1", "192.0.2.1", "2001:db8::1", "10.43.0.5"}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "x.example"}}
	lb.Spec.SessionAffinity = corev1.ServiceAffinityClientIP

	clusterIPNodePort := service("ns", "np", "10.43.0.6", svcPort("", "", 80, 80))
	clusterIPNodePort.Spec.Ports[0].NodePort = 30081 // left by a type change: not a NodePort

	local := service("kube-system", "dns", "10.43.0.10", svcPort("dns", corev1.ProtocolUDP, 53, 53))
	v6only := service("ns", "v6", "fd43::7", svcPort("", "", 80, 80))

	tests := []struct {
		name string
		svc  *corev1.Service
		want []string
	}{
		{"LoadBalancer_IngressThenExternalIPsOfFamilyOnce", lb, []string{"ns/lb/tcp/ 10.43.0.5:80 np=30080 ext=[192.0.2.1 198.51.100.1] affinity=3h0m0s"}},
		{"ClusterIPWithStaleNodePort_NoNodePort", clusterIPNodePort, []string{"ns/np/tcp/ 10.43.0.6:80 np=0 ext=[] affinity=0s"}},
		{"LocalServiceIP_LeftAlone", local, nil},
		{"IPv6OnlyService_NothingInIPv4Table", v6only, nil},
	}
	opts := modelOptions{nodeName: testNode, localServiceIPs: []net.IP{net.ParseIP("10.43.0.10")}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, sp := range buildServicePorts(tc.svc, nil, v4(), opts) {
				got = append(got, fmt.Sprintf("%s %s:%d np=%d ext=%v affinity=%v", sp.id, sp.clusterIP, sp.port, sp.nodePort, sp.externalIPs, sp.affinity))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestBuildServicePorts_IPv6Family_TakesIPv6ClusterIPAndSlices(t *testing.T) {
	svc := service("ns", "dual", "10.43.0.8", httpPort)
	svc.Spec.ClusterIPs = []string{"10.43.0.8", "fd43::8"}
	s4 := endpointSlice("ns", "dual", "d4", slicePorts(httpPort), ep("10.42.0.1", "node-a", ready))
	s6 := endpointSlice("ns", "dual", "d6", slicePorts(httpPort), ep("fd42::1", "node-a", ready))
	s6.AddressType = discoveryv1.AddressTypeIPv6
	fam := newFamily(nft.IPv6, familyConfig{clusterCIDR: testPodCIDR})
	ports := buildServicePorts(svc, []*discoveryv1.EndpointSlice{s4, s6}, fam, testOpts())
	if len(ports) != 1 {
		t.Fatalf("%d ports, want 1", len(ports))
	}
	if got, want := fmt.Sprint(ports[0].clusterIP, " ", ports[0].clusterEndpoints), "fd43::8 [fd42::1/8080]"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if fam.podCIDR != nil {
		t.Errorf("IPv4 pod CIDR used in the IPv6 table: %v", fam.podCIDR)
	}
	// Without the pod CIDR of its family the cluster chain has no
	// masquerade rule, only the endpoint choice.
	r := fam.portRules(ports[0])
	if n := len(r.chains[0].rules); n != 1 {
		t.Errorf("service chain has %d rules, want 1 (numgen only)", n)
	}
}

func TestAffinityTimeout_DefaultAndConfigured(t *testing.T) {
	for _, tc := range []struct {
		secs *int32
		want time.Duration
	}{{nil, 10800 * time.Second}, {ptr(int32(30)), 30 * time.Second}} {
		svc := service("ns", "a", "10.43.0.9", httpPort)
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		if tc.secs != nil {
			svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: tc.secs}}
		}
		if got := buildServicePorts(svc, nil, v4(), testOpts())[0].affinity; got != tc.want {
			t.Errorf("timeout %v: got %v, want %v", tc.secs, got, tc.want)
		}
	}
}

func TestShortHash_Base32OfSHA256(t *testing.T) {
	// sha256("default/web/tcp/http") starts 0x95253a1d69..., whose base32
	// begins SUSTUHLJ (the chain prefix in the golden files).
	if got := shortHash("default/web/tcp/http"); got != "SUSTUHLJ" {
		t.Errorf("shortHash = %s, want SUSTUHLJ", got)
	}
}

// allNames lists the names of every chain, set and map of r.
func allNames(r *portRules) []string {
	var out []string
	for _, c := range r.chains {
		out = append(out, c.chain.Name)
	}
	for _, s := range r.sets {
		out = append(out, s.Name)
	}
	for _, m := range r.maps {
		out = append(out, m.set.Name)
	}
	return out
}

func TestObjectNames_OverlongID_CutToKernelLimitAlikeAndUnique(t *testing.T) {
	// Longer than any name Kubernetes validation lets through, to check
	// the guard: every name fits in 255 bytes and a rebuild gives the
	// same ones.
	long := strings.Repeat("n", 200)
	p := svcPort("p", "", 80, 8080)
	p.NodePort = 30080
	svc := service(long, long, "10.43.0.9", p)
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	sl := endpointSlice(long, long, "s", slicePorts(p),
		ep("10.42.1.1", testNode, ready), ep("10.42.1.2", testNode, ready), ep("10.42.2.1", "node-b", ready))
	build := func() []string {
		sp := buildServicePorts(svc, []*discoveryv1.EndpointSlice{sl}, v4(), testOpts())[0]
		return allNames(v4().portRules(sp))
	}
	names := build()
	// service, external, local, 3 endpoints; 3 affinity sets; 2 maps.
	if len(names) != 11 {
		t.Fatalf("%d names, want 11: %q", len(names), names)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if len(n) > maxNameLen {
			t.Errorf("name of %d bytes: %s", len(n), n)
		}
		if seen[n] {
			t.Errorf("name used twice: %s", n)
		}
		seen[n] = true
	}
	if again := build(); !slices.Equal(again, names) {
		t.Errorf("names differ between two builds:\n%q\n%q", names, again)
	}
	if got, want := objectName("endpoints-", "SUSTUHLJ", "default/web/tcp/http"), "endpoints-SUSTUHLJ-default/web/tcp/http"; got != want {
		t.Errorf("short name cut: %s, want %s", got, want)
	}
}
