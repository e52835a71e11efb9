package nft

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Generation is the ruleset generation of the Conn's network namespace:
// the kernel bumps it on every committed nftables change, by anyone, to
// any table. A proxier that remembers the generation its own last batch
// produced can tell, with one small request instead of re-reading tens of
// thousands of chains, whether anything has touched nftables since.
func (c *Conn) Generation() (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN),
			Flags: netlink.Request,
		},
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	}
	msgs, err := c.batch.Execute(req)
	if err != nil {
		return 0, fmt.Errorf("nftables generation: %w", err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, fmt.Errorf("nftables generation: %w", err)
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
		if err := ad.Err(); err != nil {
			return 0, fmt.Errorf("nftables generation: %w", err)
		}
	}
	return 0, fmt.Errorf("nftables generation: no NFTA_GEN_ID in the kernel's reply")
}
