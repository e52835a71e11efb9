package netproxy

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"skiff/netproxy/nft"
)

// staleFlow selects UDP conntrack entries that would keep sending a
// Service's packets where they must no longer go. UDP has no connection
// end, so without this a client that keeps talking (DNS from one socket)
// sticks to a removed endpoint, or to the rejection it got before there
// was one, for as long as it talks.
type staleFlow struct {
	// origDst is the original destination address; nil matches any (a
	// NodePort is reached on every local address).
	origDst net.IP
	// origPort is the original destination port.
	origPort uint16
	// replySrc is the address replies come from (the endpoint the entry
	// was DNATed to); nil matches any.
	replySrc net.IP
}

func (f staleFlow) String() string {
	dst, src := "*", "*"
	if f.origDst != nil {
		dst = f.origDst.String()
	}
	if f.replySrc != nil {
		src = f.replySrc.String()
	}
	return fmt.Sprintf("udp dst %s:%d reply-src %s", dst, f.origPort, src)
}

// conntrackCleaner deletes conntrack entries.
type conntrackCleaner interface {
	// DeleteUDP removes the UDP entries of family fam that match any of
	// flows, and says how many it removed.
	DeleteUDP(fam nft.Family, flows []staleFlow) (uint, error)
	// Close releases the cleaner's resources.
	Close() error
}

// staleFlows are the conntrack entries a change of one UDP port makes
// stale: those DNATed to an endpoint the port no longer uses, and, when the
// port gets its first endpoint, those to its addresses (made while there
// was no DNAT rule, they would never be DNATed). afterStart says whether
// the table's history is known (a restart knows nothing of the old state).
func staleFlows(c planned, afterStart bool) []staleFlow {
	var out []staleFlow
	if old := c.old; old != nil && old.sp.proto == nft.UDP {
		var next []endpoint
		if c.new != nil {
			next = usedEndpoints(c.new.sp)
		}
		for _, ep := range usedEndpoints(old.sp) {
			if containsEndpoint(next, ep) {
				continue
			}
			out = append(out, flowsTo(old.sp, ep.ip)...)
		}
	}
	if n := c.new; n != nil && n.sp.proto == nft.UDP && afterStart && len(usedEndpoints(n.sp)) > 0 &&
		(c.old == nil || len(usedEndpoints(c.old.sp)) == 0) {
		out = append(out, flowsTo(n.sp, nil)...)
	}
	return out
}

// flowsTo selects the entries to any of sp's addresses, whose replies
// come from replySrc (nil: any).
func flowsTo(sp *servicePort, replySrc net.IP) []staleFlow {
	out := make([]staleFlow, 0, 2+len(sp.externalIPs))
	out = append(out, staleFlow{origDst: sp.clusterIP, origPort: sp.port, replySrc: replySrc})
	for _, ip := range sp.externalIPs {
		out = append(out, staleFlow{origDst: ip, origPort: sp.port, replySrc: replySrc})
	}
	if sp.nodePort != 0 {
		out = append(out, staleFlow{origPort: sp.nodePort, replySrc: replySrc})
	}
	return out
}

// usedEndpoints are the endpoints the port has a chain for.
func usedEndpoints(sp *servicePort) []endpoint {
	if len(sp.localEndpoints) == 0 {
		return sp.clusterEndpoints
	}
	return mergeEndpoints(sp.clusterEndpoints, sp.localEndpoints)
}

func containsEndpoint(eps []endpoint, ep endpoint) bool {
	for _, e := range eps {
		if e.equal(ep) {
			return true
		}
	}
	return false
}

// netlinkConntrack is the conntrackCleaner of a network namespace.
type netlinkConntrack struct{ h *netlink.Handle }

func openConntrack(nsPath string) (conntrackCleaner, error) {
	if nsPath == "" {
		h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
		if err != nil {
			return nil, fmt.Errorf("conntrack netlink handle: %w", err)
		}
		return &netlinkConntrack{h: h}, nil
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", nsPath, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("conntrack netlink handle in %s: %w", nsPath, err)
	}
	return &netlinkConntrack{h: h}, nil
}

func (c *netlinkConntrack) DeleteUDP(fam nft.Family, flows []staleFlow) (uint, error) {
	filters := make([]netlink.CustomConntrackFilter, 0, len(flows))
	for _, fl := range flows {
		f, err := conntrackFilter(fl)
		if err != nil {
			return 0, err
		}
		filters = append(filters, f)
	}
	family := netlink.InetFamily(unix.AF_INET)
	if fam == nft.IPv6 {
		family = unix.AF_INET6
	}
	n, err := c.h.ConntrackDeleteFilters(netlink.ConntrackTable, family, filters...)
	if err != nil {
		return n, fmt.Errorf("delete %d conntrack filters: %w", len(filters), err)
	}
	return n, nil
}

func conntrackFilter(fl staleFlow) (*netlink.ConntrackFilter, error) {
	f := &netlink.ConntrackFilter{}
	if err := f.AddProtocol(unix.IPPROTO_UDP); err != nil {
		return nil, fmt.Errorf("conntrack filter %s: %w", fl, err)
	}
	if err := f.AddPort(netlink.ConntrackOrigDstPort, fl.origPort); err != nil {
		return nil, fmt.Errorf("conntrack filter %s: %w", fl, err)
	}
	if fl.origDst != nil {
		if err := f.AddIP(netlink.ConntrackOrigDstIP, fl.origDst); err != nil {
			return nil, fmt.Errorf("conntrack filter %s: %w", fl, err)
		}
	}
	if fl.replySrc != nil {
		if err := f.AddIP(netlink.ConntrackReplySrcIP, fl.replySrc); err != nil {
			return nil, fmt.Errorf("conntrack filter %s: %w", fl, err)
		}
	}
	return f, nil
}

func (c *netlinkConntrack) Close() error {
	c.h.Close()
	return nil
}
