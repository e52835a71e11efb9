package netproxy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The representative Services of the golden files.

var httpPort = svcPort("http", "", 80, 8080)

func clusterIPTwoNodes() (*corev1.Service, *discoveryv1.EndpointSlice) {
	return service("default", "web", "10.43.0.10", httpPort),
		endpointSlice("default", "web", "web-1", slicePorts(httpPort),
			ep("10.42.1.5", "node-a", ready), ep("10.42.2.7", "node-b", readyNil))
}

func loadBalancerLocal() (*corev1.Service, *discoveryv1.EndpointSlice) {
	p := svcPort("https", "", 443, 8443)
	p.NodePort = 30443
	s := service("shop", "front", "10.43.0.20", p)
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.ExternalIPs = []string{"198.51.100.7"}
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}, {Hostname: "lb.example.com"}}
	return s, endpointSlice("shop", "front", "front-1", slicePorts(p),
		ep("10.42.1.8", "node-a", ready), ep("10.42.2.9", "node-b", ready))
}

// loadBalancerLocalTwoLocal is loadBalancerLocal with a second endpoint
// on this node: the local chain then chooses through its own map.
func loadBalancerLocalTwoLocal() (*corev1.Service, *discoveryv1.EndpointSlice) {
	s, sl := loadBalancerLocal()
	sl.Endpoints = append(sl.Endpoints, ep("10.42.1.9", "node-a", ready))
	return s, sl
}

func nodePortCluster() (*corev1.Service, *discoveryv1.EndpointSlice) {
	p := svcPort("", "", 8000, 8000)
	p.NodePort = 30080
	s := service("default", "np", "10.43.0.25", p)
	s.Spec.Type = corev1.ServiceTypeNodePort
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	return s, endpointSlice("default", "np", "np-1", slicePorts(p), ep("10.42.2.30", "node-b", ready))
}

func clientIPAffinity() (*corev1.Service, *discoveryv1.EndpointSlice) {
	p := svcPort("", "", 80, 8080)
	s := service("default", "sticky", "10.43.0.30", p)
	s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(600))}}
	return s, endpointSlice("default", "sticky", "sticky-1", slicePorts(p),
		ep("10.42.1.10", "node-a", ready), ep("10.42.2.11", "node-b", ready))
}

func noReadyEndpoints() (*corev1.Service, *discoveryv1.EndpointSlice) {
	return service("default", "empty", "10.43.0.40", httpPort),
		endpointSlice("default", "empty", "empty-1", slicePorts(httpPort),
			ep("10.42.1.14", "node-a", notReady), ep("10.42.2.15", "node-b", drained))
}

func terminatingOnly() (*corev1.Service, *discoveryv1.EndpointSlice) {
	return service("default", "draining", "10.43.0.50", httpPort),
		endpointSlice("default", "draining", "draining-1", slicePorts(httpPort),
			ep("10.42.1.12", "node-a", terminating), ep("10.42.2.13", "node-b", drained))
}

func internalLocalNoLocal() (*corev1.Service, *discoveryv1.EndpointSlice) {
	s := service("default", "nodelocal", "10.43.0.60", httpPort)
	s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
	return s, endpointSlice("default", "nodelocal", "nodelocal-1", slicePorts(httpPort), ep("10.42.2.16", "node-b", ready))
}

func udpNamedPorts() (*corev1.Service, *discoveryv1.EndpointSlice) {
	dns := svcPort("dns", corev1.ProtocolUDP, 53, 5353)
	syslog := svcPort("syslog", corev1.ProtocolUDP, 514, 5514)
	return service("kube-system", "udp", "10.43.0.70", dns, syslog),
		endpointSlice("kube-system", "udp", "udp-1", slicePorts(dns, syslog),
			ep("10.42.1.20", "node-a", ready), ep("10.42.2.21", "node-b", ready))
}

// addBatch renders the incremental batch that installs svc on an empty
// table.
func addBatch(t *testing.T, svc *corev1.Service, sl *discoveryv1.EndpointSlice) string {
	t.Helper()
	tb := newTable(v4(), "skiff")
	src := newSource([]*corev1.Service{svc}, sl)
	pl := tb.planIncremental([]string{svc.Namespace + "/" + svc.Name}, src.get, testOpts(), quietLog())
	if pl == nil {
		return ""
	}
	return pl.tx.String()
}

func TestServiceBatch_Golden(t *testing.T) {
	tests := []struct {
		name, golden string
		build        func() (*corev1.Service, *discoveryv1.EndpointSlice)
	}{
		{"ClusterIPTwoEndpointsOnTwoNodes_BalancesOverBoth", "clusterip_two_endpoints", clusterIPTwoNodes},
		{"LoadBalancerExternalLocal_ExternalTrafficKeepsSourceOnLocalEndpoint", "loadbalancer_local", loadBalancerLocal},
		{"NodePortExternalCluster_MasqueradesThenClusterChain", "nodeport_cluster", nodePortCluster},
		{"LoadBalancerExternalLocalTwoLocalEndpoints_LocalChainHasItsOwnMap", "loadbalancer_local_two_local", loadBalancerLocalTwoLocal},
		{"ClientIPAffinity_AffinitySetPerEndpoint", "affinity_clientip", clientIPAffinity},
		{"NoReadyEndpoints_RejectsAtOnce", "no_ready_endpoints", noReadyEndpoints},
		{"OnlyTerminatingEndpoints_ServingOnesUsed", "terminating_only", terminatingOnly},
		{"InternalLocalWithoutLocalEndpoint_ClusterIPDropped", "internal_local_no_local", internalLocalNoLocal},
		{"UDPNamedPorts_ChainsPerPort", "udp_named_ports", udpNamedPorts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc, sl := tc.build()
			checkGolden(t, tc.golden, addBatch(t, svc, sl))
		})
	}
}

func TestServiceBatch_HeadlessAndExternalName_ProduceNothing(t *testing.T) {
	headless := service("default", "headless", corev1.ClusterIPNone, httpPort)
	extName := service("default", "ext", "", httpPort)
	extName.Spec.Type = corev1.ServiceTypeExternalName
	extName.Spec.ExternalName = "example.com"
	// An ExternalName Service that still carries a cluster IP (left from
	// a type change) gets nothing either.
	extNameIP := service("default", "ext2", "10.43.0.90", httpPort)
	extNameIP.Spec.Type = corev1.ServiceTypeExternalName
	for _, svc := range []*corev1.Service{headless, extName, extNameIP} {
		sl := endpointSlice("default", svc.Name, svc.Name+"-1", slicePorts(httpPort), ep("10.42.1.40", "node-a", ready))
		if got := buildServicePorts(svc, []*discoveryv1.EndpointSlice{sl}, v4(), testOpts()); len(got) != 0 {
			t.Errorf("%s: %d service ports, want none", svc.Name, len(got))
		}
		if got := addBatch(t, svc, sl); got != "" {
			t.Errorf("%s: batch\n%s\nwant none", svc.Name, got)
		}
	}
}

// installed is a table holding svc as synced from sl.
func installed(t *testing.T, svc *corev1.Service, sl *discoveryv1.EndpointSlice) *table {
	t.Helper()
	tb := newTable(v4(), "skiff")
	src := newSource([]*corev1.Service{svc}, sl)
	pl := tb.planIncremental([]string{svc.Namespace + "/" + svc.Name}, src.get, testOpts(), quietLog())
	if pl == nil {
		t.Fatal("no plan for the initial state")
	}
	tb.commit(pl)
	return tb
}

func TestUpdate_EndpointRemoved_BatchRewritesServiceChainAndDeletesEndpointChain(t *testing.T) {
	svc, sl := clusterIPTwoNodes()
	tb := installed(t, svc, sl)
	sl = sl.DeepCopy()
	sl.Endpoints = sl.Endpoints[:1]
	pl := tb.planIncremental([]string{"default/web"}, newSource([]*corev1.Service{svc}, sl).get, testOpts(), quietLog())
	if pl == nil {
		t.Fatal("no batch for an endpoint removal")
	}
	checkGolden(t, "update_remove_endpoint", pl.tx.String())
}

func TestUpdate_OneOfThreeEndpointsRemoved_BatchRefillsEndpointMap(t *testing.T) {
	svc, sl := clusterIPTwoNodes()
	sl.Endpoints = append(sl.Endpoints, ep("10.42.1.6", "node-a", ready))
	tb := installed(t, svc, sl)
	sl = sl.DeepCopy()
	sl.Endpoints = sl.Endpoints[1:]
	pl := tb.planIncremental([]string{"default/web"}, newSource([]*corev1.Service{svc}, sl).get, testOpts(), quietLog())
	if pl == nil {
		t.Fatal("no batch for an endpoint removal")
	}
	checkGolden(t, "update_remove_endpoint_of_three", pl.tx.String())
}

func TestDelete_Service_RemovesElementsThenChains(t *testing.T) {
	svc, sl := clusterIPTwoNodes()
	tb := installed(t, svc, sl)
	pl := tb.planIncremental([]string{"default/web"}, newSource(nil).get, testOpts(), quietLog())
	if pl == nil {
		t.Fatal("no batch for a deletion")
	}
	checkGolden(t, "delete_service", pl.tx.String())
	tb.commit(pl)
	if len(tb.ports) != 0 || len(tb.byService) != 0 || len(tb.owners) != 0 || tb.count != (objectCount{}) {
		t.Errorf("state after deletion: ports %d, services %d, owners %d, count %+v; want all empty",
			len(tb.ports), len(tb.byService), len(tb.owners), tb.count)
	}
}

func TestFullSync_Golden_RewritesEverythingAndRemovesStrays(t *testing.T) {
	web, webSl := clusterIPTwoNodes()
	sticky, stickySl := clientIPAffinity()
	src := newSource([]*corev1.Service{web, sticky}, webSl, stickySl)
	tb := newTable(v4(), "skiff")
	existingChains := []string{"nat-prerouting", "services", "service-AAAAAAAA-default/gone/tcp/http", "service-QZ2P3BXN-default/web/tcp/http"}
	existingSets := []string{"service-ips", "affinity-BBBBBBBB-default/gone/tcp/__10.42.9.9/80",
		"endpoints-SUSTUHLJ-default/web/tcp/http", "endpoints-AAAAAAAA-default/gone/tcp/http",
		"local-endpoints-CCCCCCCC-default/gone/tcp/http", "__map0"}
	pl := tb.planFull([]string{"default/sticky", "default/web"}, src.get, testOpts(), existingChains, existingSets, quietLog())
	checkGolden(t, "full_sync", pl.tx.String())
}
