package netproxy

import (
	"fmt"
	"os"

	"skiff/runtime/nsthread"
)

// routeLocalnetPath is the sysctl that lets the kernel route packets from
// or to 127.0.0.0/8 off the loopback interface. The portmap plugin sets
// it for host ports on 127.0.0.1; the table's filter-prerouting chain
// keeps the network from using it to reach the node's loopback services.
const routeLocalnetPath = "/proc/sys/net/ipv4/conf/all/route_localnet"

// enableRouteLocalnet sets route_localnet in the network namespace at
// nsPath ("" is the process's own). /proc/sys/net shows the namespace of
// the thread that opens it, so the write happens on a switched thread.
func enableRouteLocalnet(nsPath string) error {
	err := nsthread.DoPath(nsPath, func() error {
		if b, err := os.ReadFile(routeLocalnetPath); err == nil && len(b) > 0 && b[0] == '1' {
			return nil
		}
		return os.WriteFile(routeLocalnetPath, []byte("1"), 0o644)
	})
	if err != nil {
		return fmt.Errorf("set %s: %w", routeLocalnetPath, err)
	}
	return nil
}
