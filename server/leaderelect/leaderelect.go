// Package leaderelect runs a piece of the control plane only while this
// server holds a coordination.k8s.io/v1 Lease, so that with several servers
// exactly one scheduler and one controller manager act at a time.
package leaderelect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Defaults are upstream's: a leader that cannot renew for RenewDeadline
// stops acting, and a candidate takes over once LeaseDuration has passed
// without a renewal.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Config says which Lease to hold and what to run while holding it.
type Config struct {
	Client kubernetes.Interface
	// Name and Namespace of the Lease (kube-system by default).
	Name      string
	Namespace string
	// Identity is this candidate's holder identity; hostname plus a random
	// suffix by default, as upstream, so two servers on one host differ.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod default to the
	// Default* constants.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// Lead runs while this candidate leads. Its context ends when the
	// lease is lost or Run's context ends; Lead must return then.
	Lead   func(ctx context.Context)
	Logger *slog.Logger
}

// Run campaigns for the lease until ctx ends. After losing the lease it
// waits for Lead to return before campaigning again, so a stale leader never
// acts beside a new one of its own process.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Name == "" || cfg.Lead == nil {
		return errors.New("leaderelect: Client, Name and Lead are required")
	}
	cfg = withDefaults(cfg)
	log := cfg.Logger
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace},
		Client:     cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	for ctx.Err() == nil {
		tracked := &trackingLock{Interface: lock}
		done := make(chan struct{})
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          tracked,
			LeaseDuration: cfg.LeaseDuration,
			RenewDeadline: cfg.RenewDeadline,
			RetryPeriod:   cfg.RetryPeriod,
			// A server shutting down hands the lease over at once instead
			// of making the others wait out its duration.
			ReleaseOnCancel: true,
			Name:            cfg.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					defer close(done)
					log.Info("became leader", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
					cfg.Lead(ctx)
				},
				OnStoppedLeading: func() {
					if ctx.Err() == nil {
						log.Warn("lost the lease; stopping until elected again", "lease", cfg.Namespace+"/"+cfg.Name)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election %s: %w", cfg.Name, err)
		}
		elector.Run(ctx)
		if tracked.held.Load() {
			<-done
		}
	}
	return nil
}

// trackingLock notes whether this candidate ever wrote the lease as its
// holder. client-go starts OnStartedLeading in a goroutine right after such
// a write, so it tells Run whether there is a Lead to wait for.
type trackingLock struct {
	resourcelock.Interface
	held atomic.Bool
}

func (l *trackingLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.held.Store(true)
	}
	return err
}

func (l *trackingLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.held.Store(true)
	}
	return err
}

func withDefaults(cfg Config) Config {
	if cfg.Namespace == "" {
		cfg.Namespace = metav1.NamespaceSystem
	}
	if cfg.Identity == "" {
		host, _ := os.Hostname()
		cfg.Identity = host + "_" + string(uuid.NewUUID())
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = DefaultRenewDeadline
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}
