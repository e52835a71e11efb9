package endpointslicemirroring

import (
	"fmt"
	"net"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

const (
	// MaxEndpointsPerSubset is upstream's default cap on the addresses
	// mirrored from one subset; it also caps the endpoints of one slice.
	MaxEndpointsPerSubset = 1000
)

// group is the endpoints of one address type sharing one port list: one
// or more slices.
type group struct {
	key         string
	addressType discovery.AddressType
	ports       []discovery.EndpointPort
	endpoints   []discovery.Endpoint
	seen        map[string]bool
}

// desired computes the slices an Endpoints object mirrors to, by group
// key, each group's endpoints in the order the Endpoints lists them. It
// also reports how many addresses went unmirrored (over the per-subset cap
// or not an IP).
func desired(ep *corev1.Endpoints, maxPerSubset int) (groups []*group, skipped int) {
	byKey := map[string]*group{}
	for _, subset := range ep.Subsets {
		ports := slicePorts(subset.Ports)
		added := 0
		add := func(addr corev1.EndpointAddress, ready bool) {
			if added >= maxPerSubset {
				skipped++
				return
			}
			e, typ, ok := endpointOf(addr, ready)
			if !ok {
				skipped++
				return
			}
			key := string(typ) + "/" + portsKey(ports)
			g := byKey[key]
			if g == nil {
				g = &group{key: key, addressType: typ, ports: ports, seen: map[string]bool{}}
				byKey[key] = g
				groups = append(groups, g)
			}
			added++
			// The same address in two subsets with the same ports is one
			// endpoint; the ready one wins, being listed first.
			if g.seen[e.Addresses[0]] {
				return
			}
			g.seen[e.Addresses[0]] = true
			g.endpoints = append(g.endpoints, e)
		}
		for _, a := range subset.Addresses {
			add(a, true)
		}
		for _, a := range subset.NotReadyAddresses {
			add(a, false)
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].key < groups[j].key })
	return groups, skipped
}

// chunks splits a group's endpoints into slices of at most max.
func (g *group) chunks(max int) [][]discovery.Endpoint {
	var out [][]discovery.Endpoint
	for start := 0; start < len(g.endpoints); start += max {
		out = append(out, g.endpoints[start:min(start+max, len(g.endpoints))])
	}
	return out
}

func endpointOf(addr corev1.EndpointAddress, ready bool) (discovery.Endpoint, discovery.AddressType, bool) {
	ip := net.ParseIP(addr.IP)
	if ip == nil {
		return discovery.Endpoint{}, "", false
	}
	typ := discovery.AddressTypeIPv4
	if ip.To4() == nil {
		typ = discovery.AddressTypeIPv6
	}
	e := discovery.Endpoint{
		Addresses:  []string{ip.String()}, // canonical, as a slice must hold it
		Conditions: discovery.EndpointConditions{Ready: &ready},
	}
	if addr.TargetRef != nil {
		ref := *addr.TargetRef
		e.TargetRef = &ref
	}
	if addr.NodeName != nil {
		n := *addr.NodeName
		e.NodeName = &n
	}
	if addr.Hostname != "" {
		h := addr.Hostname
		e.Hostname = &h
	}
	return e, typ, true
}

func slicePorts(ports []corev1.EndpointPort) []discovery.EndpointPort {
	out := make([]discovery.EndpointPort, 0, len(ports))
	for _, p := range ports {
		p := p
		out = append(out, discovery.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &p.Protocol, AppProtocol: p.AppProtocol})
	}
	return out
}

// portsKey identifies a port list whatever its order.
func portsKey(ports []discovery.EndpointPort) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		app := ""
		if p.AppProtocol != nil {
			app = *p.AppProtocol
		}
		parts[i] = fmt.Sprintf("%s:%d:%s:%s", deref(p.Name), deref(p.Port), deref(p.Protocol), app)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
