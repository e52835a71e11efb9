// Package nodeipam gives every Node its pod CIDRs (upstream's node IPAM
// controller with the range allocator): spec.podCIDR and spec.podCIDRs
// are cut from the cluster CIDR, written once (the API server refuses to
// change them once set), and given back when the node is deleted.
//
// Which subnet belongs to which node is not stored anywhere but in the
// nodes themselves: on start the controller reads every node's pod CIDRs
// back before handing out new ones, so a restart never hands out a subnet
// a node already has.
package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/worker"
)

// Event reasons, as upstream's (CIDRAssigned is ours: upstream only logs).
const (
	ReasonCIDRNotAvailable      = "CIDRNotAvailable"
	ReasonCIDRAssignmentFailed  = "CIDRAssignmentFailed"
	ReasonCIDRAssigned          = "CIDRAssigned"
	defaultNodeCIDRMaskSize     = 24
	defaultNodeCIDRMaskSizeIPv6 = 64
	// fullRetry is how often a node waiting for a subnet looks again.
	fullRetry = 30 * time.Second
)

// DefaultClusterCIDR is k3s's default pod range.
const DefaultClusterCIDR = "10.42.0.0/16"

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; the node informer
	// is taken from it.
	Informers informers.SharedInformerFactory
	// Recorder records the core/v1 Events kubectl describe node shows
	// (none are recorded when nil).
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// ClusterCIDR is the IPv4 range node pod CIDRs are cut from
	// (default 10.42.0.0/16, as k3s).
	ClusterCIDR *net.IPNet
	// NodeCIDRMaskSize is the prefix length of each node's IPv4 pod CIDR
	// (default 24: 254 pods a node, 256 nodes in the default range).
	NodeCIDRMaskSize int
	// ClusterCIDRIPv6 makes the cluster dual-stack: every node then also
	// gets an IPv6 pod CIDR from it, second in spec.podCIDRs (default
	// none: IPv4 only).
	ClusterCIDRIPv6 *net.IPNet
	// NodeCIDRMaskSizeIPv6 is the prefix length of each node's IPv6 pod
	// CIDR (default 64).
	NodeCIDRMaskSizeIPv6 int
}

// sets checks the ranges and cuts them into node subnets.
func (cfg *Config) sets() ([]*cidrSet, error) {
	v4 := cfg.ClusterCIDR
	if v4 == nil {
		_, v4, _ = net.ParseCIDR(DefaultClusterCIDR)
	}
	if _, bits := v4.Mask.Size(); bits != 32 || v4.IP.To4() == nil {
		return nil, fmt.Errorf("nodeipam: cluster CIDR %v is not IPv4", v4)
	}
	s4, err := newCIDRSet(v4, orDefault(cfg.NodeCIDRMaskSize, defaultNodeCIDRMaskSize))
	if err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	if cfg.ClusterCIDRIPv6 == nil {
		return []*cidrSet{s4}, nil
	}
	if _, bits := cfg.ClusterCIDRIPv6.Mask.Size(); bits != 128 || cfg.ClusterCIDRIPv6.IP.To4() != nil {
		return nil, fmt.Errorf("nodeipam: cluster CIDR %v is not IPv6", cfg.ClusterCIDRIPv6)
	}
	s6, err := newCIDRSet(cfg.ClusterCIDRIPv6, orDefault(cfg.NodeCIDRMaskSizeIPv6, defaultNodeCIDRMaskSizeIPv6))
	if err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	return []*cidrSet{s4, s6}, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

type controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	alloc    *allocator
	nodes    corelisters.NodeLister
	q        *worker.Queue

	mu sync.Mutex
	// waiting are the nodes refused for want of a free subnet; they are
	// offered again as soon as one is freed, not only at their retry.
	waiting map[string]bool
}

// Run assigns pod CIDRs until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("nodeipam: Client and Informers are required")
	}
	sets, err := cfg.sets()
	if err != nil {
		return err
	}
	c := &controller{
		client:   cfg.Client,
		recorder: cfg.Recorder,
		log:      cfg.Logger,
		alloc:    newAllocator(sets...),
		nodes:    cfg.Informers.Core().V1().Nodes().Lister(),
		waiting:  map[string]bool{},
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.q = worker.New(worker.Config{Name: "nodeipam", Log: c.log, Message: "node pod CIDR", Noun: "node"})
	defer c.q.ShutDown()
	synced, unsubscribe, err := worker.Subscribe(worker.Subscription{
		Informer: cfg.Informers.Core().V1().Nodes().Informer(),
		Handler:  cache.ResourceEventHandlerFuncs{AddFunc: c.q.Enqueue, UpdateFunc: c.updated, DeleteFunc: c.q.Enqueue},
	})
	if err != nil {
		return fmt.Errorf("nodeipam: watch nodes: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	if err := c.rebuild(); err != nil {
		return err
	}
	// One worker: allocation is quick, and a single writer keeps the
	// record of held subnets simple to reason about.
	c.q.Run(ctx, 1, c.syncOrWait)
	return nil
}

// updated skips the many node updates (status, heartbeats, labels) that
// have nothing to do with pod CIDRs.
func (c *controller) updated(old, cur any) {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := cur.(*corev1.Node)
	if ok1 && ok2 && o.UID == n.UID && len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDR == o.Spec.PodCIDR && slices.Equal(n.Spec.PodCIDRs, o.Spec.PodCIDRs) {
		return
	}
	c.q.Enqueue(cur)
}

// rebuild records the pod CIDRs every existing node has, before any new
// one is handed out.
func (c *controller) rebuild() error {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("nodeipam: list nodes: %w", err)
	}
	for _, n := range nodes {
		if hasCIDRs(n) {
			c.occupy(n)
		}
	}
	return nil
}

// syncOrWait syncs a node; one refused for want of a free subnet is not
// failing, only waiting.
func (c *controller) syncOrWait(ctx context.Context, name string) error {
	err := c.sync(ctx, name)
	if errors.Is(err, errFull) {
		// Freeing a subnet wakes the node at once; the retry is only a
		// safety net, and backing off further would not make it cheaper.
		c.log.Warn("node pod CIDR", "node", name, "err", err)
		c.q.AddAfter(name, fullRetry)
		return nil
	}
	return err
}

// wake offers the nodes waiting for a subnet again: one was just freed.
func (c *controller) wake() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.waiting {
		c.q.Add(name)
	}
	clear(c.waiting)
}

func (c *controller) setWaiting(name string, wait bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wait {
		c.waiting[name] = true
	} else {
		delete(c.waiting, name)
	}
}
