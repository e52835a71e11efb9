package netproxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"skiff/netproxy/nft"
)

// servicePort is one port of one Service in one address family, reduced to
// what its rules are made of. It is built from the API objects by
// buildServicePorts and never changed afterwards.
type servicePort struct {
	// id is "<ns>/<name>/<proto>/<portname>", the suffix of every chain
	// name of the port; hash is its 8-character digest, the prefix.
	id, hash string
	// service is the Service's "<ns>/<name>", its queue key.
	service string
	proto   nft.Proto
	port    uint16
	// nodePort is 0 when the Service has none.
	nodePort  uint16
	clusterIP net.IP
	// externalIPs are the load balancer's ingress IPs then spec.externalIPs,
	// each once, all of this family.
	externalIPs []net.IP
	// affinity is the ClientIP affinity timeout; 0 means no affinity.
	affinity time.Duration
	// internalLocal and externalLocal are the Local traffic policies.
	internalLocal, externalLocal bool
	// hasEndpoints says whether any node has a usable endpoint.
	hasEndpoints bool
	// clusterEndpoints are what traffic to the cluster IP is balanced over
	// (local ones only with internalTrafficPolicy Local); localEndpoints
	// are the node's own usable endpoints, used only with
	// externalTrafficPolicy Local. Both are sorted by address then port.
	clusterEndpoints, localEndpoints []endpoint
}

// endpoint is where a service port's traffic is DNATed to.
type endpoint struct {
	ip   net.IP
	port uint16
}

func (e endpoint) String() string { return e.ip.String() + "/" + strconv.Itoa(int(e.port)) }

func (e endpoint) equal(o endpoint) bool { return e.port == o.port && e.ip.Equal(o.ip) }

func compareEndpoints(a, b endpoint) int {
	if c := bytes.Compare(a.ip, b.ip); c != 0 {
		return c
	}
	return int(a.port) - int(b.port)
}

// equal says whether two ports make the same rules.
func (sp *servicePort) equal(o *servicePort) bool {
	return sp.id == o.id && sp.proto == o.proto && sp.port == o.port && sp.nodePort == o.nodePort &&
		sp.clusterIP.Equal(o.clusterIP) && slices.EqualFunc(sp.externalIPs, o.externalIPs, net.IP.Equal) &&
		sp.affinity == o.affinity && sp.internalLocal == o.internalLocal && sp.externalLocal == o.externalLocal &&
		sp.hasEndpoints == o.hasEndpoints &&
		slices.EqualFunc(sp.clusterEndpoints, o.clusterEndpoints, endpoint.equal) &&
		slices.EqualFunc(sp.localEndpoints, o.localEndpoints, endpoint.equal)
}

// hasExternal says whether the port is reachable other than through its
// cluster IP, which is when it gets an external chain.
func (sp *servicePort) hasExternal() bool { return sp.nodePort != 0 || len(sp.externalIPs) > 0 }

// modelOptions are the node facts the model depends on.
type modelOptions struct {
	nodeName        string
	localServiceIPs []net.IP
}

// shortHash is the first 8 characters of base32(sha256(s)): enough to keep
// chain names unique while the readable suffix stays for humans.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:8]
}

// buildServicePorts gives the service ports of svc in family fam, with
// their endpoints chosen from slices (the Service's EndpointSlices of any
// family). ExternalName and headless Services, and Services whose cluster
// IP the node serves itself, have none.
func buildServicePorts(svc *corev1.Service, epSlices []*discoveryv1.EndpointSlice, fam *family, opts modelOptions) []*servicePort {
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	clusterIP := familyClusterIP(svc, fam)
	if clusterIP == nil {
		return nil
	}
	for _, ip := range opts.localServiceIPs {
		if ip.Equal(clusterIP) {
			return nil
		}
	}
	key := svc.Namespace + "/" + svc.Name
	external := externalIPs(svc, fam, clusterIP)
	withNodePorts := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	var affinity time.Duration
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		secs := corev1.DefaultClientIPServiceAffinitySeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			secs = *c.ClientIP.TimeoutSeconds
		}
		affinity = time.Duration(secs) * time.Second
	}
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal

	var out []*servicePort
	for _, p := range svc.Spec.Ports {
		proto, ok := protoOf(p.Protocol)
		if !ok || p.Port <= 0 || p.Port > 65535 {
			continue
		}
		id := key + "/" + proto.String() + "/" + p.Name
		sp := &servicePort{
			id:            id,
			hash:          shortHash(id),
			service:       key,
			proto:         proto,
			port:          uint16(p.Port),
			clusterIP:     clusterIP,
			externalIPs:   external,
			affinity:      affinity,
			internalLocal: internalLocal,
		}
		if withNodePorts && p.NodePort > 0 && p.NodePort <= 65535 {
			sp.nodePort = uint16(p.NodePort)
		}
		// eTP Local only means something for traffic that arrives from
		// outside; without an external address it is ignored, as in
		// kube-proxy.
		sp.externalLocal = svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && sp.hasExternal()
		chooseEndpoints(sp, candidates(epSlices, fam, p.Name, p.Protocol, opts.nodeName))
		out = append(out, sp)
	}
	return out
}

func protoOf(p corev1.Protocol) (nft.Proto, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return nft.TCP, true
	case corev1.ProtocolUDP:
		return nft.UDP, true
	case corev1.ProtocolSCTP:
		return nft.SCTP, true
	}
	return 0, false
}

// familyClusterIP is the Service's cluster IP of fam, nil for headless
// Services and for Services without one of that family.
func familyClusterIP(svc *corev1.Service, fam *family) net.IP {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if s == corev1.ClusterIPNone {
			return nil
		}
		if ip := fam.parse(s); ip != nil {
			return ip
		}
	}
	return nil
}

// externalIPs are the load balancer ingress IPs and spec.externalIPs of
// fam, each once, never the cluster IP.
func externalIPs(svc *corev1.Service, fam *family, clusterIP net.IP) []net.IP {
	var raw []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		raw = append(raw, in.IP)
	}
	raw = append(raw, svc.Spec.ExternalIPs...)
	var out []net.IP
	for _, s := range raw {
		ip := fam.parse(s)
		if ip == nil || ip.Equal(clusterIP) || slices.ContainsFunc(out, ip.Equal) {
			continue
		}
		out = append(out, ip)
	}
	return out
}

// candidate is one endpoint of the slices with its conditions, merged over
// the slices that list it.
type candidate struct {
	endpoint
	ready, serving, terminating, local bool
}

// candidates lists the endpoints of slices of fam that serve the port
// named portName, each address/port once. An address listed twice is
// ready if any copy is, so a slice being rewritten never hides it.
func candidates(epSlices []*discoveryv1.EndpointSlice, fam *family, portName string, proto corev1.Protocol, nodeName string) []candidate {
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	var out []candidate
	seen := map[string]int{}
	for _, sl := range epSlices {
		if sl.AddressType != fam.addressType {
			continue
		}
		port, ok := slicePort(sl, portName, proto)
		if !ok {
			continue
		}
		for i := range sl.Endpoints {
			ep := &sl.Endpoints[i]
			if len(ep.Addresses) == 0 {
				continue
			}
			ip := fam.parse(ep.Addresses[0])
			if ip == nil {
				continue
			}
			c := candidate{
				endpoint:    endpoint{ip: ip, port: port},
				ready:       ep.Conditions.Ready == nil || *ep.Conditions.Ready,
				serving:     ep.Conditions.Serving == nil || *ep.Conditions.Serving,
				terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
				local:       nodeName != "" && ep.NodeName != nil && *ep.NodeName == nodeName,
			}
			k := string(ip) + strconv.Itoa(int(port))
			if j, dup := seen[k]; dup {
				o := &out[j]
				o.ready, o.serving, o.local = o.ready || c.ready, o.serving || c.serving, o.local || c.local
				o.terminating = o.terminating && c.terminating
				continue
			}
			seen[k] = len(out)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b candidate) int { return compareEndpoints(a.endpoint, b.endpoint) })
	return out
}

// slicePort finds the slice's port for the service port name and protocol.
func slicePort(sl *discoveryv1.EndpointSlice, name string, proto corev1.Protocol) (uint16, bool) {
	for _, p := range sl.Ports {
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		pp := corev1.ProtocolTCP
		if p.Protocol != nil {
			pp = *p.Protocol
		}
		if pn == name && pp == proto && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}

// chooseEndpoints fills the port's endpoint lists: ready endpoints, or when
// none is ready the serving terminating ones, so that a rollout's last
// pods keep answering until nothing else can.
func chooseEndpoints(sp *servicePort, cands []candidate) {
	all := usable(cands, false)
	local := usable(cands, true)
	sp.hasEndpoints = len(all) > 0
	sp.clusterEndpoints = all
	if sp.internalLocal {
		sp.clusterEndpoints = local
	}
	if sp.externalLocal {
		sp.localEndpoints = local
	}
}

func usable(cands []candidate, localOnly bool) []endpoint {
	var ready, terminating []endpoint
	for _, c := range cands {
		if localOnly && !c.local {
			continue
		}
		switch {
		case c.ready:
			ready = append(ready, c.endpoint)
		case c.serving && c.terminating:
			terminating = append(terminating, c.endpoint)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

// serviceKey is the queue key of an EndpointSlice's Service ("" if it
// names none).
func serviceKey(sl *discoveryv1.EndpointSlice) string {
	name := sl.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return ""
	}
	return sl.Namespace + "/" + name
}

// splitKey splits "<ns>/<name>".
func splitKey(key string) (ns, name string) {
	ns, name, _ = strings.Cut(key, "/")
	return ns, name
}
