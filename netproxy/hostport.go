package netproxy

import (
	"cmp"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"skiff/netproxy/nft"
)

// HostPort is one container port a pod publishes on the node (a
// containerPort with hostPort), as the CNI portmap plugin would map it:
// traffic to HostIP:HostPort is DNATed to PodIP:Port.
type HostPort struct {
	// Pod is the pod's "<namespace>/<name>", for logs; UID tells apart two
	// pods of one name (an old one terminating, its replacement starting).
	Pod, UID string
	Protocol corev1.Protocol
	// HostIP is the node address the port is published on; nil or the
	// unspecified address means every address of the node, loopback
	// included.
	HostIP   net.IP
	HostPort uint16
	PodIP    net.IP
	Port     uint16
}

// HostPortSource is what the proxier needs of the node's pods: the host
// ports of those that have a pod IP. The agent implements it over the
// kubelet's pod network; the proxier reads it on every sync it is told of
// through Proxier.HostPortsChanged, and at every full resync.
type HostPortSource interface {
	HostPorts() []HostPort
}

// PodHostPorts are the host ports of pod's containers mapped to podIPs
// (one per family; a port goes to the pod IP of its host IP's family, or
// to each when the host IP is unset). Pods on the host network publish
// their ports themselves and have none.
func PodHostPorts(pod *corev1.Pod, podIPs []net.IP) []HostPort {
	if pod == nil || pod.Spec.HostNetwork {
		return nil
	}
	var out []HostPort
	add := func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 || p.HostPort > 65535 || p.ContainerPort <= 0 || p.ContainerPort > 65535 {
				continue
			}
			hostIP := net.ParseIP(p.HostIP)
			for _, ip := range podIPs {
				if hostIP != nil && !hostIP.IsUnspecified() && (hostIP.To4() != nil) != (ip.To4() != nil) {
					continue
				}
				out = append(out, HostPort{
					Pod: pod.Namespace + "/" + pod.Name, UID: string(pod.UID), Protocol: p.Protocol,
					HostIP: hostIP, HostPort: uint16(p.HostPort), PodIP: ip, Port: uint16(p.ContainerPort),
				})
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		// Restartable init containers (sidecars) run beside the others and
		// their ports are published like theirs.
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// Names of the table's host port objects.
const (
	chainHostPorts = "hostports"
	// mapHostPortIPs holds the ports published on one address, looked up
	// first; mapHostPortAny those published on every local address.
	mapHostPortIPs = "hostport-ips"
	mapHostPortAny = "hostport-any"
	hostPortPrefix = "hostport-"
)

// hostPortMapping is one host port of one family, as its rules are made
// of. Its id is its slot, "<proto>/<host IP or *>/<port>": two pods
// wanting the same slot cannot both have it, and a slot that moves to
// another pod keeps its chain, rewritten.
type hostPortMapping struct {
	id, hash string
	pod, uid string
	proto    nft.Proto
	// hostIP is nil for every local address.
	hostIP   net.IP
	hostPort uint16
	podIP    net.IP
	port     uint16
}

func (m *hostPortMapping) chainName() string { return objectName(hostPortPrefix, m.hash, m.id) }

// buildHostPorts gives the mappings of family fam, one per slot, in id
// order. When two pods want one slot (a terminating pod and its
// replacement, which the scheduler lets through) the older claim, the one
// installed now, keeps it, else the lowest pod UID: the choice must not
// flap from one sync to the next.
func buildHostPorts(hps []HostPort, fam *family, installed map[string]*installedHostPort, log *slog.Logger) []*hostPortMapping {
	bySlot := map[string]*hostPortMapping{}
	for _, hp := range hps {
		m := newHostPortMapping(hp, fam)
		if m == nil {
			continue
		}
		cur, dup := bySlot[m.id]
		if !dup {
			bySlot[m.id] = m
			continue
		}
		winner, loser := cur, m
		if keepsSlot(m, cur, installed[m.id]) {
			winner, loser = m, cur
		}
		bySlot[m.id] = winner
		if winner.uid != loser.uid {
			log.Warn("host port already used by another pod", "hostport", m.id, "pod", loser.pod, "other", winner.pod)
		}
	}
	out := make([]*hostPortMapping, 0, len(bySlot))
	for _, m := range bySlot {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *hostPortMapping) int { return cmp.Compare(a.id, b.id) })
	return out
}

// keepsSlot says whether m rather than cur gets their common slot.
func keepsSlot(m, cur *hostPortMapping, installed *installedHostPort) bool {
	if installed != nil && installed.m.uid != cur.uid && installed.m.uid == m.uid {
		return true
	}
	if installed != nil && installed.m.uid == cur.uid {
		return false
	}
	if m.uid != cur.uid {
		return m.uid < cur.uid
	}
	// One pod publishing a slot twice: the first container port wins.
	return false
}

// newHostPortMapping is hp in family fam, nil when it is of the other
// family or unusable.
func newHostPortMapping(hp HostPort, fam *family) *hostPortMapping {
	proto, ok := protoOf(hp.Protocol)
	if !ok || hp.HostPort == 0 || hp.Port == 0 || hp.PodIP == nil {
		return nil
	}
	podIP := fam.parse(hp.PodIP.String())
	if podIP == nil {
		return nil
	}
	var hostIP net.IP
	if hp.HostIP != nil && !hp.HostIP.IsUnspecified() {
		if hostIP = fam.parse(hp.HostIP.String()); hostIP == nil {
			return nil
		}
	}
	where := "*"
	if hostIP != nil {
		where = hostIP.String()
	}
	id := proto.String() + "/" + where + "/" + strconv.Itoa(int(hp.HostPort))
	return &hostPortMapping{id: id, hash: shortHash(id), pod: hp.Pod, uid: hp.UID, proto: proto,
		hostIP: hostIP, hostPort: hp.HostPort, podIP: podIP, port: hp.Port}
}

// reachesLoopback says whether the mapping answers on the loopback
// addresses: those are only reached from the node itself.
func (f *family) reachesLoopback(m *hostPortMapping) bool {
	return m.hostIP == nil || f.loopback.Contains(m.hostIP)
}

// hostPortRules are the mapping's chain and its element in a host port
// map. The chain masquerades what would not find its way back otherwise:
// the pod reaching itself (hairpin), and a connection from a loopback
// address (the kernel routes it out to the pod only with route_localnet,
// and the pod could not answer 127.0.0.1), then DNATs.
func (f *family) hostPortRules(m *hostPortMapping) *portRules {
	name := m.chainName()
	rs := rules(rule(nft.MatchAddr{Field: nft.FieldSAddr, Net: f.host(m.podIP)}, jump(chainMarkMasquerade)))
	if f.reachesLoopback(m) {
		rs = append(rs, rule(nft.MatchAddr{Field: nft.FieldSAddr, Net: f.loopback}, jump(chainMarkMasquerade)))
	}
	rs = append(rs, rule(nft.MatchProto{Proto: m.proto}, nft.DNAT{Addr: m.podIP, Port: m.port}))
	el := mapElement{f.hostPortAny, nft.Element{Proto: m.proto, Port: m.hostPort, Verdict: goTo(name)}}
	if m.hostIP != nil {
		el = mapElement{f.hostPortIPs, nft.Element{Addr: m.hostIP, Proto: m.proto, Port: m.hostPort, Verdict: goTo(name)}}
	}
	return &portRules{chains: []chainDef{{nft.Chain{Name: name}, rs}}, elements: []mapElement{el}}
}

// installedHostPort is a mapping as written to the kernel.
type installedHostPort struct {
	m     *hostPortMapping
	rules *portRules
}

// hostPortChange is one slot's mapping before and after a sync (nil: none).
type hostPortChange struct {
	id       string
	old, new *installedHostPort
}

// planHostPorts diffs the wanted host ports against the installed ones.
// A full sync lists every wanted mapping (unchanged ones too: the table is
// rewritten whole); an incremental one only those that change.
func (t *table) planHostPorts(hps []HostPort, full bool, log *slog.Logger) []hostPortChange {
	want := buildHostPorts(hps, t.fam, t.hostPorts, log)
	var out []hostPortChange
	seen := make(map[string]bool, len(want))
	for _, m := range want {
		seen[m.id] = true
		old := t.hostPorts[m.id]
		next := &installedHostPort{m: m, rules: t.fam.hostPortRules(m)}
		if !full && old != nil && reflect.DeepEqual(old.rules, next.rules) {
			continue
		}
		out = append(out, hostPortChange{id: m.id, old: old, new: next})
	}
	for id, old := range t.hostPorts {
		if !seen[id] {
			out = append(out, hostPortChange{id: id, old: old})
		}
	}
	slices.SortFunc(out, func(a, b hostPortChange) int { return cmp.Compare(a.id, b.id) })
	return out
}

// portChange is the change as the batch builders take it.
func (c hostPortChange) portChange() portChange {
	var pc portChange
	if c.old != nil {
		pc.old = c.old.rules
	}
	if c.new != nil {
		pc.new = c.new.rules
	}
	return pc
}

// commitHostPorts records the host port changes the kernel has taken.
func (t *table) commitHostPorts(changes []hostPortChange, full bool) {
	if full {
		t.hostPorts = map[string]*installedHostPort{}
	}
	for _, c := range changes {
		if c.old != nil && !full {
			t.count.add(c.old.rules, -1)
			delete(t.hostPorts, c.id)
		}
		if c.new != nil {
			t.count.add(c.new.rules, +1)
			t.hostPorts[c.id] = c.new
		}
	}
}

// hostPortStaleFlows are the UDP conntrack entries a host port change
// leaves pointing the wrong way: those DNATed to the pod a slot no longer
// leads to, and, when a slot gets its mapping, those made before it was
// there (to the node itself, never DNATed). afterStart: see staleFlows.
func hostPortStaleFlows(c hostPortChange, afterStart bool) []staleFlow {
	var out []staleFlow
	if o := c.old; o != nil && o.m.proto == nft.UDP {
		if n := c.new; n == nil || !n.m.podIP.Equal(o.m.podIP) || n.m.port != o.m.port {
			out = append(out, staleFlow{origDst: o.m.hostIP, origPort: o.m.hostPort, replySrc: o.m.podIP})
		}
	}
	if n := c.new; n != nil && n.m.proto == nft.UDP && afterStart && c.old == nil {
		out = append(out, staleFlow{origDst: n.m.hostIP, origPort: n.m.hostPort})
	}
	return out
}
