package podnet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// podIfName is the pod side of the veth, inside the pod's namespace.
const podIfName = "eth0"

// NetNSPath is where the namespace of pod uid is (or will be) bind-mounted.
func (n *Network) NetNSPath(uid string) string {
	return filepath.Join(n.cfg.NetNSDir, uid)
}

// HostVethName is the host side of pod uid's veth: "veth" + 8 hex digits.
func HostVethName(uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return "veth" + hex.EncodeToString(sum[:4])
}

// SetupPod gives pod req.UID its namespace, loopback, veth, address and
// default route (BackendNone: namespace and loopback only). The address is
// persisted before anything is configured. Calling it again for the same
// UID returns the same namespace and address and repairs missing pieces.
func (n *Network) SetupPod(ctx context.Context, req PodRequest) (PodNetwork, error) {
	if err := validUID(req.UID); err != nil {
		return PodNetwork{}, err
	}
	cidr, gw, mtu, err := n.state()
	if err != nil {
		return PodNetwork{}, err
	}
	if n.cfg.Backend == BackendNone {
		cidr = nil
	}
	unlock := n.locks.lock(req.UID)
	defer unlock()
	if err := ctx.Err(); err != nil {
		return PodNetwork{}, err
	}
	path := n.NetNSPath(req.UID)
	rec, err := n.alloc.assign(record{UID: req.UID, Namespace: req.Namespace,
		Name: req.Name, NetNSPath: path}, cidr)
	if err != nil {
		return PodNetwork{}, err
	}
	if err := n.ensureNetNSDir(); err != nil {
		return PodNetwork{}, err
	}
	if err := ensureNetNS(path); err != nil {
		return PodNetwork{}, err
	}
	podNS, err := netns.GetFromPath(path)
	if err != nil {
		return PodNetwork{}, fmt.Errorf("podnet: open pod netns: %w", err)
	}
	defer podNS.Close()
	ph, err := netlink.NewHandleAt(podNS, unix.NETLINK_ROUTE)
	if err != nil {
		return PodNetwork{}, fmt.Errorf("podnet: netlink in pod netns: %w", err)
	}
	defer ph.Close()
	if err := setUp(ph, "lo"); err != nil {
		return PodNetwork{}, err
	}
	pn := PodNetwork{UID: req.UID, NetNSPath: path}
	if cidr == nil {
		return pn, nil
	}
	pn.IP = net.ParseIP(rec.IP).To4()
	if err := n.setupVeth(ph, podNS, req.UID, pn.IP, cidr, gw, mtu); err != nil {
		return PodNetwork{}, err
	}
	return pn, nil
}

func (n *Network) ensureNetNSDir() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nsDirSet {
		return nil
	}
	if err := makeSharedMount(n.cfg.NetNSDir); err != nil {
		return err
	}
	n.nsDirSet = true
	return nil
}

func setUp(h *netlink.Handle, name string) error {
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("podnet: find %s: %w", name, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("podnet: set %s up: %w", name, err)
	}
	return nil
}

// setupVeth makes sure the veth pair exists (host side in the node
// namespace on the bridge, eth0 in the pod) and is configured.
func (n *Network) setupVeth(ph *netlink.Handle, podNS netns.NsHandle, uid string,
	ip net.IP, cidr *net.IPNet, gw net.IP, mtu int) error {
	hostName := HostVethName(uid)
	host, hostErr := n.nl.LinkByName(hostName)
	pod, podErr := ph.LinkByName(podIfName)
	if hostErr != nil && !isNotFound(hostErr) {
		return fmt.Errorf("podnet: find %s: %w", hostName, hostErr)
	}
	if podErr != nil && !isNotFound(podErr) {
		return fmt.Errorf("podnet: find pod %s: %w", podIfName, podErr)
	}
	if hostErr != nil || podErr != nil || !isVethPair(host, pod) {
		// Half a pair (or a foreign link): start over.
		if hostErr == nil {
			if err := n.nl.LinkDel(host); err != nil && !isNotFound(err) {
				return fmt.Errorf("podnet: delete %s: %w", hostName, err)
			}
		}
		if p, err := ph.LinkByName(podIfName); err == nil {
			if err := ph.LinkDel(p); err != nil && !isNotFound(err) {
				return fmt.Errorf("podnet: delete pod %s: %w", podIfName, err)
			}
		}
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: hostName, MTU: mtu},
			PeerName:      podIfName,
			PeerNamespace: netlink.NsFd(podNS),
			PeerMTU:       uint32(mtu),
		}
		if err := n.nl.LinkAdd(veth); err != nil {
			return fmt.Errorf("podnet: create veth %s: %w", hostName, err)
		}
		var err error
		if host, err = n.nl.LinkByName(hostName); err != nil {
			return fmt.Errorf("podnet: find %s: %w", hostName, err)
		}
		if pod, err = ph.LinkByName(podIfName); err != nil {
			return fmt.Errorf("podnet: find pod %s: %w", podIfName, err)
		}
	}
	if err := n.configurePodSide(ph, pod, ip, cidr, gw, mtu); err != nil {
		return err
	}
	return n.configureHostSide(host, mtu)
}

func isVethPair(host, pod netlink.Link) bool {
	if _, ok := host.(*netlink.Veth); !ok {
		return false
	}
	_, ok := pod.(*netlink.Veth)
	// A veth's IFLA_LINK is its peer's index (in the peer's namespace).
	return ok && host.Attrs().ParentIndex == pod.Attrs().Index
}

func (n *Network) configurePodSide(ph *netlink.Handle, pod netlink.Link, ip net.IP,
	cidr *net.IPNet, gw net.IP, mtu int) error {
	if pod.Attrs().MTU != mtu {
		if err := ph.LinkSetMTU(pod, mtu); err != nil {
			return fmt.Errorf("podnet: pod MTU: %w", err)
		}
	}
	if err := setOnlyAddr(ph, pod, &net.IPNet{IP: ip, Mask: cidr.Mask}); err != nil {
		return err
	}
	if err := ph.LinkSetUp(pod); err != nil {
		return fmt.Errorf("podnet: pod %s up: %w", podIfName, err)
	}
	def := &netlink.Route{LinkIndex: pod.Attrs().Index, Gw: gw,
		Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}
	if err := ph.RouteReplace(def); err != nil {
		return fmt.Errorf("podnet: pod default route: %w", err)
	}
	return nil
}

func (n *Network) configureHostSide(host netlink.Link, mtu int) error {
	br, err := n.nl.LinkByName(n.cfg.BridgeName)
	if err != nil {
		return fmt.Errorf("podnet: find bridge: %w", err)
	}
	name := host.Attrs().Name
	if host.Attrs().MTU != mtu {
		if err := n.nl.LinkSetMTU(host, mtu); err != nil {
			return fmt.Errorf("podnet: MTU of %s: %w", name, err)
		}
	}
	if host.Attrs().MasterIndex != br.Attrs().Index {
		if err := n.nl.LinkSetMaster(host, br); err != nil {
			return fmt.Errorf("podnet: attach %s to bridge: %w", name, err)
		}
	}
	// Hairpin lets a pod reach itself through its Service address.
	if err := n.nl.LinkSetHairpin(host, true); err != nil {
		return fmt.Errorf("podnet: hairpin on %s: %w", name, err)
	}
	if err := n.nl.LinkSetUp(host); err != nil {
		return fmt.Errorf("podnet: set %s up: %w", name, err)
	}
	return nil
}

// TeardownPod deletes the pod's veth and namespace, then releases its
// address. Unknown UIDs and repeated calls are fine.
func (n *Network) TeardownPod(ctx context.Context, uid string) error {
	if err := validUID(uid); err != nil {
		return err
	}
	unlock := n.locks.lock(uid)
	defer unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := n.deleteLink(HostVethName(uid)); err != nil {
		return err
	}
	path := n.NetNSPath(uid)
	if rec, ok := n.alloc.get(uid); ok && rec.NetNSPath != "" {
		path = rec.NetNSPath
	}
	if err := removeNetNS(path); err != nil {
		return err
	}
	return n.alloc.release(uid)
}

// Pods lists the persisted allocations (the pods this node set up and has
// not torn down), so the agent can clean up orphans after a restart.
func (n *Network) Pods() ([]PodNetwork, error) {
	recs := n.alloc.list()
	out := make([]PodNetwork, 0, len(recs))
	for _, r := range recs {
		out = append(out, PodNetwork{UID: r.UID, NetNSPath: r.NetNSPath, IP: net.ParseIP(r.IP).To4()})
	}
	return out, nil
}
