// Package nodestatus does the kubelet's node-status duties: it registers the
// Node object (labels, taints, capacity, addresses, system info), keeps its
// status and conditions current, renews the node's Lease in kube-node-lease,
// waits for the podCIDR the node IPAM controller assigns, and watches the
// other nodes so the pod network can route to them.
package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Well-known labels the Node carries.
const (
	LabelHostname         = "kubernetes.io/hostname"
	LabelOS               = "kubernetes.io/os"
	LabelArch             = "kubernetes.io/arch"
	LabelBetaOS           = "beta.kubernetes.io/os"
	LabelBetaArch         = "beta.kubernetes.io/arch"
	LabelInstanceType     = "node.kubernetes.io/instance-type"
	LabelBetaInstanceType = "beta.kubernetes.io/instance-type"
	LabelControlPlane     = "node-role.kubernetes.io/control-plane"
	// InstanceType is the instance-type labels' value (k3s uses "k3s").
	InstanceType = "skiff"
)

// LeaseNamespace holds every node's Lease.
const LeaseNamespace = "kube-node-lease"

// Defaults for the Config fields left zero.
const (
	DefaultKubeletPort    = 10250
	DefaultLeaseDuration  = 40 * time.Second
	DefaultRenewInterval  = 10 * time.Second
	DefaultStatusInterval = 10 * time.Second
	DefaultReadyPoll      = time.Second
	DefaultRuntimeVersion = "containerd://2.4.2"
)

const (
	// podCIDRRecheck is how long WaitForPodCIDR trusts a watch before it
	// reads the Node again.
	podCIDRRecheck = 2 * time.Second
	// The kubelet reports at most 50 images, with at most 5 names each.
	maxImagesInNodeStatus = 50
	maxImageNamesPerImage = 5
	// registerBackoff is the pause between failed registrations in Run.
	registerBackoff = time.Second
)

// Config is what the reporter needs; NodeName, Client and DataDir are
// required, everything else has a default.
type Config struct {
	// NodeName is the Node's name (and its kubernetes.io/hostname label).
	NodeName string
	// Client talks to the API server with the node's credentials.
	Client kubernetes.Interface
	// NodeIPs are the InternalIP addresses (--node-ip); empty means
	// DetectNodeIPs.
	NodeIPs []net.IP
	// Labels are the user's --node-label values, set at every Register.
	Labels map[string]string
	// Taints are the --node-taint values, set only when the Node is created
	// (as the kubelet's --register-with-taints).
	Taints []corev1.Taint
	// ControlPlane adds node-role.kubernetes.io/control-plane="true".
	ControlPlane bool
	// KubeletPort is status.daemonEndpoints.kubeletEndpoint.port (10250).
	KubeletPort int
	// DataDir is the filesystem whose size is ephemeral-storage capacity.
	DataDir string
	// Annotations returns annotations to merge into the Node (the pod
	// network's); called at every status sync; optional.
	Annotations func() map[string]string
	// Images lists the images present on the node; optional.
	Images func(ctx context.Context) ([]corev1.ContainerImage, error)
	// Ready reports nil when the runtime and the pod network are ready,
	// else an error whose text is the Ready=False condition's message. It
	// is polled every ReadyPoll, so it must be cheap; optional (nil: ready).
	Ready func() error
	// Pressure reports memory, disk and PID pressure; optional (none).
	Pressure func() (memory, disk, pid bool)
	// Capacity entries replace the measured ones (tests, odd machines).
	Capacity corev1.ResourceList
	// Reserved is subtracted from capacity to give allocatable; optional.
	Reserved corev1.ResourceList
	// LeaseDuration is the Lease's leaseDurationSeconds (40 s).
	LeaseDuration time.Duration
	// RenewInterval is how often the Lease is renewed (10 s).
	RenewInterval time.Duration
	// StatusInterval is how often the full status is posted (10 s).
	StatusInterval time.Duration
	// ReadyPoll is how often Ready is polled for a change (1 s).
	ReadyPoll time.Duration
	// KubeletVersion is status.nodeInfo.kubeletVersion (and kubeProxyVersion).
	KubeletVersion string
	// RuntimeVersion is status.nodeInfo.containerRuntimeVersion
	// ("containerd://2.4.2").
	RuntimeVersion string
	// Logger receives renew and sync failures; optional.
	Logger *slog.Logger

	// hostRoot prefixes the host files read for system info (tests only).
	hostRoot string
	// now is the clock (tests only).
	now func() time.Time
}

// ErrConfig is wrapped by New for an incomplete configuration.
var ErrConfig = errors.New("nodestatus: bad config")

// Reporter keeps one Node and its Lease current.
type Reporter struct {
	cfg     Config
	host    host
	trigger chan struct{}

	mu       sync.Mutex
	nodeUID  types.UID
	lease    *coordinationv1.Lease // as last written
	lastErr  string                // last Ready() message, "" for ready
	readySet bool
}

// New checks cfg, fills defaults and detects the node IPs if none are given.
func New(cfg Config) (*Reporter, error) {
	if cfg.NodeName == "" || cfg.Client == nil || cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: NodeName, Client and DataDir are required", ErrConfig)
	}
	h := host{root: cfg.hostRoot}
	if len(cfg.NodeIPs) == 0 {
		ips, err := h.detectNodeIPs()
		if err != nil {
			return nil, err
		}
		cfg.NodeIPs = ips
	}
	setDefaults(&cfg)
	return &Reporter{cfg: cfg, host: h, trigger: make(chan struct{}, 1)}, nil
}

func setDefaults(cfg *Config) {
	if cfg.KubeletPort == 0 {
		cfg.KubeletPort = DefaultKubeletPort
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = DefaultRenewInterval
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = DefaultStatusInterval
	}
	if cfg.ReadyPoll <= 0 {
		cfg.ReadyPoll = DefaultReadyPoll
	}
	if cfg.RuntimeVersion == "" {
		cfg.RuntimeVersion = DefaultRuntimeVersion
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
}

// Trigger asks Run to post the full status now (coalesced with any pending
// request); it never blocks.
func (r *Reporter) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Run registers the Node (retrying until it succeeds), then renews the Lease
// every RenewInterval and posts the status every StatusInterval, when
// Trigger is called, and as soon as Ready changes. It returns nil when ctx
// ends.
func (r *Reporter) Run(ctx context.Context) error {
	for {
		_, err := r.Register(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		r.cfg.Logger.Warn("register node", "node", r.cfg.NodeName, "err", err)
		if !waitTick(ctx, registerBackoff) {
			return nil
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.leaseLoop(ctx) })
	wg.Go(func() { r.readyWatch(ctx) })
	r.statusLoop(ctx)
	wg.Wait()
	return nil
}

// waitTick waits d and reports true, or false as soon as ctx ends.
func waitTick(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (r *Reporter) statusLoop(ctx context.Context) {
	tick := time.NewTicker(r.cfg.StatusInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.trigger:
		}
		if err := r.SyncStatus(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("update node status", "node", r.cfg.NodeName, "err", err)
		}
	}
}

func (r *Reporter) leaseLoop(ctx context.Context) {
	tick := time.NewTicker(r.cfg.RenewInterval)
	defer tick.Stop()
	for {
		if err := r.RenewLease(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("renew node lease", "node", r.cfg.NodeName, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readyWatch triggers a status post whenever Ready's answer changes.
func (r *Reporter) readyWatch(ctx context.Context) {
	if r.cfg.Ready == nil {
		return
	}
	tick := time.NewTicker(r.cfg.ReadyPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		msg := readyMessage(r.cfg.Ready)
		r.mu.Lock()
		changed := r.readySet && msg != r.lastErr
		r.mu.Unlock()
		if changed {
			r.Trigger()
		}
	}
}

func readyMessage(ready func() error) string {
	if ready == nil {
		return ""
	}
	if err := ready(); err != nil {
		if msg := err.Error(); msg != "" {
			return msg
		}
		return "not ready"
	}
	return ""
}

// defaultLabels are the labels the kubelet (and k3s) always set.
func (r *Reporter) defaultLabels() map[string]string {
	l := map[string]string{
		LabelHostname:         r.cfg.NodeName,
		LabelOS:               runtime.GOOS,
		LabelArch:             runtime.GOARCH,
		LabelBetaOS:           runtime.GOOS,
		LabelBetaArch:         runtime.GOARCH,
		LabelInstanceType:     InstanceType,
		LabelBetaInstanceType: InstanceType,
	}
	if r.cfg.ControlPlane {
		l[LabelControlPlane] = "true"
	}
	return l
}

// wantLabels are the default labels plus the user's (which win).
func (r *Reporter) wantLabels() map[string]string {
	l := r.defaultLabels()
	for k, v := range r.cfg.Labels {
		l[k] = v
	}
	return l
}
