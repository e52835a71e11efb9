package netproxy

import (
	"net"

	discoveryv1 "k8s.io/api/discovery/v1"

	"skiff/netproxy/nft"
)

// family is what differs between the ip and the ip6 table: the address
// type of keys and slices, the loopback range kept away from NodePorts,
// and the pod range when ClusterCIDR is of this family.
type family struct {
	nft         nft.Family
	addrKey     nft.KeyType
	addressType discoveryv1.AddressType
	loopback    *net.IPNet
	hostBits    int
	// podCIDR is nil when the pod range is of the other family: the rules
	// that tell pods from the rest are then left out.
	podCIDR *net.IPNet
	// serviceCIDRs are the Service ranges of this family: an address in
	// them that no Service port claims is refused. localServiceIPs (the
	// cluster DNS address, served on the node) are exempt.
	serviceCIDRs    []*net.IPNet
	localServiceIPs []net.IP

	// chains and maps are the table's fixed objects (ruleset.go);
	// serviceIPs... point into maps.
	chains                   []chainDef
	maps                     []nft.Set
	serviceIPs, nodePorts    *nft.Set
	noEPServices, noEPNPs    *nft.Set
	hostPortIPs, hostPortAny *nft.Set
}

// familyConfig is what the node's configuration says about the address
// ranges; each family keeps the part of its own kind.
type familyConfig struct {
	clusterCIDR     *net.IPNet
	serviceCIDRs    []*net.IPNet
	localServiceIPs []net.IP
}

func newFamily(f nft.Family, cfg familyConfig) *family {
	clusterCIDR := cfg.clusterCIDR
	fam := &family{nft: f}
	if f == nft.IPv6 {
		fam.addrKey, fam.addressType, fam.hostBits = nft.KeyIPv6Addr, discoveryv1.AddressTypeIPv6, 128
		fam.loopback = &net.IPNet{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)}
	} else {
		fam.addrKey, fam.addressType, fam.hostBits = nft.KeyIPv4Addr, discoveryv1.AddressTypeIPv4, 32
		fam.loopback = &net.IPNet{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)}
	}
	if clusterCIDR != nil && (clusterCIDR.IP.To4() != nil) == (f == nft.IPv4) {
		fam.podCIDR = clusterCIDR
	}
	for _, c := range cfg.serviceCIDRs {
		if c != nil && (c.IP.To4() != nil) == (f == nft.IPv4) {
			fam.serviceCIDRs = append(fam.serviceCIDRs, c)
		}
	}
	for _, ip := range cfg.localServiceIPs {
		if ip := fam.parse(ip.String()); ip != nil {
			fam.localServiceIPs = append(fam.localServiceIPs, ip)
		}
	}
	fam.chains = fam.tableChains()
	fam.maps = fam.tableMaps()
	fam.serviceIPs, fam.nodePorts = &fam.maps[0], &fam.maps[1]
	fam.noEPServices, fam.noEPNPs = &fam.maps[2], &fam.maps[3]
	fam.hostPortIPs, fam.hostPortAny = &fam.maps[4], &fam.maps[5]
	return fam
}

// parse reads an address of this family (nil for the other family or
// garbage), in the family's byte length so that equal addresses compare
// and render alike.
func (f *family) parse(s string) net.IP {
	ip := net.ParseIP(s)
	if ip == nil {
		return nil
	}
	v4 := ip.To4()
	if f.nft == nft.IPv4 {
		return v4
	}
	if v4 != nil {
		return nil
	}
	return ip.To16()
}

// host is the single-address network of ip, for address matches.
func (f *family) host(ip net.IP) *net.IPNet {
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(f.hostBits, f.hostBits)}
}

// families are the tables the node needs: ip always, ip6 when the node has
// an IPv6 address.
func families(nodeIPs []net.IP, cfg familyConfig) []*family {
	out := []*family{newFamily(nft.IPv4, cfg)}
	for _, ip := range nodeIPs {
		if ip.To4() == nil && ip.To16() != nil {
			return append(out, newFamily(nft.IPv6, cfg))
		}
	}
	return out
}
