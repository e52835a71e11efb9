package nodeipam

import (
	"errors"
	"fmt"
	"math/big"
	"net"
)

// maxSubnetBits bounds how many node subnets one range is cut into
// (2^16), as upstream does: the bookkeeping is one counter per subnet.
const maxSubnetBits = 16

// errFull means every node subnet of a range is taken.
var errFull = errors.New("no remaining pod CIDRs in the cluster CIDR")

// cidrSet hands out the node-sized subnets of one cluster range. Each
// subnet carries a count of the nodes recorded as holding it: normally 0
// or 1, but nodes written by someone else may overlap, and a subnet is
// only free again when the last of them is gone.
type cidrSet struct {
	cluster  *net.IPNet
	base     *big.Int // the cluster range's first address
	bits     int      // 32 or 128
	maskSize int      // node subnet prefix length
	shift    uint     // address bits below the node prefix
	used     []uint16
	// next is where the search for a free subnet starts: it moves past
	// each allocation, so a freed subnet is handed out again only after
	// the others, which leaves time for anything still routing to it.
	next int
}

func newCIDRSet(cluster *net.IPNet, maskSize int) (*cidrSet, error) {
	ones, bits := cluster.Mask.Size()
	if bits == 0 {
		return nil, fmt.Errorf("cluster CIDR %v has a non-canonical mask", cluster)
	}
	if maskSize < ones || maskSize > bits {
		return nil, fmt.Errorf("node CIDR mask size /%d must be between the cluster prefix /%d and /%d", maskSize, ones, bits)
	}
	if maskSize-ones > maxSubnetBits {
		return nil, fmt.Errorf("node CIDR mask size /%d cuts cluster CIDR %v into more than 2^%d subnets", maskSize, cluster, maxSubnetBits)
	}
	ip := cluster.IP.Mask(cluster.Mask)
	if bits == 32 {
		ip = ip.To4()
	}
	return &cidrSet{
		cluster:  &net.IPNet{IP: ip, Mask: cluster.Mask},
		base:     new(big.Int).SetBytes(ip),
		bits:     bits,
		maskSize: maskSize,
		shift:    uint(bits - maskSize),
		used:     make([]uint16, 1<<(maskSize-ones)),
	}, nil
}

// subnet is the i-th node subnet.
func (s *cidrSet) subnet(i int) *net.IPNet {
	n := new(big.Int).Lsh(big.NewInt(int64(i)), s.shift)
	n.Add(n, s.base)
	ip := make(net.IP, s.bits/8)
	n.FillBytes(ip)
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(s.maskSize, s.bits)}
}

// allocate takes the next free subnet.
func (s *cidrSet) allocate() (*net.IPNet, error) {
	for k := range len(s.used) {
		i := (s.next + k) % len(s.used)
		if s.used[i] == 0 {
			s.used[i] = 1
			s.next = (i + 1) % len(s.used)
			return s.subnet(i), nil
		}
	}
	return nil, errFull
}

// occupy records c (any size) as held; it reports whether c overlaps the
// range at all and whether it overlaps a subnet already held.
func (s *cidrSet) occupy(c *net.IPNet) (inRange, shared bool) {
	begin, end, ok := s.indices(c)
	if !ok {
		return false, false
	}
	for i := begin; i <= end; i++ {
		if s.used[i] > 0 {
			shared = true
		}
		if s.used[i] < ^uint16(0) {
			s.used[i]++
		}
	}
	return true, shared
}

// release undoes one occupy or allocate of c.
func (s *cidrSet) release(c *net.IPNet) {
	begin, end, ok := s.indices(c)
	if !ok {
		return
	}
	for i := begin; i <= end; i++ {
		if s.used[i] > 0 {
			s.used[i]--
		}
	}
}

// free counts the subnets nobody holds.
func (s *cidrSet) free() int {
	n := 0
	for _, u := range s.used {
		if u == 0 {
			n++
		}
	}
	return n
}

// indices are the first and last node subnets c overlaps; ok is false
// when c is of another family or outside the range.
func (s *cidrSet) indices(c *net.IPNet) (begin, end int, ok bool) {
	ip := c.IP.Mask(c.Mask)
	ones, bits := c.Mask.Size()
	if bits != s.bits || ip == nil {
		return 0, 0, false
	}
	if bits == 32 {
		ip = ip.To4()
	}
	first := new(big.Int).SetBytes(ip)
	last := new(big.Int).Lsh(big.NewInt(1), uint(bits-ones))
	last.Sub(last, big.NewInt(1)).Add(last, first)
	clusterLast := new(big.Int).Lsh(big.NewInt(int64(len(s.used))), s.shift)
	clusterLast.Sub(clusterLast, big.NewInt(1)).Add(clusterLast, s.base)
	if last.Cmp(s.base) < 0 || first.Cmp(clusterLast) > 0 {
		return 0, 0, false
	}
	if first.Cmp(s.base) < 0 {
		first = s.base
	}
	if last.Cmp(clusterLast) > 0 {
		last = clusterLast
	}
	return s.index(first), s.index(last), true
}

func (s *cidrSet) index(addr *big.Int) int {
	d := new(big.Int).Sub(addr, s.base)
	return int(d.Rsh(d, s.shift).Int64())
}
