package endpointslice

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// group is a set of endpoints sharing an address type and a resolved port
// list: a slice can only hold endpoints that agree on both, so a service
// whose named target port resolves to different numbers on different pods
// needs one family of slices per resolution.
type group struct {
	addressType discovery.AddressType
	ports       []discovery.EndpointPort
	endpoints   []discovery.Endpoint
}

func (g *group) key() string { return groupKey(g.addressType, g.ports) }

// groupKey identifies a group regardless of the order its ports are
// listed in, so an existing slice is matched to its group even if the
// service's ports were reordered.
func groupKey(addrType discovery.AddressType, ports []discovery.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%s:%d/%s/%s", deref(p.Name), deref(p.Port), deref(p.Protocol), deref(p.AppProtocol)))
	}
	slices.Sort(parts)
	return string(addrType) + "|" + strings.Join(parts, ",")
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// desiredGroups computes the endpoints a service should have, grouped by
// what their slices will share. Pods are taken in name order so that the
// result, and thus the slices written, does not depend on cache order.
// zoneOf reports a node's zone label, if any.
func desiredGroups(svc *corev1.Service, pods []*corev1.Pod, zoneOf func(node string) (string, bool)) []group {
	families := serviceFamilies(svc)
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	byKey := map[string]*group{}
	var order []string
	for _, pod := range sorted {
		if !includePod(pod) {
			continue
		}
		ports := endpointPorts(svc, pod)
		seen := map[discovery.AddressType]bool{}
		for _, ip := range podIPs(pod) {
			fam := addressTypeOf(ip)
			if fam == "" || seen[fam] || !families[fam] {
				continue
			}
			seen[fam] = true
			key := groupKey(fam, ports)
			g, ok := byKey[key]
			if !ok {
				g = &group{addressType: fam, ports: ports}
				byKey[key] = g
				order = append(order, key)
			}
			g.endpoints = append(g.endpoints, podEndpoint(svc, pod, ip, zoneOf))
		}
	}
	out := make([]group, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}

// serviceFamilies lists the address types a service's slices may carry.
// Without a declared family or an allocated IP (a headless service created
// before dual-stack, or one the allocator has not reached) the pods decide.
func serviceFamilies(svc *corev1.Service) map[discovery.AddressType]bool {
	out := map[discovery.AddressType]bool{}
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			out[discovery.AddressTypeIPv4] = true
		case corev1.IPv6Protocol:
			out[discovery.AddressTypeIPv6] = true
		}
	}
	if len(out) > 0 {
		return out
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, ip := range ips {
		if fam := addressTypeOf(ip); fam != "" {
			out[fam] = true
		}
	}
	if len(out) == 0 {
		out[discovery.AddressTypeIPv4] = true
		out[discovery.AddressTypeIPv6] = true
	}
	return out
}

// primaryAddressType is the address type of the placeholder slice a
// service without endpoints gets.
func primaryAddressType(svc *corev1.Service) discovery.AddressType {
	if len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol {
		return discovery.AddressTypeIPv6
	}
	if len(svc.Spec.IPFamilies) == 0 && addressTypeOf(svc.Spec.ClusterIP) == discovery.AddressTypeIPv6 {
		return discovery.AddressTypeIPv6
	}
	return discovery.AddressTypeIPv4
}

func addressTypeOf(s string) discovery.AddressType {
	ip := net.ParseIP(s)
	switch {
	case ip == nil:
		return ""
	case ip.To4() != nil:
		return discovery.AddressTypeIPv4
	default:
		return discovery.AddressTypeIPv6
	}
}

// includePod: a pod belongs in the slices once it has an address and until
// it has finished; terminating pods stay, flagged, so that proxies can
// drain them.
func includePod(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return len(podIPs(pod)) > 0
}

func podIPs(pod *corev1.Pod) []string {
	if len(pod.Status.PodIPs) == 0 {
		if pod.Status.PodIP == "" {
			return nil
		}
		return []string{pod.Status.PodIP}
	}
	out := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		out = append(out, ip.IP)
	}
	return out
}

func isPodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podEndpoint describes one pod address. Ready stays false for a
// terminating pod so old clients stop sending new connections there, while
// serving still tells whether it could answer; publishNotReadyAddresses
// (used by StatefulSet peers to find each other before they are ready)
// overrides both.
func podEndpoint(svc *corev1.Service, pod *corev1.Pod, ip string, zoneOf func(string) (string, bool)) discovery.Endpoint {
	terminating := pod.DeletionTimestamp != nil
	serving := svc.Spec.PublishNotReadyAddresses || isPodReady(pod)
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discovery.Endpoint{
		Addresses:  []string{ip},
		Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if n := pod.Spec.NodeName; n != "" {
		ep.NodeName = &n
		if zone, ok := zoneOf(n); ok {
			ep.Zone = &zone
		}
	}
	if shouldSetHostname(pod, svc) {
		h := pod.Spec.Hostname
		ep.Hostname = &h
	}
	return ep
}

// shouldSetHostname: DNS publishes <hostname>.<subdomain> records only for
// the service the pod names as its subdomain.
func shouldSetHostname(pod *corev1.Pod, svc *corev1.Service) bool {
	return pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace
}

// endpointPorts resolves the service ports on one pod, in service order. A
// named target port the pod does not declare is left out for that pod, as
// upstream does, rather than guessed.
func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discovery.EndpointPort {
	out := make([]discovery.EndpointPort, 0, len(svc.Spec.Ports))
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		num, ok := findPort(pod, sp)
		if !ok {
			continue
		}
		name, proto := sp.Name, sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out = append(out, discovery.EndpointPort{Name: &name, Port: &num, Protocol: &proto, AppProtocol: sp.AppProtocol})
	}
	return out
}

// findPort resolves a service port's target on a pod. Sidecars (restartable
// init containers) count because they serve for the pod's whole life.
func findPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	switch sp.TargetPort.Type {
	case intstr.String:
		name := sp.TargetPort.StrVal
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		for _, c := range containersServing(pod) {
			for _, p := range c.Ports {
				pp := p.Protocol
				if pp == "" {
					pp = corev1.ProtocolTCP
				}
				if p.Name == name && pp == proto {
					return p.ContainerPort, true
				}
			}
		}
		return 0, false
	default:
		if sp.TargetPort.IntVal == 0 {
			return sp.Port, true
		}
		return sp.TargetPort.IntVal, true
	}
}

func containersServing(pod *corev1.Pod) []corev1.Container {
	out := slices.Clone(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	return out
}
