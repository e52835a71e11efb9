package podnet

import (
	"bytes"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// ensureBridge creates or repairs the bridge: stable MAC (a bridge otherwise
// takes the lowest port MAC, which changes as pods come and go), MTU,
// the gateway address with the pod CIDR's prefix, up.
func (n *Network) ensureBridge(cidr *net.IPNet, gw net.IP, mtu int) error {
	name := n.cfg.BridgeName
	link, err := n.nl.LinkByName(name)
	if err == nil {
		if _, ok := link.(*netlink.Bridge); !ok {
			if err := n.nl.LinkDel(link); err != nil {
				return fmt.Errorf("podnet: delete non-bridge %s: %w", name, err)
			}
			link = nil
		}
	} else if !isNotFound(err) {
		return fmt.Errorf("podnet: find bridge %s: %w", name, err)
	} else {
		link = nil
	}
	mac := stableMAC(n.cfg.NodeName, "bridge")
	if link == nil {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu, HardwareAddr: mac}}
		if err := n.nl.LinkAdd(br); err != nil && !errors.Is(err, errExist) {
			return fmt.Errorf("podnet: create bridge %s: %w", name, err)
		}
		if link, err = n.nl.LinkByName(name); err != nil {
			return fmt.Errorf("podnet: find bridge %s: %w", name, err)
		}
	}
	addr := &net.IPNet{IP: gw, Mask: cidr.Mask}
	return n.configureLink(link, mac, mtu, addr)
}

// ensureVXLAN creates the VXLAN device (or recreates it when its immutable
// settings differ), then fixes MAC, MTU, the podCIDR.0/32 address, up.
func (n *Network) ensureVXLAN(cidr *net.IPNet, underlay netlink.Link, mac net.HardwareAddr, mtu int) error {
	name := n.cfg.VXLANName
	want := &netlink.Vxlan{
		LinkAttrs:    netlink.LinkAttrs{Name: name, MTU: mtu, HardwareAddr: mac},
		VxlanId:      n.cfg.VNI,
		VtepDevIndex: underlay.Attrs().Index,
		SrcAddr:      n.cfg.NodeIP,
		Port:         n.cfg.VXLANPort,
		Learning:     false,
	}
	link, err := n.nl.LinkByName(name)
	switch {
	case err == nil:
		if have, ok := link.(*netlink.Vxlan); !ok || !sameVXLAN(have, want) {
			n.log.Info("recreating vxlan device with new settings", "name", name)
			if err := n.nl.LinkDel(link); err != nil {
				return fmt.Errorf("podnet: delete %s: %w", name, err)
			}
			link = nil
		}
	case isNotFound(err):
		link = nil
	default:
		return fmt.Errorf("podnet: find %s: %w", name, err)
	}
	if link == nil {
		if err := n.nl.LinkAdd(want); err != nil {
			return fmt.Errorf("podnet: create vxlan %s: %w", name, err)
		}
		if link, err = n.nl.LinkByName(name); err != nil {
			return fmt.Errorf("podnet: find %s: %w", name, err)
		}
	}
	addr := &net.IPNet{IP: cidr.IP.To4(), Mask: net.CIDRMask(32, 32)}
	return n.configureLink(link, mac, mtu, addr)
}

func sameVXLAN(have, want *netlink.Vxlan) bool {
	return have.VxlanId == want.VxlanId && have.VtepDevIndex == want.VtepDevIndex &&
		have.SrcAddr.Equal(want.SrcAddr) && have.Port == want.Port &&
		have.Learning == want.Learning && !have.FlowBased && have.Group == nil
}

// configureLink sets MAC, MTU, exactly one IPv4 address (addr) and up.
func (n *Network) configureLink(link netlink.Link, mac net.HardwareAddr, mtu int, addr *net.IPNet) error {
	name := link.Attrs().Name
	if mac != nil && !bytes.Equal(link.Attrs().HardwareAddr, mac) {
		if err := n.nl.LinkSetHardwareAddr(link, mac); err != nil {
			return fmt.Errorf("podnet: set MAC of %s: %w", name, err)
		}
	}
	if link.Attrs().MTU != mtu {
		if err := n.nl.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("podnet: set MTU of %s: %w", name, err)
		}
	}
	if err := setOnlyAddr(n.nl, link, addr); err != nil {
		return err
	}
	if err := n.nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("podnet: set %s up: %w", name, err)
	}
	return nil
}

// setOnlyAddr makes addr the only IPv4 address of link.
func setOnlyAddr(h *netlink.Handle, link netlink.Link, addr *net.IPNet) error {
	name := link.Attrs().Name
	addrs, err := listRetry(func() ([]netlink.Addr, error) { return h.AddrList(link, netlink.FAMILY_V4) })
	if err != nil {
		return fmt.Errorf("podnet: addresses of %s: %w", name, err)
	}
	found := false
	for _, a := range addrs {
		if a.IP.Equal(addr.IP) && bytes.Equal(a.Mask, addr.Mask) {
			found = true
			continue
		}
		if err := h.AddrDel(link, &a); err != nil {
			return fmt.Errorf("podnet: remove stale address %s of %s: %w", a.IPNet, name, err)
		}
	}
	if !found {
		if err := h.AddrAdd(link, &netlink.Addr{IPNet: addr}); err != nil && !errors.Is(err, errExist) {
			return fmt.Errorf("podnet: add %s to %s: %w", addr, name, err)
		}
	}
	return nil
}

// deleteLink removes a link by name; missing is fine.
func (n *Network) deleteLink(name string) error {
	link, err := n.nl.LinkByName(name)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("podnet: find %s: %w", name, err)
	}
	if err := n.nl.LinkDel(link); err != nil && !isNotFound(err) {
		return fmt.Errorf("podnet: delete %s: %w", name, err)
	}
	return nil
}

func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, errNoDevice)
}
