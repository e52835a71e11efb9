package clusterdns

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// EnsureAddress gives the current network namespace the cluster DNS
// address on a dummy link named ifName, up, creating the link if missing,
// so the server can bind it on every node. Running it again changes
// nothing. On a kernel built without the dummy driver the link is a bridge
// with no ports, which holds a local address the same way. A link of that
// name of any other kind is an error rather than something to take over.
func EnsureAddress(ifName string, addr net.IP) error {
	if addr == nil || addr.IsUnspecified() {
		return fmt.Errorf("ensure dns address on %s: invalid address %q", ifName, addr)
	}
	link, err := netlink.LinkByName(ifName)
	var notFound netlink.LinkNotFoundError
	switch {
	case errors.As(err, &notFound):
		if err := addHolderLink(ifName); err != nil {
			return err
		}
		if link, err = netlink.LinkByName(ifName); err != nil {
			return fmt.Errorf("find dummy link %s: %w", ifName, err)
		}
	case err != nil:
		return fmt.Errorf("find link %s: %w", ifName, err)
	}
	if t := link.Type(); t != "dummy" && t != "bridge" {
		return fmt.Errorf("link %s is a %s, not a dummy", ifName, t)
	}
	if err := ensureAddr(link, addr); err != nil {
		return err
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", ifName, err)
		}
	}
	return nil
}

func addHolderLink(name string) error {
	attrs := netlink.LinkAttrs{Name: name}
	err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: attrs})
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs})
	}
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create dummy link %s: %w", name, err)
	}
	return nil
}

func ensureAddr(link netlink.Link, ip net.IP) error {
	family, bits := netlink.FAMILY_V4, 32
	if ip.To4() == nil {
		family, bits = netlink.FAMILY_V6, 128
	} else {
		ip = ip.To4()
	}
	have, err := netlink.AddrList(link, family)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, a := range have {
		if a.IP.Equal(ip) {
			return nil
		}
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}}
	if family == netlink.FAMILY_V6 {
		// No duplicate address detection: the server binds the address at
		// once, which fails while it is tentative.
		a.Flags = unix.IFA_F_NODAD
	}
	if err := netlink.AddrAdd(link, a); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to %s: %w", a.IPNet, link.Attrs().Name, err)
	}
	return nil
}
