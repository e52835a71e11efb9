// Package apiendpoints keeps the default/kubernetes Endpoints and
// EndpointSlices listing every live API server, as kube-apiserver's
// "lease" endpoint reconciler does: each server renews a record of its
// own (a coordination.k8s.io/v1 Lease in kube-system, one per server) and
// writes the endpoints from the records that are still fresh, so servers
// that stop renewing drop out. Agents learn the servers from the
// Endpoints (agent/loadbalancer reads every ready address with the port
// named "https").
//
// The records are Leases named LeaseNamePrefix+identity, labelled
// LabelEndpoint="true", with spec.holderIdentity the identity,
// spec.leaseDurationSeconds the writer's TTL, spec.renewTime its last
// renewal and the address as host:port in AnnotationAddress. A record is
// live while renewTime + leaseDurationSeconds is after now (each server
// declares its own TTL, so servers with different intervals agree); the
// reconciling server is always live. Liveness compares the writer's
// clock with the reader's: the servers' clocks must agree within
// TTL − Interval (5 s with the defaults), or a server may drop out
// between two of its renewals. Records expired for more than an hour
// (servers gone for good) are deleted by whichever server sees them.
//
// The Endpoints hold one subset per API port (one subset when all servers
// share a port), addresses in numeric order, IPv4 before IPv6. An
// EndpointSlice holds one address family and one set of ports, so there
// is one slice per (family, port) group of servers: the first group (IPv4
// first, then the lowest port) is the slice named "kubernetes", as
// upstream's; any other is "kubernetes-<ipv4|ipv6>-<port>". Nothing is
// written when the objects already say that.
package apiendpoints

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// The records.
const (
	// LeaseNamespace holds the records.
	LeaseNamespace = metav1.NamespaceSystem
	// LeaseNamePrefix + the server's identity names its record.
	LeaseNamePrefix = "skiff-apiserver-"
	// LabelEndpoint = "true" marks a record.
	LabelEndpoint = "skiff.io/apiserver-endpoint"
	// AnnotationAddress is the server's address as host:port
	// ("10.0.0.1:6443", "[fd00::1]:6443").
	AnnotationAddress = "skiff.io/apiserver-address"
)

// Defaults are upstream's (--endpoint-reconciler-type=lease: reconcile
// every 10 s, a record lasts 15 s).
const (
	DefaultInterval = 10 * time.Second
	DefaultTTL      = 15 * time.Second
)

const (
	serviceName = "kubernetes"
	portName    = "https"
	// sliceManager is the managed-by label of the slices written here (so
	// the extra per-group slices are found and removed when unneeded; the
	// EndpointSlice controllers leave slices of other managers alone).
	sliceManager = "apiserver-endpoints.skiff.io"
	// removeTimeout bounds the removal on the way out of Run.
	removeTimeout = 5 * time.Second
	// gcAfter is how long past its expiry a record of another server is
	// kept before it is deleted.
	gcAfter = time.Hour
	// maxAttempts is how often a write losing a race (conflict, already
	// exists, not found) is retried from a fresh read.
	maxAttempts = 5
)

// Config is what a Reconciler needs.
type Config struct {
	// Client writes the records and the endpoints: it must be allowed to
	// get, list, create, update and delete Leases in kube-system, and
	// Endpoints and EndpointSlices in default (system:apiserver is).
	Client kubernetes.Interface
	// Identity is this server's stable name (its node name); it names
	// the record, so it must make a valid object name after
	// LeaseNamePrefix.
	Identity string
	// IP and Port are the address this server is reached at.
	IP   net.IP
	Port int
	// Interval is the renew and reconcile period (DefaultInterval if 0).
	Interval time.Duration
	// TTL is how long a renewal keeps a server listed; it must exceed
	// Interval and is rounded up to whole seconds (the Lease's unit). If
	// 0 it is 1.5 × Interval, rounded up (DefaultTTL with the default
	// Interval).
	TTL time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Logger receives changes and failures (slog.Default() if nil).
	Logger *slog.Logger
}

// Reconciler keeps this server's record and the kubernetes endpoints.
type Reconciler struct {
	cfg       Config
	log       *slog.Logger
	leaseName string
	self      server

	mu sync.Mutex // serializes Reconcile and the removal
}

// server is one API server's address.
type server struct {
	addr netip.Addr
	port int32
}

func (s server) String() string {
	return netip.AddrPortFrom(s.addr, uint16(s.port)).String()
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Reconciler, error) {
	if cfg.Client == nil {
		return nil, errors.New("apiendpoints: Client is required")
	}
	if cfg.Identity == "" {
		return nil, errors.New("apiendpoints: Identity is required")
	}
	name := LeaseNamePrefix + cfg.Identity
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("apiendpoints: identity %q does not make a valid Lease name: %s", cfg.Identity, strings.Join(errs, "; "))
	}
	addr, ok := netip.AddrFromSlice(cfg.IP)
	addr = addr.Unmap()
	if !ok || addr.IsUnspecified() {
		return nil, fmt.Errorf("apiendpoints: IP %q is not a usable address", cfg.IP)
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("apiendpoints: port %d out of range", cfg.Port)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("apiendpoints: negative Interval %v", cfg.Interval)
	}
	if cfg.TTL == 0 {
		cfg.TTL = cfg.Interval * 3 / 2
	}
	cfg.TTL = (cfg.TTL + time.Second - 1).Truncate(time.Second)
	if cfg.TTL <= cfg.Interval {
		return nil, fmt.Errorf("apiendpoints: TTL %v must exceed Interval %v", cfg.TTL, cfg.Interval)
	}
	if cfg.TTL/time.Second > 1<<31-1 {
		return nil, fmt.Errorf("apiendpoints: TTL %v too long", cfg.TTL)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Reconciler{
		cfg:       cfg,
		log:       log.With("component", "apiserver-endpoints"),
		leaseName: name,
		self:      server{addr: addr, port: int32(cfg.Port)},
	}, nil
}

// Reconcile renews this server's record and writes the Endpoints and
// EndpointSlices to the set of live servers (this one included), writing
// nothing that already matches. If the renewal fails the endpoints are
// left alone.
func (r *Reconciler) Reconcile(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	if err := r.renew(ctx, now); err != nil {
		return fmt.Errorf("apiendpoints: renewing lease %s/%s: %w", LeaseNamespace, r.leaseName, err)
	}
	servers, err := r.liveServers(ctx, now, true)
	if err != nil {
		return fmt.Errorf("apiendpoints: listing the API servers: %w", err)
	}
	return r.write(ctx, servers)
}

// Run reconciles every Interval until ctx ends (a failure is logged and
// retried at the next tick); the first reconcile is an Interval after the
// call, Reconcile being called once before. When ctx ends it removes this
// server: it deletes the record and rewrites the endpoints without it,
// with a fresh context of a few seconds, best effort (failures are
// logged). The last server leaves the endpoints as they are rather than
// empty them, as upstream. Run returns nil once that is done.
func (r *Reconciler) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
			defer cancel()
			if err := r.remove(rctx); err != nil {
				r.log.Warn("removing this server from the kubernetes endpoints", "err", err)
			} else {
				r.log.Info("removed this server from the kubernetes endpoints", "server", r.self.String())
			}
			return nil
		case <-t.C:
			if err := r.Reconcile(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("reconciling the kubernetes endpoints", "err", err)
			}
		}
	}
}

// remove deletes this server's record and writes the endpoints to the
// other live servers, if there are any.
func (r *Reconciler) remove(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.cfg.Client.CoordinationV1().Leases(LeaseNamespace).Delete(ctx, r.leaseName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting lease %s/%s: %w", LeaseNamespace, r.leaseName, err)
	}
	servers, err := r.liveServers(ctx, r.cfg.Now(), false)
	if err != nil {
		return fmt.Errorf("listing the API servers: %w", err)
	}
	if len(servers) == 0 {
		r.log.Info("no other API server is live: the kubernetes endpoints keep this one")
		return nil
	}
	return r.write(ctx, servers)
}

// retryWrite runs attempt until it succeeds, fails otherwise than by
// losing a race to another writer, or has been tried maxAttempts times.
func retryWrite(attempt func() error) error {
	var err error
	for range maxAttempts {
		err = attempt()
		if err == nil || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) {
			return err
		}
	}
	return err
}
