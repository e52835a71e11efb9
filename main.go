// Command skiff runs a Kubernetes-compatible cluster from one binary:
// `skiff server` for the control plane, `skiff agent` for a worker node.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/version"

	"skiff/agent"
	"skiff/runtime/daemon"
	"skiff/server"
	"skiff/server/join"
)

// Stamped by the build (make build): -X main.buildVersion=... -X main.buildCommit=...
var (
	buildVersion = "dev"
	buildCommit  = "unknown"
)

func main() {
	// The embedded containerd and its runc shim are this binary under other
	// names (hard links the agent makes), as in k3s.
	if handled, code := daemon.Dispatch(os.Args[0], os.Args[1:]); handled {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "skiff:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "skiff",
		Short:         "A Kubernetes-compatible cluster in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServerCommand(), newAgentCommand(), newImagesCommand(), join.TokenCommand(), newVersionCommand(), newSnapshotCommand())
	return root
}

// withConfig makes a command read the environment and its config file into
// the flags the user did not give.
func withConfig(cmd *cobra.Command) *cobra.Command {
	cmd.Flags().String("config", defaultConfigFile, "YAML file whose keys are flag names")
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		return resolveFlags(cmd.Flags(), os.Getenv)
	}
	return cmd
}

func newServerCommand() *cobra.Command {
	cfg := server.Config{}
	acfg := agent.Config{}
	var mode string
	var disableAgent bool
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane: the state store and the Kubernetes API over HTTPS",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := strconv.ParseUint(mode, 8, 32)
			if err != nil || m > 0o777 {
				return fmt.Errorf("--write-kubeconfig-mode %q: want an octal file mode such as 0600", mode)
			}
			cfg.KubeconfigMode = os.FileMode(m)
			for _, d := range cfg.Disable {
				if d != server.AddonLocalStorage && d != server.AddonMetricsServer {
					return fmt.Errorf("--disable %q: no such add-on (known: %s, %s)", d, server.AddonLocalStorage, server.AddonMetricsServer)
				}
			}
			cfg.Logger = newLogger()
			cfg.Version = versionInfo()
			cfg.ClusterDNS = acfg.ClusterDNS
			cfg.Snapshots.Node = acfg.NodeName
			cfg.NodeName = acfg.NodeName
			if disableAgent || cfg.Datastore.ClusterReset {
				return clusterResetDone(cmd, server.Run(cmd.Context(), cfg))
			}
			acfg.DataDir, acfg.ClusterCIDR, acfg.ClusterDomain = cfg.DataDir, cfg.ClusterCIDR, cfg.ClusterDomain
			acfg.ServiceCIDR = cfg.ServiceCIDR
			acfg.ControlPlane = true
			acfg.KubeletVersion = cfg.Version.GitVersion
			acfg.Logger = cfg.Logger.With("part", "agent")
			return runServerWithAgent(cmd.Context(), cfg, acfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", "/var/lib/skiff", "directory for the server's state")
	f.StringVar(&cfg.BindAddress, "bind-address", "0.0.0.0", "address to listen on")
	f.IntVar(&cfg.Port, "https-listen-port", 6443, "port of the Kubernetes API (HTTPS)")
	f.StringSliceVar(&cfg.TLSSANs, "tls-san", nil, "extra host names or IP addresses for the serving certificate")
	f.StringVar(&cfg.ServiceCIDR, "service-cidr", "10.43.0.0/16", "Service IP range; its first address is the API server's in-cluster address")
	f.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain")
	f.StringVar(&cfg.KubeconfigPath, "write-kubeconfig", "/etc/skiff/skiff.yaml", "where to write the admin kubeconfig")
	f.StringVar(&mode, "write-kubeconfig-mode", "0600", "file mode of the admin kubeconfig")
	f.DurationVar(&cfg.MinTokenExpiration, "service-account-min-token-expiration", 10*time.Minute, "shortest service-account token lifetime a TokenRequest may ask for")
	f.DurationVar(&cfg.CompactInterval, "compact-interval", 5*time.Minute, "how often to compact store history; each compaction keeps one interval (0 disables)")
	f.StringVar(&cfg.AdvertiseAddress, "advertise-address", "", "address in-cluster clients reach the API server at (default: the host's first address)")
	f.StringVar(&cfg.ClusterCIDR, "cluster-cidr", "10.42.0.0/16", "pod IP range; each node gets a /24 of it as spec.podCIDR")
	f.StringVar(&cfg.SchedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1) with the scheduler's profiles")
	f.DurationVar(&cfg.NodeMonitorGracePeriod, "node-monitor-grace-period", 40*time.Second, "how long a node may go without renewing its Lease before it is marked Unknown and tainted")
	f.Int64Var(&cfg.DefaultTolerationSeconds, "default-not-ready-toleration-seconds", 300, "tolerationSeconds admission gives every pod for the not-ready and unreachable NoExecute taints")
	f.StringVar(&cfg.PodSecurityConfig, "pod-security-admission-config", "", "PodSecurityConfiguration file (or an AdmissionConfiguration with a PodSecurity plugin) giving Pod Security's default levels and exemptions")
	f.BoolVar(&cfg.DisableScheduler, "disable-scheduler", false, "do not run the scheduler")
	f.BoolVar(&cfg.DisableControllers, "disable-controller-manager", false, "do not run the controllers")
	f.StringVar(&cfg.Token, "token", "", "join token secret agents present (default: generated once, kept in <data-dir>/server/token) (env SKIFF_TOKEN)")
	f.StringVar(&cfg.Audit.PolicyFile, "audit-policy-file", "", "audit.k8s.io/v1 Policy file saying what the API audit log records (none: no auditing)")
	f.StringVar(&cfg.Audit.LogPath, "audit-log-path", "", "file the audit events are appended to as JSON lines (\"-\": standard output)")
	f.IntVar(&cfg.Audit.MaxSizeMB, "audit-log-maxsize", 0, "size in megabytes at which the audit log is rotated (0: 100)")
	f.IntVar(&cfg.Audit.MaxBackups, "audit-log-maxbackup", 0, "rotated audit log files to keep (0: all)")
	f.BoolVar(&disableAgent, "disable-agent", false, "run only the control plane, without a local node")
	f.StringSliceVar(&cfg.Disable, "disable", nil, "packaged add-ons to leave out (repeatable): "+server.AddonLocalStorage+", "+server.AddonMetricsServer)
	f.StringVar(&cfg.DefaultLocalStoragePath, "default-local-storage-path", "", "directory on every node for local-path volumes (default <data-dir>/storage)")
	addNodeFlags(f, &acfg)
	addSnapshotFlags(f, &cfg.Snapshots)  // snapshotcmd.go
	addDatastoreFlags(f, &cfg.Datastore) // datastoreflags.go
	cmd.AddCommand(newMembersCommand())  // membercmd.go
	return withConfig(cmd)
}

// clusterResetDone turns --cluster-reset's success into exit 0 with its
// message, as k3s does; other results pass.
func clusterResetDone(cmd *cobra.Command, err error) error {
	if errors.Is(err, server.ErrClusterReset) {
		fmt.Fprintln(cmd.ErrOrStderr(), err.Error())
		return nil
	}
	return err
}

// versionInfo is what /version and `skiff version` report. The Kubernetes
// version is the API the server speaks (its k8s.io/api release).
func versionInfo() version.Info {
	return version.Info{
		Major: "1", Minor: "37", GitVersion: "v1.37.2+skiff-" + buildVersion,
		GitCommit: buildCommit, GitTreeState: "clean", GoVersion: runtime.Version(),
		Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, git commit and Go version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "skiff version %s (commit %s)\ngo version %s %s/%s\n",
				buildVersion, buildCommit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
