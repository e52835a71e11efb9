// Package netproxy implements Services on the node: ClusterIP, NodePort,
// LoadBalancer and externalIPs, as nftables rules in one table per family
// (`ip skiff`). A packet costs one verdict-map lookup on (address,
// protocol, port) whatever the number of Services, and a change to one
// Service or EndpointSlice rewrites only that Service's chains and map
// elements, in one atomic batch.
package netproxy

import (
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
)

// Config is everything the proxy is told.
type Config struct {
	// NodeName picks this node's endpoints for the Local traffic policies.
	NodeName string
	// NodeIPs are the node's addresses (its InternalIPs); NodePorts answer
	// on every local address, these are what status and logs report.
	NodeIPs []net.IP
	// ClusterCIDR is the pod range: traffic to a Service from outside it is
	// masqueraded (unless a Local policy keeps the source).
	ClusterCIDR *net.IPNet
	// ServiceCIDRs are the cluster's Service ranges: a connection to an
	// address in them that no Service port claims (a deleted Service, a
	// wrong port) is refused at once instead of wandering off through the
	// default route, as kube-proxy does.
	ServiceCIDRs []*net.IPNet
	// LocalServiceIPs are cluster IPs served on this node itself (the
	// cluster DNS address): the proxy leaves them alone.
	LocalServiceIPs []net.IP
	// Informers is the shared factory the Service and EndpointSlice
	// informers come from. New registers them; the caller starts the
	// factory after New, and Run waits for the caches to sync.
	Informers informers.SharedInformerFactory
	// HostPorts, if set, lists the host ports of the node's pods, which
	// the proxy maps as the CNI portmap plugin does; tell it of changes
	// with Proxier.HostPortsChanged. With it set the proxy also turns on
	// net.ipv4.conf.all.route_localnet, so that ports published on
	// 127.0.0.1 can be routed to their pods.
	HostPorts HostPortSource
	// SyncPeriod is how often the proxy checks that the ruleset is still
	// what it wrote, and rewrites it whole when it may not be, repairing
	// any change made by hand (default 30 s). The check is nftables' ruleset
	// generation, bumped by every commit in the network namespace: an
	// untouched ruleset costs one small netlink request per period.
	SyncPeriod time.Duration
	// FullSyncPeriod bounds the time between two full rewrites even when
	// the generation says nothing changed (default 1 h): a safety net for
	// a change the generation cannot show.
	FullSyncPeriod time.Duration
	// MinSyncInterval coalesces bursts of changes (default 0: every change
	// is applied as soon as the queue hands it over).
	MinSyncInterval time.Duration
	// NetNS is the network namespace (a path such as /run/netns/x) whose
	// rules and conntrack table the proxy manages; "" is the process's own.
	NetNS string
	// TableName is the nftables table (default "skiff").
	TableName string
	// Registerer receives the proxy's metrics (nil: none).
	Registerer prometheus.Registerer
	// Logger receives the proxy's logs.
	Logger *slog.Logger
	// AfterSync, if set, is called after every sync attempt (tests and
	// benchmarks wait on it).
	AfterSync func(SyncResult)
}

// SyncResult describes one sync.
type SyncResult struct {
	// Full is a full resync; otherwise only Changed services were written.
	Full bool
	// Skipped is a periodic resync (Full is set) that wrote nothing: the
	// ruleset generation showed that nothing had touched nftables since
	// the proxy's last batch. Only Duration (the check) and the installed
	// counts are set.
	Skipped bool
	// Changed is the number of service ports whose rules were rewritten.
	Changed int
	// Ops is the number of operations in the batch sent to the kernel.
	Ops int
	// Duration is the time from the start of building the batch to the
	// kernel's acknowledgement.
	Duration time.Duration
	// Services, Chains, Rules and Elements count what is installed after
	// the sync (service ports, chains, rules and map elements).
	Services, Chains, Rules, Elements int
	// Err is the sync's error, if it failed.
	Err error
}
