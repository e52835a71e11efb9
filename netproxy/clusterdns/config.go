// Package clusterdns answers the cluster's DNS names on every node, at the
// cluster DNS address, with no pod to run: <svc>.<ns>.svc.<domain> (A and
// AAAA, one record per ready endpoint for headless Services), SRV for named
// ports, PTR, and forwarding of every other name to the node's own
// resolvers through a cache.
package clusterdns

import (
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
)

// Config is everything the DNS server is told.
type Config struct {
	// Addr is the cluster DNS address (10.43.0.10); the server listens on
	// Addr:Port over UDP and TCP. EnsureAddress puts Addr on the node.
	Addr net.IP
	// Port is 53 unless a test says otherwise.
	Port int
	// Domain is the cluster domain (cluster.local).
	Domain string
	// Informers is the shared factory the Service and EndpointSlice
	// informers come from. New registers them; the caller starts the
	// factory after New, and Run waits for the caches to sync.
	Informers informers.SharedInformerFactory
	// Upstreams are the resolvers other names are forwarded to (host:port);
	// empty means the nameservers of ResolvConf.
	Upstreams []string
	// ResolvConf is the node's resolver file (/etc/resolv.conf). It is
	// looked at every ResolvConfCheck (default 5 s) and re-read when it
	// changes, as DHCP and VPN clients rewrite it.
	ResolvConf      string
	ResolvConfCheck time.Duration
	// CacheSize bounds the forwarding cache (entries, default 10,000);
	// CacheMaxTTL caps how long an answer is kept (default 30 s).
	CacheSize   int
	CacheMaxTTL time.Duration
	// ForwardTimeout bounds one exchange with one upstream (default 2 s);
	// a query tries each upstream once, so the worst case is this times
	// the number of upstreams.
	ForwardTimeout time.Duration
	// Registerer receives the DNS metrics (nil: none).
	Registerer prometheus.Registerer
	// Logger receives the server's logs.
	Logger *slog.Logger
}
