package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"skiff/agent"
	"skiff/server"
	"skiff/server/join"
)

func newAgentCommand() *cobra.Command {
	cfg := agent.Config{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Join a server as a worker node: pods on containerd, the pod network, logs and exec",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Logger = newLogger()
			cfg.KubeletVersion = versionInfo().GitVersion
			return agent.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.ServerURL, "server", "", "server to join, https://host:6443 (env SKIFF_URL)")
	f.StringVar(&cfg.Token, "token", "", "join token (env SKIFF_TOKEN)")
	f.StringVar(&cfg.DataDir, "data-dir", "/var/lib/skiff", "directory for the agent's state")
	f.StringVar(&cfg.ClusterCIDR, "cluster-cidr", "10.42.0.0/16", "pod IP range of the cluster (traffic leaving it is masqueraded)")
	f.StringVar(&cfg.ServiceCIDR, "service-cidr", "10.43.0.0/16", "Service IP range of the cluster (addresses no Service has are refused)")
	f.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain")
	addNodeFlags(f, &cfg)
	return withConfig(cmd)
}

// addNodeFlags are the flags of a node, on `skiff agent` and on `skiff
// server` (for its local node).
func addNodeFlags(f *pflag.FlagSet, cfg *agent.Config) {
	f.StringVar(&cfg.NodeName, "node-name", "", "node name (default: the hostname)")
	f.StringSliceVar(&cfg.NodeIPs, "node-ip", nil, "the node's address (default: the address of the default-route interface)")
	f.StringArrayVar(&cfg.NodeLabels, "node-label", nil, "label key=value set on the node (repeatable)")
	f.StringArrayVar(&cfg.NodeTaints, "node-taint", nil, "taint key=value:Effect the node registers with (repeatable)")
	f.StringVar(&cfg.ContainerRuntimeEndpoint, "container-runtime-endpoint", "", "socket of an existing containerd (default: run the embedded one)")
	f.StringVar(&cfg.NetworkBackend, "network-backend", "vxlan", "pod network between nodes: vxlan, host-gw or none (leave it to your CNI)")
	f.StringVar(&cfg.ClusterDNS, "cluster-dns", "10.43.0.10", "cluster DNS address written into pods' resolv.conf")
	f.IntVar(&cfg.KubeletPort, "kubelet-port", 10250, "port of the node's logs/exec/port-forward server")
	f.StringVar(&cfg.PodLogDir, "pod-log-dir", "/var/log/pods", "where container logs are written")
	f.StringVar(&cfg.NetNSDir, "netns-dir", "/run/skiff/netns", "where pod network namespaces are mounted")
	f.StringVar(&cfg.CgroupRoot, "cgroup-root", "/skiff", "cgroup under which pods run")
	f.BoolVar(&cfg.DisableProxy, "disable-kube-proxy", false, "leave Services to another proxy (cluster DNS still runs)")
	f.DurationVar(&cfg.ProxySyncPeriod, "proxy-sync-period", 30*time.Second, "how often the Service rules are checked and, if anyone else changed nftables, rewritten in full")
	f.StringVar(&cfg.MetricsAddr, "proxy-metrics-address", "127.0.0.1:10249", "where the proxy and DNS serve /metrics and /healthz (\"\" turns it off)")
	f.StringVar(&cfg.RegistriesFile, "private-registry", "/etc/skiff/registries.yaml", "registries.yaml with mirrors and credentials")
}

// runServerWithAgent runs the control plane and, once it serves, a node in
// the same process that joins it over loopback with the server token.
func runServerWithAgent(ctx context.Context, cfg server.Config, acfg agent.Config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listening := make(chan net.Addr, 1)
	cfg.Listening = func(a net.Addr) { listening <- a }
	serverDone := make(chan error, 1)
	go func() { serverDone <- server.Run(ctx, cfg) }()
	var addr net.Addr
	select {
	case addr = <-listening:
	case err := <-serverDone:
		return err
	}
	token, err := os.ReadFile(join.ServerTokenPath(cfg.DataDir))
	if err != nil {
		cancel()
		<-serverDone
		return fmt.Errorf("local agent: %w", err)
	}
	acfg.ServerURL = "https://127.0.0.1:" + strconv.Itoa(addr.(*net.TCPAddr).Port)
	acfg.Token = strings.TrimSpace(string(token))
	agentDone := make(chan error, 1)
	go func() { agentDone <- agent.Run(ctx, acfg) }()
	select {
	case err = <-serverDone:
		cancel()
		err = errors.Join(err, <-agentDone)
	case err = <-agentDone:
		if err != nil {
			err = fmt.Errorf("agent: %w", err)
		}
		cancel()
		err = errors.Join(err, <-serverDone)
	}
	return err
}

// newLogger logs text to stderr, and routes client-go's klog there too.
func newLogger() *slog.Logger {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	klog.SetSlogLogger(log.With("from", "klog"))
	return log
}
