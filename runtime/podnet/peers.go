package podnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var (
	errExist    = unix.EEXIST
	errNoDevice = unix.ENODEV
)

// peerPath is how this node reaches one peer's pod CIDR.
type peerPath struct {
	name   string
	cidr   *net.IPNet
	nodeIP net.IP
	mac    net.HardwareAddr // vxlan only
}

// SetPeers makes the routes (and, for vxlan, neighbour and FDB entries)
// match exactly the given set of other nodes: entries of nodes that left
// or changed are replaced or removed. Peers without a pod CIDR (or, for
// vxlan, without a VTEP MAC) are skipped.
func (n *Network) SetPeers(ctx context.Context, peers []Peer) error {
	if n.cfg.Backend == BackendNone {
		return nil
	}
	ownCIDR, _, _, err := n.state()
	if err != nil {
		return err
	}
	var paths []peerPath
	for _, p := range peers {
		pp, ok := n.peerPath(p, ownCIDR)
		if ok {
			paths = append(paths, pp)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if n.cfg.Backend == BackendHostGW {
		return n.syncRoutes(paths, 0)
	}
	vx, err := n.nl.LinkByName(n.cfg.VXLANName)
	if err != nil {
		return fmt.Errorf("podnet: find %s: %w", n.cfg.VXLANName, err)
	}
	idx := vx.Attrs().Index
	// Order: FDB and neighbours first, so a new route never points at an
	// unresolved next hop; removals of stale routes before their entries.
	return errors.Join(n.syncFDB(paths, idx), n.syncNeighbours(paths, idx), n.syncRoutes(paths, idx))
}

func (n *Network) peerPath(p Peer, own *net.IPNet) (peerPath, bool) {
	if p.PodCIDR == nil || p.PodCIDR.IP.To4() == nil || p.Name == n.cfg.NodeName {
		return peerPath{}, false
	}
	cidr := &net.IPNet{IP: p.PodCIDR.IP.Mask(p.PodCIDR.Mask).To4(), Mask: p.PodCIDR.Mask}
	if own != nil && cidr.String() == own.String() {
		return peerPath{}, false
	}
	ip := net.ParseIP(p.Annotations[AnnotationNodeIP]).To4()
	if ip == nil {
		ip = p.InternalIP.To4()
	}
	if ip == nil {
		n.log.Warn("peer has no IPv4 node address; skipped", "peer", p.Name)
		return peerPath{}, false
	}
	pp := peerPath{name: p.Name, cidr: cidr, nodeIP: ip}
	if n.cfg.Backend == BackendVXLAN {
		mac, err := net.ParseMAC(p.Annotations[AnnotationVTEPMAC])
		if err != nil || len(mac) != 6 {
			n.log.Debug("peer has no VTEP MAC yet; skipped", "peer", p.Name)
			return peerPath{}, false
		}
		pp.mac = mac
	}
	return pp, true
}

// syncRoutes installs one route per peer pod CIDR (vxlanIndex != 0: via
// peerCIDR.0 onlink on the VXLAN device; else via the peer's node IP) and
// deletes every other route carrying podnet's protocol mark.
func (n *Network) syncRoutes(paths []peerPath, vxlanIndex int) error {
	want := map[string]bool{}
	var errs []error
	for _, p := range paths {
		r := &netlink.Route{Dst: p.cidr, Protocol: routeProtocol, Table: unix.RT_TABLE_MAIN}
		if vxlanIndex != 0 {
			r.Gw = p.cidr.IP
			r.LinkIndex = vxlanIndex
			r.Flags = int(netlink.FLAG_ONLINK)
		} else {
			r.Gw = p.nodeIP
		}
		if err := n.nl.RouteReplace(r); err != nil {
			errs = append(errs, fmt.Errorf("podnet: route %s for peer %s: %w", p.cidr, p.name, err))
			continue
		}
		want[p.cidr.String()] = true
	}
	routes, err := listRetry(func() ([]netlink.Route, error) {
		return n.nl.RouteListFiltered(netlink.FAMILY_V4,
			&netlink.Route{Protocol: routeProtocol, Table: unix.RT_TABLE_MAIN},
			netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("podnet: list routes: %w", err))...)
	}
	for _, r := range routes {
		if r.Dst != nil && want[r.Dst.String()] {
			continue
		}
		if err := n.nl.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("podnet: delete stale route %s: %w", r.Dst, err))
		}
	}
	return errors.Join(errs...)
}

// syncNeighbours makes peerCIDR.0 → peer VTEP MAC the only permanent ARP
// entries on the VXLAN device.
func (n *Network) syncNeighbours(paths []peerPath, idx int) error {
	want := map[string]net.HardwareAddr{}
	var errs []error
	for _, p := range paths {
		nb := &netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4,
			State: netlink.NUD_PERMANENT, IP: p.cidr.IP, HardwareAddr: p.mac}
		if err := n.nl.NeighSet(nb); err != nil {
			errs = append(errs, fmt.Errorf("podnet: neighbour %s for peer %s: %w", p.cidr.IP, p.name, err))
			continue
		}
		want[p.cidr.IP.String()] = p.mac
	}
	have, err := listRetry(func() ([]netlink.Neigh, error) { return n.nl.NeighList(idx, netlink.FAMILY_V4) })
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("podnet: list neighbours: %w", err))...)
	}
	for _, nb := range have {
		if mac, ok := want[nb.IP.String()]; ok && bytes.Equal(mac, nb.HardwareAddr) {
			continue
		}
		if err := n.nl.NeighDel(&nb); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("podnet: delete stale neighbour %s: %w", nb.IP, err))
		}
	}
	return errors.Join(errs...)
}

// syncFDB makes peer VTEP MAC → peer node IP the only remote forwarding
// entries of the VXLAN device.
func (n *Network) syncFDB(paths []peerPath, idx int) error {
	want := map[string]net.IP{}
	var errs []error
	for _, p := range paths {
		fdb := &netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			State: netlink.NUD_PERMANENT, IP: p.nodeIP, HardwareAddr: p.mac}
		if err := n.nl.NeighSet(fdb); err != nil {
			errs = append(errs, fmt.Errorf("podnet: FDB %s for peer %s: %w", p.mac, p.name, err))
			continue
		}
		want[p.mac.String()] = p.nodeIP
	}
	have, err := listRetry(func() ([]netlink.Neigh, error) { return n.nl.NeighList(idx, unix.AF_BRIDGE) })
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("podnet: list FDB: %w", err))...)
	}
	for _, e := range have {
		if e.IP == nil {
			continue // not a remote entry of ours
		}
		if ip, ok := want[e.HardwareAddr.String()]; ok && ip.Equal(e.IP) {
			continue
		}
		e.Flags |= netlink.NTF_SELF
		if err := n.nl.NeighDel(&e); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("podnet: delete stale FDB %s: %w", e.HardwareAddr, err))
		}
	}
	return errors.Join(errs...)
}
