package netproxy

import (
	"flag"
	"log/slog"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff/netproxy/nft"

	"skiff/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const testNode = "node-a"

var testPodCIDR = mustCIDR("10.42.0.0/16")

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func testOpts() modelOptions { return modelOptions{nodeName: testNode} }

func v4() *family {
	return newFamily(nft.IPv4, familyConfig{clusterCIDR: testPodCIDR, serviceCIDRs: []*net.IPNet{testServiceCIDR},
		localServiceIPs: testLocalServiceIPs})
}

// testLocalServiceIPs stand for the cluster DNS address: no test Service
// uses it.
var testLocalServiceIPs = []net.IP{net.ParseIP("10.43.255.53")}

// testServiceCIDR is the Service range of the golden tests and the lab.
var testServiceCIDR = &net.IPNet{IP: net.IPv4(10, 43, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}

// svcPort is a ServicePort; proto "" is TCP.
func svcPort(name string, proto corev1.Protocol, port, target int32) corev1.ServicePort {
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target)}
}

func service(ns, name, clusterIP string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, Ports: ports},
	}
	if clusterIP != "" {
		s.Spec.ClusterIPs = []string{clusterIP}
	}
	return s
}

// slicePorts are the EndpointPorts of a slice.
func slicePorts(ps ...corev1.ServicePort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, len(ps))
	for i, p := range ps {
		out[i] = discoveryv1.EndpointPort{Name: ptr(p.Name), Protocol: ptr(p.Protocol), Port: ptr(p.TargetPort.IntVal)}
	}
	return out
}

func endpointSlice(ns, svc, name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
}

// epState is an endpoint's conditions.
type epState int

const (
	ready       epState = iota // ready, serving
	readyNil                   // no conditions at all
	terminating                // not ready, serving, terminating
	drained                    // not ready, not serving, terminating
	notReady                   // not ready, not serving, not terminating
)

func ep(ip, node string, st epState) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr(node)}
	switch st {
	case ready:
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)}
	case terminating:
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
	case drained:
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(true)}
	case notReady:
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(false)}
	}
	return e
}

func ptr[T any](v T) *T { return &v }

// staticSource serves fixed Services and slices, keyed "<ns>/<name>".
type staticSource struct {
	svcs   map[string]*corev1.Service
	slices map[string][]*discoveryv1.EndpointSlice
}

func newSource(svcs []*corev1.Service, sls ...*discoveryv1.EndpointSlice) *staticSource {
	s := &staticSource{svcs: map[string]*corev1.Service{}, slices: map[string][]*discoveryv1.EndpointSlice{}}
	for _, svc := range svcs {
		s.svcs[svc.Namespace+"/"+svc.Name] = svc
	}
	for _, sl := range sls {
		s.slices[serviceKey(sl)] = append(s.slices[serviceKey(sl)], sl)
	}
	return s
}

func (s *staticSource) get(key string) (*corev1.Service, []*discoveryv1.EndpointSlice) {
	return s.svcs[key], s.slices[key]
}

// checkGolden compares got with testdata/<name>.golden (rewritten under
// -update).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, name+".golden", "the rendered batch", got, *update)
}

func lineDiff(want, got string) string { return golden.LineDiff(want, got) }
