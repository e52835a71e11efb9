package servicelb

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Node labels k3s users already put on their nodes; honouring them keeps
// their clusters behaving the same here.
const (
	// LabelEnableLB: once any node carries it, only nodes where it is
	// "true" serve load balancers.
	LabelEnableLB = "svccontroller.k3s.cattle.io/enablelb"
	// LabelLBPool on a service restricts it, in enablelb mode, to the
	// nodes with the same value.
	LabelLBPool = "svccontroller.k3s.cattle.io/lbpool"
)

// ours reports whether the service's load balancer status is this
// controller's to manage: a class names another implementation.
func ours(svc *corev1.Service) bool {
	return svc.Spec.LoadBalancerClass == nil
}

func wantsLB(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && ours(svc)
}

// desiredIngress lists the addresses a LoadBalancer service is reachable
// on: those of the nodes that can serve it. Like k3s, external addresses
// win for the whole service as soon as any serving node has one, since a
// mix would advertise addresses from two different networks. localNodes,
// when not nil, restricts the nodes to those with a ready endpoint of the
// service (externalTrafficPolicy Local keeps the client source address by
// never forwarding to another node).
func desiredIngress(svc *corev1.Service, nodes []*corev1.Node, localNodes map[string]bool) []corev1.LoadBalancerIngress {
	var ext, internal []netip.Addr
	for _, n := range servingNodes(svc, nodes) {
		if localNodes != nil && !localNodes[n.Name] {
			continue
		}
		for _, a := range n.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				continue
			}
			switch a.Type {
			case corev1.NodeExternalIP:
				ext = append(ext, ip.Unmap())
			case corev1.NodeInternalIP:
				internal = append(internal, ip.Unmap())
			}
		}
	}
	ips := internal
	if len(ext) > 0 {
		ips = ext
	}
	ips = filterFamilies(svc, ips)
	if len(ips) == 0 {
		return nil
	}
	vip := corev1.LoadBalancerIPModeVIP
	out := make([]corev1.LoadBalancerIngress, 0, len(ips))
	for _, ip := range ips {
		out = append(out, corev1.LoadBalancerIngress{IP: ip.String(), IPMode: &vip})
	}
	return out
}

// servingNodes are the Ready, schedulable nodes, narrowed to the enablelb
// (and the service's lbpool) nodes once any node is labelled.
func servingNodes(svc *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	selective := slices.ContainsFunc(nodes, func(n *corev1.Node) bool {
		_, ok := n.Labels[LabelEnableLB]
		return ok
	})
	pool := svc.Labels[LabelLBPool]
	var out []*corev1.Node
	for _, n := range nodes {
		if !nodeReady(n) || n.Spec.Unschedulable || n.DeletionTimestamp != nil {
			continue
		}
		if selective && (n.Labels[LabelEnableLB] != "true" || (pool != "" && n.Labels[LabelLBPool] != pool)) {
			continue
		}
		out = append(out, n)
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// filterFamilies keeps the addresses of the service's IP families, in the
// service's family order, each family sorted and without duplicates. A
// service that declares no family (none allocated yet) takes both.
func filterFamilies(svc *corev1.Service, ips []netip.Addr) []netip.Addr {
	families := svc.Spec.IPFamilies
	if len(families) == 0 {
		families = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	var out []netip.Addr
	for _, f := range families {
		var fam []netip.Addr
		for _, ip := range ips {
			if ip.Is4() == (f == corev1.IPv4Protocol) {
				fam = append(fam, ip)
			}
		}
		slices.SortFunc(fam, netip.Addr.Compare)
		out = append(out, slices.Compact(fam)...)
	}
	return out
}

// localNodes are the nodes with a ready endpoint of the service, from its
// EndpointSlices.
func localNodes(eps []*discovery.EndpointSlice) map[string]bool {
	out := map[string]bool{}
	for _, s := range eps {
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if ready && ep.NodeName != nil && ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
				out[*ep.NodeName] = true
			}
		}
	}
	return out
}

func ingressEqual(a, b []corev1.LoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.LoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname && ptrEqual(x.IPMode, y.IPMode) && len(x.Ports) == 0 && len(y.Ports) == 0
	})
}

func ptrEqual[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func ingressIPs(in []corev1.LoadBalancerIngress) []string {
	out := make([]string, 0, len(in))
	for _, i := range in {
		if i.IP != "" {
			out = append(out, i.IP)
		} else {
			out = append(out, i.Hostname)
		}
	}
	return out
}
