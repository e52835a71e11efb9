package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"

	"skiff/netproxy"
	"skiff/netproxy/clusterdns"
)

// dnsLinkName is the local link (a dummy, or a port-less bridge on kernels
// without the dummy driver) that carries the cluster DNS address on every
// node, so pods reach their own node's DNS server.
const dnsLinkName = "skiff-dns"

// services is the node's Service plumbing: the nftables proxy, cluster DNS
// and the metrics endpoint they report on.
type services struct {
	informers informers.SharedInformerFactory
	proxy     *netproxy.Proxier // nil with --disable-kube-proxy
	hostPorts *hostPorts        // nil with --disable-kube-proxy
	dns       *clusterdns.Server
	registry  *prometheus.Registry
	metrics   *http.Server
}

// startServices builds the proxy and DNS server and starts the informers
// they share. Called once the pod network is up.
func (n *node) startServices(ips []net.IP) error {
	s := &services{registry: prometheus.NewRegistry()}
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.informers = informers.NewSharedInformerFactory(n.client, 0)
	dnsIP := net.ParseIP(n.cfg.ClusterDNS)
	if dnsIP == nil {
		return fmt.Errorf("--cluster-dns %q: not an IP address", n.cfg.ClusterDNS)
	}
	if err := enableBridgeNetfilter(); err != nil {
		return err
	}
	if !n.cfg.DisableProxy {
		_, cluster, _ := net.ParseCIDR(n.cfg.ClusterCIDR)
		_, serviceNet, _ := net.ParseCIDR(n.cfg.ServiceCIDR)
		hp, err := newHostPorts(n.client, n.cfg.NodeName, n.network)
		if err != nil {
			return fmt.Errorf("host ports: %w", err)
		}
		p, err := netproxy.New(netproxy.Config{
			NodeName: n.cfg.NodeName, NodeIPs: ips, ClusterCIDR: cluster, LocalServiceIPs: []net.IP{dnsIP},
			ServiceCIDRs: []*net.IPNet{serviceNet}, HostPorts: hp,
			Informers: s.informers, SyncPeriod: n.cfg.ProxySyncPeriod, Registerer: s.registry,
			Logger: n.log.With("component", "proxy"),
		})
		if err != nil {
			return fmt.Errorf("service proxy: %w", err)
		}
		s.proxy = p
		hp.changed = p.HostPortsChanged
		s.hostPorts = hp
	}
	if err := clusterdns.EnsureAddress(dnsLinkName, dnsIP); err != nil {
		return fmt.Errorf("cluster DNS address %s: %w", dnsIP, err)
	}
	d, err := clusterdns.New(clusterdns.Config{
		Addr: dnsIP, Port: 53, Domain: n.cfg.ClusterDomain, Informers: s.informers, ResolvConf: "/etc/resolv.conf",
		Registerer: s.registry, Logger: n.log.With("component", "dns"),
	})
	if err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	s.dns = d
	if n.cfg.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		s.metrics = &http.Server{Addr: n.cfg.MetricsAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	}
	n.services = s
	return nil
}

// enableBridgeNetfilter makes bridged pod-to-pod packets pass the IPv4
// hooks: a pod reaching a Service whose endpoint sits on the same bridge
// gets its reply bridged straight back, and without this the reply would
// skip conntrack's reverse DNAT and the connection would hang. The
// setting is per network namespace; a kernel without br_netfilter has no
// file, and then only masquerade (hairpin) paths work.
func enableBridgeNetfilter() error {
	const path = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	if b, err := os.ReadFile(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read %s: %w", path, err)
	} else if len(b) > 0 && b[0] == '1' {
		return nil
	}
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enable %s: %w", path, err)
	}
	return nil
}

// loops are the services' long-running parts, for node.run.
func (s *services) loops() map[string]func(context.Context) error {
	l := map[string]func(context.Context) error{
		"dns": s.dns.Run,
		"informers": func(ctx context.Context) error {
			s.informers.Start(ctx.Done())
			<-ctx.Done()
			s.informers.Shutdown()
			return nil
		},
	}
	if s.proxy != nil {
		l["proxy"] = s.proxy.Run
		l["hostports"] = s.hostPorts.run
	}
	if s.metrics != nil {
		l["metrics"] = s.serveMetrics
	}
	return l
}

func (s *services) serveMetrics(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.metrics.Addr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.metrics.Shutdown(sctx)
	}()
	if err := s.metrics.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
