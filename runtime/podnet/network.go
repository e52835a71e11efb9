package podnet

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNotStarted means an operation needs the pod CIDR that Start provides.
var ErrNotStarted = errors.New("podnet: network not started")

// Defaults of Config.
const (
	DefaultBridgeName = "skiff0"
	DefaultVXLANName  = "skiff.vxlan"
	DefaultVNI        = 1
	DefaultVXLANPort  = 8472
	DefaultNetNSDir   = "/run/skiff/netns"

	vxlanOverhead = 50
	// routeProtocol marks the routes podnet installs, so that stale ones
	// are found (and removed) after a restart without any other state.
	routeProtocol netlink.RouteProtocol = 115
)

// Network is the pod network of one node.
type Network struct {
	cfg   Config
	log   *slog.Logger
	ns    netns.NsHandle  // the node's network namespace
	nl    *netlink.Handle // netlink socket in ns
	alloc *allocator
	locks uidLocks

	mu       sync.Mutex
	podCIDR  *net.IPNet // nil until Start
	gateway  net.IP
	mtu      int
	vtepMAC  net.HardwareAddr
	started  bool
	nsDirSet bool
}

// New applies the defaults, opens the node's namespace and loads the
// persisted allocations. It changes nothing in the kernel.
func New(cfg Config) (*Network, error) {
	if cfg.Backend == "" {
		cfg.Backend = BackendVXLAN
	}
	switch cfg.Backend {
	case BackendVXLAN, BackendHostGW, BackendNone:
	default:
		return nil, fmt.Errorf("podnet: unknown backend %q", cfg.Backend)
	}
	if cfg.BridgeName == "" {
		cfg.BridgeName = DefaultBridgeName
	}
	if cfg.VXLANName == "" {
		cfg.VXLANName = DefaultVXLANName
	}
	if cfg.VNI == 0 {
		cfg.VNI = DefaultVNI
	}
	if cfg.VXLANPort == 0 {
		cfg.VXLANPort = DefaultVXLANPort
	}
	if cfg.NetNSDir == "" {
		cfg.NetNSDir = DefaultNetNSDir
	}
	if cfg.StateDir == "" {
		return nil, errors.New("podnet: Config.StateDir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NodeIP != nil {
		cfg.NodeIP = cfg.NodeIP.To4()
	}
	alloc, err := loadAllocator(filepath.Join(cfg.StateDir, "pods"))
	if err != nil {
		return nil, err
	}
	nsPath := cfg.NetNS
	if nsPath == "" {
		nsPath = "/proc/self/ns/net"
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("podnet: open node netns %s: %w", nsPath, err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		_ = ns.Close()
		return nil, fmt.Errorf("podnet: netlink: %w", err)
	}
	return &Network{cfg: cfg, log: cfg.Logger, ns: ns, nl: h, alloc: alloc,
		locks: uidLocks{m: map[string]*uidLock{}}}, nil
}

// Close releases the namespace handle and netlink socket. Kernel state
// (bridge, pods, routes) stays, as it must across agent restarts.
func (n *Network) Close() error {
	n.nl.Close()
	return n.ns.Close()
}

// Start configures the node for podCIDR: ip_forward, the bridge with the
// gateway address, the VXLAN device and the masquerade table. It is
// idempotent: existing links are reused and wrong settings fixed.
func (n *Network) Start(ctx context.Context, podCIDR *net.IPNet) error {
	if n.cfg.Backend == BackendNone {
		n.mu.Lock()
		n.podCIDR, n.started = podCIDR, true
		n.mu.Unlock()
		return nil
	}
	if podCIDR == nil || podCIDR.IP.To4() == nil {
		return fmt.Errorf("podnet: pod CIDR %v is not IPv4", podCIDR)
	}
	if n.cfg.ClusterCIDR == nil || n.cfg.ClusterCIDR.IP.To4() == nil {
		return errors.New("podnet: Config.ClusterCIDR (IPv4) is required")
	}
	cidr := &net.IPNet{IP: podCIDR.IP.Mask(podCIDR.Mask).To4(), Mask: podCIDR.Mask}
	if ones, _ := cidr.Mask.Size(); ones > 30 {
		return fmt.Errorf("podnet: pod CIDR %s is too small", cidr)
	}
	gw := nthIP(cidr, 1)
	underlay, err := n.underlay()
	if err != nil {
		return err
	}
	mtu := n.cfg.MTU
	if mtu == 0 {
		mtu = underlay.Attrs().MTU
		if n.cfg.Backend == BackendVXLAN {
			mtu -= vxlanOverhead
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := n.enableForwarding(); err != nil {
		return err
	}
	if err := n.ensureBridge(cidr, gw, mtu); err != nil {
		return err
	}
	var mac net.HardwareAddr
	if n.cfg.Backend == BackendVXLAN {
		mac = stableMAC(n.cfg.NodeName, "vxlan")
		if err := n.ensureVXLAN(cidr, underlay, mac, mtu); err != nil {
			return err
		}
	} else if err := n.deleteLink(n.cfg.VXLANName); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := syncMasq(n.ns, n.cfg.ClusterCIDR); err != nil {
		return err
	}
	n.mu.Lock()
	n.podCIDR, n.gateway, n.mtu, n.vtepMAC, n.started = cidr, gw, mtu, mac, true
	n.mu.Unlock()
	n.log.Info("pod network started", "podCIDR", cidr, "backend", n.cfg.Backend, "mtu", mtu)
	return nil
}

// Annotations are what this node publishes on its Node object.
func (n *Network) Annotations() map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := map[string]string{AnnotationBackend: string(n.cfg.Backend)}
	if n.cfg.NodeIP != nil {
		a[AnnotationNodeIP] = n.cfg.NodeIP.String()
	}
	if n.podCIDR != nil {
		a[AnnotationPodCIDRs] = n.podCIDR.String()
	}
	if n.cfg.Backend == BackendVXLAN {
		a[AnnotationVTEPMAC] = stableMAC(n.cfg.NodeName, "vxlan").String()
	}
	return a
}

// underlay is the link that carries NodeIP (else the default route's link).
func (n *Network) underlay() (netlink.Link, error) {
	if n.cfg.NodeIP != nil {
		addrs, err := listRetry(func() ([]netlink.Addr, error) {
			return n.nl.AddrList(nil, netlink.FAMILY_V4)
		})
		if err != nil {
			return nil, fmt.Errorf("podnet: list addresses: %w", err)
		}
		for _, a := range addrs {
			if a.IP.Equal(n.cfg.NodeIP) {
				return n.nl.LinkByIndex(a.LinkIndex)
			}
		}
		if n.cfg.Backend == BackendVXLAN {
			return nil, fmt.Errorf("podnet: node IP %s is on no interface", n.cfg.NodeIP)
		}
	} else if n.cfg.Backend == BackendVXLAN {
		return nil, errors.New("podnet: Config.NodeIP is required for vxlan")
	}
	routes, err := n.nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("podnet: list routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			return n.nl.LinkByIndex(r.LinkIndex)
		}
	}
	return nil, errors.New("podnet: no interface carries the node IP or a default route")
}

// enableForwarding sets net.ipv4.ip_forward in the node's namespace.
func (n *Network) enableForwarding() error {
	const path = "/proc/sys/net/ipv4/ip_forward"
	return inNetNS(n.ns, func() error {
		cur, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(cur)) == "1" {
			return nil
		}
		if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("podnet: enable ip_forward: %w", err)
		}
		return nil
	})
}

func (n *Network) state() (cidr *net.IPNet, gw net.IP, mtu int, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started {
		return nil, nil, 0, ErrNotStarted
	}
	return n.podCIDR, n.gateway, n.mtu, nil
}

// nthIP is the i-th address of cidr (IPv4).
func nthIP(cidr *net.IPNet, i uint32) net.IP {
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, binary.BigEndian.Uint32(cidr.IP.To4())+i)
	return ip
}

// stableMAC derives a locally administered unicast MAC from the node name,
// so it survives restarts without being stored.
func stableMAC(node, purpose string) net.HardwareAddr {
	sum := sha256.Sum256([]byte("skiff/" + purpose + "/" + node))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = (mac[0] | 0x02) &^ 0x01
	return mac
}

// listRetry repeats a netlink dump interrupted by concurrent changes.
func listRetry[T any](f func() ([]T, error)) ([]T, error) {
	var (
		out []T
		err error
	)
	for range 5 {
		out, err = f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return out, err
}

// uidLocks serialises the operations on one pod.
type uidLocks struct {
	mu sync.Mutex
	m  map[string]*uidLock
}

type uidLock struct {
	sync.Mutex
	refs int
}

func (l *uidLocks) lock(uid string) func() {
	l.mu.Lock()
	e := l.m[uid]
	if e == nil {
		e = &uidLock{}
		l.m[uid] = e
	}
	e.refs++
	l.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		l.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(l.m, uid)
		}
		l.mu.Unlock()
	}
}
