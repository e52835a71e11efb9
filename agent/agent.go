// Package agent is skiff's node agent: it joins a server with a token,
// registers the Node, runs containerd (embedded by default), the pod
// network, the kubelet's pod duties and the streaming server on 10250.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config is everything `skiff agent` (or the agent inside `skiff server`) is
// told.
type Config struct {
	// ServerURL is the server to join, https://host:6443: the first server
	// of the agent's API load balancer, which the agent's clients dial
	// instead (see Run).
	ServerURL string
	// Token is the join token (K10<ca-hash>::server:<secret>).
	Token string
	// DataDir holds the agent's state under <DataDir>/agent.
	DataDir string
	// NodeName is the node's name (default: the hostname).
	NodeName string
	// NodeIPs are the node's addresses (default: detected).
	NodeIPs []string
	// NodeLabels (key=value) and NodeTaints (key=value:Effect) are set when
	// the node registers.
	NodeLabels []string
	NodeTaints []string
	// ControlPlane marks the agent inside `skiff server`.
	ControlPlane bool
	// ContainerRuntimeEndpoint is an existing containerd socket; empty runs
	// the embedded containerd.
	ContainerRuntimeEndpoint string
	// NetworkBackend is vxlan, host-gw or none.
	NetworkBackend string
	// ClusterCIDR is the pod range (traffic leaving it is masqueraded).
	ClusterCIDR string
	// ServiceCIDR is the Service range: addresses in it that no Service
	// claims are refused by the proxy.
	ServiceCIDR string
	// ClusterDNS and ClusterDomain go into every pod's resolv.conf.
	ClusterDNS    string
	ClusterDomain string
	// KubeletPort is where the streaming server listens (10250).
	KubeletPort int
	// PodLogDir (/var/log/pods), NetNSDir (/run/skiff/netns) and CgroupRoot
	// (/skiff) are shared with the machine; tests move them.
	PodLogDir  string
	NetNSDir   string
	CgroupRoot string
	// RegistriesFile is a k3s-style registries.yaml (mirrors, credentials).
	RegistriesFile string
	// DisableProxy leaves Services to another proxy (--disable-kube-proxy);
	// cluster DNS still runs.
	DisableProxy bool
	// ProxySyncPeriod is how often the proxy checks its ruleset and, if
	// anyone else changed nftables, rewrites it whole (default 30 s).
	ProxySyncPeriod time.Duration
	// MetricsAddr serves the proxy and DNS metrics (/metrics) and /healthz,
	// 127.0.0.1:10249 by default as kube-proxy does; "" turns it off.
	MetricsAddr string
	// KubeletVersion is what the Node reports as its kubelet version.
	KubeletVersion string
	// Logger receives the agent's logs.
	Logger *slog.Logger
	// Started, if set, is called once the node is registered and its pod
	// network is up.
	Started func()
}

// Validate checks the configuration a join needs.
func (c Config) Validate() error {
	if c.ServerURL == "" {
		return errors.New("--server (or SKIFF_URL) is required")
	}
	u, err := url.Parse(c.ServerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--server %q: want https://host:port", c.ServerURL)
	}
	if c.Token == "" {
		return errors.New("--token (or SKIFF_TOKEN) is required")
	}
	switch c.NetworkBackend {
	case "", "vxlan", "host-gw", "none":
	default:
		return fmt.Errorf("--network-backend %q: want vxlan, host-gw or none", c.NetworkBackend)
	}
	for _, ip := range c.NodeIPs {
		if net.ParseIP(ip) == nil {
			return fmt.Errorf("--node-ip %q: not an IP address", ip)
		}
	}
	if c.ClusterCIDR != "" {
		if _, _, err := net.ParseCIDR(c.ClusterCIDR); err != nil {
			return fmt.Errorf("--cluster-cidr %q: %w", c.ClusterCIDR, err)
		}
	}
	if c.ServiceCIDR != "" {
		if _, _, err := net.ParseCIDR(c.ServiceCIDR); err != nil {
			return fmt.Errorf("--service-cidr %q: %w", c.ServiceCIDR, err)
		}
	}
	return nil
}

func (c Config) dir(parts ...string) string {
	return filepath.Join(append([]string{c.DataDir, "agent"}, parts...)...)
}

// withDefaults fills what the flags leave empty.
func (c Config) withDefaults() (Config, error) {
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("node name: %w", err)
		}
		c.NodeName = strings.ToLower(h)
	}
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&c.NetworkBackend, "vxlan")
	def(&c.ClusterCIDR, "10.42.0.0/16")
	def(&c.ServiceCIDR, "10.43.0.0/16")
	def(&c.ClusterDNS, "10.43.0.10")
	def(&c.ClusterDomain, "cluster.local")
	def(&c.PodLogDir, "/var/log/pods")
	def(&c.NetNSDir, "/run/skiff/netns")
	def(&c.CgroupRoot, "/skiff")
	def(&c.RegistriesFile, "/etc/skiff/registries.yaml")
	if c.KubeletPort == 0 {
		c.KubeletPort = 10250
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Run joins the cluster and runs the node until ctx ends. Every request to
// the API servers, the join included, goes through the agent's client-side
// load balancer (agent/loadbalancer), which starts at --server, learns the
// other servers from the default/kubernetes Endpoints, keeps them in
// <DataDir>/agent/etc and fails over between them on its own.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	// The API load balancer first: the join goes through it, and so does
	// every client after it.
	b, err := newBalancer(cfg)
	if err != nil {
		return err
	}
	g := newLoops(ctx)
	g.Go("loadbalancer", b.lb.Run)
	n, err := start(g.ctx, cfg, b, g)
	if err != nil {
		if lerr := g.Stop(); lerr != nil {
			return lerr // the cause of start's failure
		}
		return err
	}
	return n.run(g)
}
