// Package server is skiff's control plane: the state store, the PKI, and
// the Kubernetes API server over HTTPS, with the control loops added as
// goroutines of Run.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"

	"skiff/server/admission"
	"skiff/server/admission/limitrange"
	"skiff/server/admission/podsecurity"
	"skiff/server/admission/policy"
	"skiff/server/admission/resourcequota"
	admissionwebhook "skiff/server/admission/webhook"
	"skiff/server/apiendpoints"
	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/auth/node"
	"skiff/server/auth/rbac"
	"skiff/server/auth/serviceaccount"
	"skiff/server/certs"
	"skiff/server/defaults"
	"skiff/server/flowcontrol"
	"skiff/server/join"
	"skiff/server/members"
	"skiff/server/quota"
	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/server/validation"
	"skiff/server/webhook"
)

// Config is everything `skiff server` is told.
type Config struct {
	// DataDir holds the server's state under <DataDir>/server.
	DataDir string
	// BindAddress and Port are where the API is served over HTTPS.
	BindAddress string
	Port        int
	// CompactInterval is how often the store compacts history (0: never).
	CompactInterval time.Duration
	// TLSSANs are extra names and addresses for the serving certificate.
	TLSSANs []string
	// ServiceCIDR is the Service address range; its first address is the
	// API server's in-cluster address (10.43.0.1).
	ServiceCIDR string
	// ClusterDomain is the DNS domain of the cluster (cluster.local).
	ClusterDomain string
	// ClusterDNS is the address every node serves cluster DNS on
	// (10.43.0.10); the server gives it to the kube-system/kube-dns Service
	// so that the address is reserved and discoverable as on any cluster.
	ClusterDNS string
	// KubeconfigPath and KubeconfigMode say where the admin kubeconfig goes.
	KubeconfigPath string
	KubeconfigMode os.FileMode
	// MinTokenExpiration is the shortest service-account token lifetime a
	// TokenRequest may ask for (default 10 minutes, as upstream).
	MinTokenExpiration time.Duration
	// AdvertiseAddress is the address the kubernetes Service sends in-cluster
	// clients to (default: the host's first global unicast address).
	AdvertiseAddress string
	// ClusterCIDR is the pod address range node IPAM hands out /24s from.
	ClusterCIDR string
	// SchedulerConfig is a KubeSchedulerConfiguration file ("" = defaults).
	SchedulerConfig string
	// NodeMonitorGracePeriod is how long a node may go silent before the
	// node lifecycle controller marks it Unknown (40 s by default).
	NodeMonitorGracePeriod time.Duration
	// DefaultTolerationSeconds is what admission gives pods for the
	// not-ready and unreachable NoExecute taints (300 by default).
	DefaultTolerationSeconds int64
	// PodSecurityConfig is a PodSecurityConfiguration (or an
	// AdmissionConfiguration holding one) with Pod Security's default
	// levels and exemptions ("" = privileged everywhere, as upstream).
	PodSecurityConfig string
	// DisableScheduler and DisableControllers leave those loops out.
	DisableScheduler   bool
	DisableControllers bool
	// Version is what /version reports.
	Version version.Info
	// Logger receives the server's logs.
	Logger *slog.Logger
	// Listening, if set, is called with the bound address once the server
	// accepts connections (useful with Port 0).
	Listening func(addr net.Addr)
	// Token is --token: the server token's secret, bare or as a full
	// K10<hash>::server:<secret> token ("" = the one stored in
	// <data-dir>/server/token, made on first start).
	Token string
	// Audit is the API audit log (--audit-policy-file, --audit-log-*).
	Audit AuditConfig
	// Snapshots is the state store's snapshot schedule (snapshots.go).
	Snapshots SnapshotConfig
	// Datastore chooses the state store (datastore.go).
	Datastore DatastoreConfig
	// NodeName is this server's node name: its member ID in the embedded
	// cluster (the host name if empty).
	NodeName string
	// Disable names the packaged add-ons left out (--disable, k3s's
	// names): AddonLocalStorage, AddonMetricsServer.
	Disable []string
	// DefaultLocalStoragePath is the directory on every node under which
	// the local-path provisioner makes its volumes ("" =
	// <data-dir>/storage, the server's data dir, as k3s's default).
	DefaultLocalStoragePath string
}

// The packaged add-ons --disable can leave out.
const (
	// AddonLocalStorage is the built-in local-path provisioner and its
	// default StorageClass "local-path".
	AddonLocalStorage = "local-storage"
	// AddonMetricsServer is the built-in metrics.k8s.io API; disabled, a
	// real metrics-server can register the group.
	AddonMetricsServer = "metrics-server"
)

// Disabled says whether --disable named the add-on.
func (c Config) Disabled(addon string) bool {
	for _, d := range c.Disable {
		if d == addon {
			return true
		}
	}
	return false
}

// LocalStoragePath is where local-path volumes go on each node.
func (c Config) LocalStoragePath() string {
	if c.DefaultLocalStoragePath != "" {
		return c.DefaultLocalStoragePath
	}
	return filepath.Join(c.DataDir, "storage")
}

// AuditConfig is kube-apiserver's audit log options. Without a policy
// file nothing is audited, as upstream.
type AuditConfig struct {
	// PolicyFile is an audit.k8s.io/v1 Policy.
	PolicyFile string
	// LogPath is the file the events go to, one JSON object a line
	// ("-": standard output).
	LogPath string
	// MaxSizeMB is the size at which the log is rotated (0: 100);
	// MaxBackups how many rotated files are kept (0: all).
	MaxSizeMB, MaxBackups int
}

// StorePath is where the SQLite state store lives under a data directory.
func StorePath(dataDir string) string {
	return filepath.Join(dataDir, "server", "db", "state.db")
}

// TLSDir is where the server's certificates and keys live.
func TLSDir(dataDir string) string {
	return filepath.Join(dataDir, "server", "tls")
}

// Run runs the server until ctx ends, then shuts down cleanly.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	started := time.Now()
	dirLock, err := lockDataDir(cfg.DataDir) // snapshots.go
	if err != nil {
		return err
	}
	defer dirLock.Close()
	_, serviceNet, err := net.ParseCIDR(cfg.ServiceCIDR)
	if err != nil {
		return fmt.Errorf("--service-cidr %q: %w", cfg.ServiceCIDR, err)
	}
	serviceIP := firstIP(serviceNet)
	ensureCerts := func() (*certs.Bundle, error) {
		return certs.Ensure(certs.Config{Dir: TLSDir(cfg.DataDir), Addresses: hostAddresses(), ServiceIP: serviceIP, ClusterDomain: cfg.ClusterDomain, ExtraSANs: cfg.TLSSANs})
	}
	ds, bundle, err := openDatastoreAndCerts(ctx, &cfg, ensureCerts, log.With("component", "store")) // datastore.go
	if err != nil {
		return err
	}
	defer ds.Close()
	if err := ds.waitReady(ctx, log.With("component", "store")); err != nil {
		return err
	}
	st := ds.Store
	log.Info("state store open", "datastore", ds.kind)
	stopSnapshots, err := startSnapshots(ctx, cfg, st, log.With("component", "snapshot")) // snapshots.go
	if err != nil {
		return err
	}
	defer stopSnapshots() // before the store closes
	serverToken, err := join.EnsureServerToken(cfg.DataDir, cfg.Token, bundle.CAHash())
	if err != nil {
		return fmt.Errorf("server token: %w", err)
	}

	var reg *registry.Registry
	rows := registry.Builtin(registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource})
	rows = append(rows, extensionRows(func() *registry.Registry { return reg })...) // crds.go
	rows = append(rows, registry.APIRegistration(registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource})...)
	rows = append(rows, registry.Policies(registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource})...)
	if reg, err = registry.New(rows...); err != nil {
		return err
	}
	metricsReg := prometheus.NewRegistry()
	metricsReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	objects := storage.New(newTimedStore(st, metricsReg), reg)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cacheDone := make(chan struct{})
	go func() {
		defer close(cacheDone)
		objects.Cache().Run(ctx, log.With("component", "watchcache"))
	}()
	defer func() { cancel(); <-cacheDone }()

	lookups := &objectLookups{st: objects, reg: reg}
	serveComponentStatuses(reg, st, lookups) // componentstatus.go
	saKey := bundle.ServiceAccountKey()
	issuerDiscovery, err := serviceaccount.NewDiscovery("", "", saKey.Public())
	if err != nil {
		return fmt.Errorf("service-account issuer discovery: %w", err)
	}
	psaConfig := podsecurity.Config{}
	if cfg.PodSecurityConfig != "" {
		if psaConfig, err = podsecurity.LoadConfigFile(cfg.PodSecurityConfig); err != nil {
			return fmt.Errorf("--pod-security-admission-config: %w", err)
		}
	}
	podSecurity, err := podsecurity.New(psaConfig, lookups, lookups, admissionWarner) // lookups_admission.go
	if err != nil {
		return fmt.Errorf("pod security: %w", err)
	}
	auditPolicy, auditSink, closeAudit, err := openAudit(cfg.Audit, log) // audit.go
	if err != nil {
		return err
	}
	defer closeAudit() // late: after the loops that write through the API have stopped
	var bootstrapped atomic.Bool
	authz := rbac.New(lookups)
	// Requests are authorized by the Node authorizer, then RBAC; CEL's
	// `authorizer` in policies and webhook matchConditions asks the same
	// chain, as upstream's.
	authorizer := node.New(nodeGraph{lookups}, authz)
	allocator := &admission.ServiceAllocator{Store: st, Objects: objects, Registry: reg, CIDR: serviceNet, NodePortMin: 30000, NodePortMax: 32767, Log: log.With("component", "allocator")}
	// kubectl logs/exec/attach/port-forward: proxied to the agents on 10250
	// with a client certificate only they accept, their serving certs
	// verified against the cluster CA.
	kubeletCert := &apiserver.KubeletClientCert{Dir: TLSDir(cfg.DataDir), Issuer: bundle, Roots: bundle.CAPool()}
	if _, err := kubeletCert.Get(); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	kubelet, err := apiserver.NewKubeletProxy(apiserver.KubeletClientConfig{RootCAs: bundle.CAPool(), ClientCertificate: kubeletCert.Get})
	if err != nil {
		return err
	}
	// API Priority and Fairness: serves the mandatory configuration until
	// its loop (started below) has read the real one.
	// One client for admission and conversion webhooks: its transports
	// (and TLS sessions) are shared.
	webhookClient := webhook.New(webhook.Config{Resolver: lookups, Logger: log.With("component", "webhook")})
	webhookAdmission := admissionwebhook.Config{Client: webhookClient, Source: webhookLookups{lookups}, Namespaces: webhookLookups{lookups},
		Resources: reg, Authorizer: authorizer, Logger: log.With("component", "admission-webhook")} // lookups_webhooks.go
	oapi := newLazyOpenAPI(reg, cfg.Version.GitVersion)
	apf := flowcontrol.New(flowcontrol.Config{Metrics: metricsReg, Logger: log.With("component", "flowcontrol")})
	api, err := apiserver.New(apiserver.Config{
		FlowControl:        apf,
		AuditPolicy:        auditPolicy,
		AuditSink:          auditSink,
		Kubelet:            kubelet,
		Registry:           reg,
		Storage:            objects,
		Authenticator:      apiserver.RequestAuthenticator{Tokens: []apiserver.TokenValidator{serviceaccount.NewValidator(saKey.Public(), "", nil, lookups)}},
		Authorizer:         authorizer,
		Rules:              authz,
		Tokens:             tokenIssuer{serviceaccount.NewIssuer(saKey, "")},
		MinTokenExpiration: cfg.MinTokenExpiration,
		Metrics:            apiserver.NewMetrics(metricsReg),
		Extra: extraHandlers(ds, map[string]http.Handler{
			"/openapi/*": oapi,
			"/metrics":   promhttp.HandlerFor(metricsReg, promhttp.HandlerOpts{}),
			// OIDC discovery of the service-account issuer; RBAC lets
			// service accounts read it (system:service-account-issuer-discovery).
			serviceaccount.OpenIDConfigPath: issuerDiscovery.ConfigHandler(),
			serviceaccount.JWKSPath:         issuerDiscovery.KeysHandler(),
			// Profiling, as kube-apiserver serves it (--profiling defaults to
			// on there); RBAC limits it like any non-resource path.
			"/debug/pprof/*":       http.HandlerFunc(pprof.Index),
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		}),
		Admission: []apiserver.Admitter{
			admission.NodeRestriction{}, // before ServiceAccount: it checks mirror pods as sent
			admission.ServiceAccount{Get: lookups},
			admission.Priority{Get: lookups},
			admission.DefaultTolerations{Seconds: cfg.DefaultTolerationSeconds},
			admission.RuntimeClass{Get: lookups},
			limitrange.Plugin{LimitRanges: lookups},
			// Upstream's order: the mutating built-ins above, then the
			// mutating policies and webhooks (which see a Service before its addresses
			// are allocated), the validating built-ins, the validating
			// policies and webhooks, and ResourceQuota last (it charges
			// only what everything else let through).
			policy.NewMutating(lookups, policy.WithAuthorizer(authorizer)), // MutatingAdmissionPolicies, before the mutating webhooks as upstream
			admissionwebhook.NewMutating(webhookAdmission),
			allocator,
			admission.RBACEscalation{Authorizer: authz},
			admission.Certificates{Authorizer: authz, Get: lookups}, // signers' attest and sign; kubelets' PodCertificateRequests
			podSecurity,
			// ValidatingAdmissionPolicies (lookups_policies.go).
			policy.New(lookups, policy.WithAuthorizer(authorizer)),
			admissionwebhook.NewValidating(webhookAdmission), // after the policies, as upstream's ValidatingAdmissionWebhook
			// ResourceQuota last of the built-ins, as upstream: it charges
			// what every plugin before it let through.
			&resourcequota.Plugin{Quotas: quotaAccess{lookups}, Evaluators: quota.NewRegistry(nil)}, // lookups_quota.go
		},
		Version: cfg.Version,
		Logger:  log.With("component", "apiserver"),
		Checks: []apiserver.Check{
			{Name: "ping", Check: func(context.Context) error { return nil }},
			// The store check fails on a server cut off from its cluster's
			// majority, so load balancers and agents skip it.
			{Name: "etcd", Check: ds.ready},
			{Name: "poststarthook/rbac/bootstrap-roles", ReadyOnly: true, Check: func(context.Context) error {
				if !bootstrapped.Load() {
					return errors.New("not finished")
				}
				return nil
			}},
			{Name: "poststarthook/priority-and-fairness-config-producer", ReadyOnly: true, Check: func(context.Context) error {
				if !apf.Ready() {
					return errors.New("not finished")
				}
				return nil
			}},
		},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	system := &auth.User{Name: "system:apiserver", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}
	apfClient, err := kubernetes.NewForConfig(inProcessConfig(api.Transport(system)))
	if err != nil {
		ln.Close()
		return err
	}
	apfDone := make(chan struct{})
	go func() {
		defer close(apfDone)
		if err := apf.Run(ctx, apfClient); err != nil && ctx.Err() == nil {
			log.Error("flow control stopped", "err", err)
		}
	}()
	defer func() { cancel(); <-apfDone }()
	agg, waitAgg, err := startAggregator(ctx, aggregatorConfig{tlsDir: TLSDir(cfg.DataDir), reg: reg, api: api, system: system, bundle: bundle, log: log.With("component", "aggregator")}) // aggregation.go
	if err != nil {
		ln.Close()
		return err
	}
	defer func() { cancel(); waitAgg() }()
	waitCRDs, err := startCRDs(ctx, crdConfig{reg: reg, objects: objects, api: api, system: system,
		changed:  []func([]*apiextensionsv1.CustomResourceDefinition){func([]*apiextensionsv1.CustomResourceDefinition) { agg.Notify() }},
		webhooks: webhookClient,
		openapi:  oapi.Published(), log: log.With("component", "crd")})
	if err != nil {
		ln.Close()
		return err
	}
	defer func() { cancel(); waitCRDs() }()
	// The default ServiceCIDR and the IPAddress of every Service address
	// exist before anything allocates (admission/serviceips.go).
	if err := allocator.Prepare(ctx, lookups); err != nil {
		ln.Close()
		return fmt.Errorf("service addresses: %w", err)
	}
	apiPort := ln.Addr().(*net.TCPAddr).Port
	endpoints, err := newEndpointsReconciler(cfg, apfClient, apiPort, log)
	if err != nil {
		ln.Close()
		return err
	}
	if err := bootstrap(ctx, api.Transport(system), bootstrapAddrs{serviceIP: serviceIP, serviceNet: serviceNet, clusterDNS: net.ParseIP(cfg.ClusterDNS),
		port: apiPort, endpoints: endpoints}, log); err != nil {
		ln.Close()
		return fmt.Errorf("bootstrap: %w", err)
	}
	bootstrapped.Store(true)
	// Every server keeps itself in default/kubernetes while it serves, and
	// takes itself out on the way down (before the store closes).
	endpointsDone := make(chan struct{})
	go func() { defer close(endpointsDone); _ = endpoints.Run(ctx) }()
	defer func() { cancel(); <-endpointsDone }()
	if ds.member != nil {
		membersDone := make(chan struct{})
		go func() {
			defer close(membersDone)
			c := members.NewNodeController(members.Config{Client: apfClient, Cluster: ds.member, Logger: log.With("component", "members")})
			if err := c.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("member controller stopped", "err", err)
			}
		}()
		defer func() { cancel(); <-membersDone }()
	}
	go allocator.Repair(ctx, lookups, 3*time.Minute)
	if err := startControlLoops(ctx, cfg, api, bundle, log); err != nil {
		ln.Close()
		return err
	}
	joins, err := newJoinHandler(ctx, api, system, bundle, serverToken.Secret, joinMembers(cfg, ds), log)
	if err != nil {
		ln.Close()
		return err
	}
	return serve(ctx, cfg, ln, bundle, joins.Wrap(api.Handler()), log, started)
}

// extraHandlers adds to base the endpoints only some datastores have: the
// embedded cluster's members (skiff server members).
func extraHandlers(ds *datastore, base map[string]http.Handler) map[string]http.Handler {
	if ds.member != nil {
		h := members.Handler(ds.member)
		base[members.Path] = h
		base[members.Path+"/*"] = h
	}
	return base
}

// memberName is this server's name among the servers: its Raft member ID
// and its record in the kubernetes endpoints (the node name, else the
// host name).
func memberName(cfg Config) (string, error) {
	if cfg.NodeName != "" {
		return cfg.NodeName, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("member name: %w", err)
	}
	return strings.ToLower(h), nil
}

// newEndpointsReconciler keeps this server in default/kubernetes.
func newEndpointsReconciler(cfg Config, cs kubernetes.Interface, port int, log *slog.Logger) (*apiendpoints.Reconciler, error) {
	name, err := memberName(cfg)
	if err != nil {
		return nil, err
	}
	return apiendpoints.New(apiendpoints.Config{Client: cs, Identity: name, IP: advertiseAddress(cfg.AdvertiseAddress), Port: port, Logger: log})
}

// serve serves TLS on ln, writes the admin kubeconfig and serves until ctx
// ends.
func serve(ctx context.Context, cfg Config, ln net.Listener, bundle *certs.Bundle, h http.Handler, log *slog.Logger, started time.Time) error {
	port := ln.Addr().(*net.TCPAddr).Port
	if cfg.KubeconfigPath != "" {
		cert, key := bundle.AdminCertPEM()
		url := "https://127.0.0.1:" + strconv.Itoa(port)
		if err := certs.WriteKubeconfig(cfg.KubeconfigPath, cfg.KubeconfigMode, url, bundle.CACertPEM(), cert, key); err != nil {
			ln.Close()
			return fmt.Errorf("write kubeconfig: %w", err)
		}
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	tlsLn := tls.NewListener(ln, bundle.ServerTLSConfig())
	log.Info("serving the Kubernetes API", "addr", ln.Addr().String(), "kubeconfig", cfg.KubeconfigPath, "startup", time.Since(started).Round(time.Millisecond))
	if cfg.Listening != nil {
		cfg.Listening(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(tlsLn) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close() // watches do not end by themselves: cut them
	}
	log.Info("stopped")
	return nil
}

// firstIP is the first host address of a range: the API server's own
// Service address.
func firstIP(n *net.IPNet) net.IP {
	ip := append(net.IP(nil), n.IP...)
	ip[len(ip)-1]++
	return ip
}

// advertiseAddress is the configured address, else the host's first
// address, else loopback (a machine without a network).
func advertiseAddress(configured string) net.IP {
	if ip := net.ParseIP(configured); ip != nil {
		return ip
	}
	if addrs := hostAddresses(); len(addrs) > 0 {
		return addrs[0]
	}
	return net.IPv4(127, 0, 0, 1)
}

// hostAddresses are the machine's global unicast addresses, for the serving
// certificate.
func hostAddresses() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			out = append(out, n.IP)
		}
	}
	return out
}

// newJoinHandler serves /cacerts and /v1-skiff/node-certs beside the API
// and starts the loop that deletes expired join tokens.
func newJoinHandler(ctx context.Context, api *apiserver.Server, system *auth.User, bundle *certs.Bundle, secret string, members joinSetup, log *slog.Logger) (*join.Handler, error) {
	cs, err := kubernetes.NewForConfig(inProcessConfig(api.Transport(system)))
	if err != nil {
		return nil, err
	}
	caCert, caKey := bundle.CA()
	h, err := join.New(join.Config{CACert: caCert, CAKey: caKey, CAPEM: bundle.CACertPEM(), ServerSecret: secret,
		Client: cs, ServerAddresses: hostAddresses(), ClusterFiles: members.files, Members: members.adder, Logger: log.With("component", "join")})
	if err != nil {
		return nil, err
	}
	go join.RunCleaner(ctx, cs, time.Minute, nil, log.With("component", "join"))
	return h, nil
}
