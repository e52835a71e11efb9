package endpoints

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MaxAddresses is the most addresses an Endpoints object carries; larger
// services are truncated (consumers should read EndpointSlices instead).
const MaxAddresses = 1000

// desiredSubsets computes a service's subsets from its pods: one subset per
// distinct set of resolved ports, ready and not-ready addresses apart, in
// a canonical order so that an unchanged set compares equal.
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	type entry struct {
		ports           []corev1.EndpointPort
		ready, notReady []corev1.EndpointAddress
	}
	byPorts := map[string]*entry{}
	publishNotReady := svc.Spec.PublishNotReadyAddresses
	for _, pod := range pods {
		if !includePod(pod, publishNotReady) {
			continue
		}
		addr, ok := podAddress(svc, pod)
		if !ok {
			continue
		}
		ports, ok := resolvePorts(svc, pod)
		if !ok {
			continue
		}
		k := portsKey(ports)
		e := byPorts[k]
		if e == nil {
			e = &entry{ports: ports}
			byPorts[k] = e
		}
		if publishNotReady || isPodReady(pod) {
			e.ready = append(e.ready, addr)
		} else {
			e.notReady = append(e.notReady, addr)
		}
	}
	out := make([]corev1.EndpointSubset, 0, len(byPorts))
	for _, k := range sortedKeys(byPorts) {
		e := byPorts[k]
		sortAddresses(e.ready)
		sortAddresses(e.notReady)
		out = append(out, corev1.EndpointSubset{Addresses: e.ready, NotReadyAddresses: e.notReady, Ports: e.ports})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortAddresses(a []corev1.EndpointAddress) {
	slices.SortFunc(a, func(x, y corev1.EndpointAddress) int {
		if c := cmp.Compare(x.IP, y.IP); c != 0 {
			return c
		}
		return cmp.Compare(uid(x), uid(y))
	})
}

func uid(a corev1.EndpointAddress) string {
	if a.TargetRef == nil {
		return ""
	}
	return string(a.TargetRef.UID)
}

func portsKey(ports []corev1.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		app := ""
		if p.AppProtocol != nil {
			app = *p.AppProtocol
		}
		parts = append(parts, fmt.Sprintf("%s:%d/%s/%s", p.Name, p.Port, p.Protocol, app))
	}
	return strings.Join(parts, ",")
}

// includePod: a terminating pod is dropped from Endpoints (unlike from
// EndpointSlices, whose consumers understand the terminating condition)
// unless the service publishes not-ready addresses.
func includePod(pod *corev1.Pod, publishNotReady bool) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	return publishNotReady || pod.DeletionTimestamp == nil
}

func isPodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podAddress picks the pod address of the service's IP family: an
// Endpoints object holds one family only. A service without an IP or a
// declared family follows the pod's primary address.
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, bool) {
	ips := make([]string, 0, len(pod.Status.PodIPs)+1)
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 {
		ips = append(ips, pod.Status.PodIP)
	}
	wantV6 := isV6(ips[0])
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		wantV6 = svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	case hasClusterIP(svc):
		wantV6 = isV6(svc.Spec.ClusterIP)
	}
	for _, ip := range ips {
		if net.ParseIP(ip) != nil && isV6(ip) == wantV6 {
			addr := corev1.EndpointAddress{
				IP:        ip,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			}
			if n := pod.Spec.NodeName; n != "" {
				addr.NodeName = &n
			}
			if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
				addr.Hostname = pod.Spec.Hostname
			}
			return addr, true
		}
	}
	return corev1.EndpointAddress{}, false
}

func isV6(ip string) bool {
	p := net.ParseIP(ip)
	return p != nil && p.To4() == nil
}

func hasClusterIP(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// resolvePorts resolves the service's ports on a pod, sorted by name. A
// port the pod cannot serve (a named target it does not declare) is left
// out for that pod; a pod serving none of several ports is left out
// entirely, as upstream does. A headless service without ports still
// lists its pods, for DNS.
func resolvePorts(svc *corev1.Service, pod *corev1.Pod) ([]corev1.EndpointPort, bool) {
	if len(svc.Spec.Ports) == 0 {
		return nil, svc.Spec.ClusterIP == corev1.ClusterIPNone
	}
	var out []corev1.EndpointPort
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		num, ok := findPort(pod, sp)
		if !ok {
			continue
		}
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out = append(out, corev1.EndpointPort{Name: sp.Name, Port: num, Protocol: proto, AppProtocol: sp.AppProtocol})
	}
	slices.SortFunc(out, func(a, b corev1.EndpointPort) int {
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
	return out, len(out) > 0
}

// findPort resolves a target port; sidecars (restartable init containers)
// serve for the pod's whole life, so their ports count.
func findPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	if sp.TargetPort.Type != intstr.String {
		if sp.TargetPort.IntVal == 0 {
			return sp.Port, true
		}
		return sp.TargetPort.IntVal, true
	}
	proto := sp.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	containers := slices.Clone(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	for _, c := range containers {
		for _, p := range c.Ports {
			pp := p.Protocol
			if pp == "" {
				pp = corev1.ProtocolTCP
			}
			if p.Name == sp.TargetPort.StrVal && pp == proto {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// truncate caps the addresses at max, keeping ready addresses over
// not-ready ones and sharing the cut among subsets in proportion to their
// size, so that every port set keeps some addresses. It reports whether
// anything was cut.
func truncate(subsets []corev1.EndpointSubset, max int) ([]corev1.EndpointSubset, bool) {
	ready, notReady := 0, 0
	for _, s := range subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	if ready+notReady <= max {
		return subsets, false
	}
	// Either the not-ready addresses share what the ready ones leave, or
	// the ready ones alone are too many and the not-ready ones all go.
	cutReady := ready > max
	budget, total := max-ready, notReady
	if cutReady {
		budget, total = max, ready
	}
	left := budget
	out := make([]corev1.EndpointSubset, 0, len(subsets))
	for _, s := range subsets {
		n := len(s.NotReadyAddresses)
		if cutReady {
			n = len(s.Addresses)
		}
		keep := min(int(math.Ceil(float64(n)/float64(total)*float64(budget))), left, n)
		if cutReady {
			s.Addresses, s.NotReadyAddresses = s.Addresses[:keep], nil
		} else {
			s.NotReadyAddresses = s.NotReadyAddresses[:keep]
		}
		left -= keep
		// The server rejects a subset without any address.
		if len(s.Addresses)+len(s.NotReadyAddresses) > 0 {
			out = append(out, s)
		}
	}
	return out, true
}
