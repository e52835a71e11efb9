package servicelb

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type nodeOpt func(*corev1.Node)

func node(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func internal(ip string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
}

func external(ip string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip})
	}
}

func label(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }

var (
	notReadyNode nodeOpt = func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	cordoned     nodeOpt = func(n *corev1.Node) { n.Spec.Unschedulable = true }
	hostnameOnly nodeOpt = func(n *corev1.Node) {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}}
	}
	lbService = func(mut func(*corev1.Service)) *corev1.Service {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{}}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		if mut != nil {
			mut(svc)
		}
		return svc
	}
)

func TestDesiredIngress(t *testing.T) {
	tests := []struct {
		name  string
		svc   *corev1.Service
		nodes []*corev1.Node
		local map[string]bool
		want  []string
	}{
		{"internal addresses of ready nodes, sorted numerically", lbService(nil),
			[]*corev1.Node{node("b", internal("10.0.0.10")), node("a", internal("10.0.0.9"))}, nil, []string{"10.0.0.9", "10.0.0.10"}},
		{"not ready and cordoned nodes are left out", lbService(nil),
			[]*corev1.Node{node("a", internal("10.0.0.1")), node("b", internal("10.0.0.2"), notReadyNode), node("c", internal("10.0.0.3"), cordoned)}, nil, []string{"10.0.0.1"}},
		{"any external address switches the service to external addresses", lbService(nil),
			[]*corev1.Node{node("a", internal("10.0.0.1"), external("203.0.113.1")), node("b", internal("10.0.0.2"))}, nil, []string{"203.0.113.1"}},
		{"once a node has the enablelb label only true ones serve", lbService(nil),
			[]*corev1.Node{node("a", internal("10.0.0.1"), label(LabelEnableLB, "true")), node("b", internal("10.0.0.2"), label(LabelEnableLB, "false")), node("c", internal("10.0.0.3"))}, nil, []string{"10.0.0.1"}},
		{"the service's lbpool narrows enablelb nodes", lbService(func(s *corev1.Service) { s.Labels[LabelLBPool] = "edge" }),
			[]*corev1.Node{node("a", internal("10.0.0.1"), label(LabelEnableLB, "true"), label(LabelLBPool, "edge")), node("b", internal("10.0.0.2"), label(LabelEnableLB, "true"))}, nil, []string{"10.0.0.1"}},
		{"IPv4 service drops IPv6 node addresses", lbService(func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol} }),
			[]*corev1.Node{node("a", internal("10.0.0.1"), internal("fd00::1"))}, nil, []string{"10.0.0.1"}},
		{"dual-stack service lists families in its order", lbService(func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		}), []*corev1.Node{node("a", internal("10.0.0.1"), internal("fd00::1"))}, nil, []string{"fd00::1", "10.0.0.1"}},
		{"externalTrafficPolicy Local keeps nodes with a ready endpoint", lbService(nil),
			[]*corev1.Node{node("a", internal("10.0.0.1")), node("b", internal("10.0.0.2"))}, map[string]bool{"b": true}, []string{"10.0.0.2"}},
		{"no node to serve gives no ingress", lbService(nil), []*corev1.Node{node("a", internal("10.0.0.1"), notReadyNode), node("b", hostnameOnly)}, nil, nil},
		{"shared addresses are listed once", lbService(nil), []*corev1.Node{node("a", internal("10.0.0.1")), node("b", internal("10.0.0.1"))}, nil, []string{"10.0.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := desiredIngress(tt.svc, tt.nodes, tt.local)
			if fmt.Sprint(ingressIPs(got)) != fmt.Sprint(ingressIPsOf(tt.want)) {
				t.Errorf("ingress = %v, want %v", ingressIPs(got), tt.want)
			}
			for _, in := range got {
				if in.IPMode == nil || *in.IPMode != corev1.LoadBalancerIPModeVIP {
					t.Errorf("ingress %s without ipMode VIP", in.IP)
				}
			}
		})
	}
}

func ingressIPsOf(ips []string) []string {
	if ips == nil {
		return []string{}
	}
	return ips
}

func TestLocalNodes_ReadyPodEndpointsOnly(t *testing.T) {
	yes, no := true, false
	nodeName := func(s string) *string { return &s }
	pod := &corev1.ObjectReference{Kind: "Pod"}
	eps := []*discovery.EndpointSlice{{Endpoints: []discovery.Endpoint{
		{NodeName: nodeName("a"), TargetRef: pod, Conditions: discovery.EndpointConditions{Ready: &yes}},
		{NodeName: nodeName("b"), TargetRef: pod, Conditions: discovery.EndpointConditions{Ready: &no}},
		{NodeName: nodeName("c"), TargetRef: pod},
		{TargetRef: pod, Conditions: discovery.EndpointConditions{Ready: &yes}},
	}}}
	got := localNodes(eps)
	if len(got) != 2 || !got["a"] || !got["c"] {
		t.Errorf("local nodes = %v, want a and c (unknown readiness counts as ready)", got)
	}
}
