// Package servicecidr looks after ServiceCIDR objects (upstream's
// service-cidr-controller): a new one gets the protection finalizer and
// then Ready=True, which is what lets the API server's allocator hand out
// its addresses; one being deleted keeps its finalizer, with Ready=False,
// while any Service address (IPAddress made by the allocator) lies in it
// and in no other ServiceCIDR, and loses it once none does.
package servicecidr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"skiff/server/controller/worker"
)

const (
	// Finalizer is upstream's protection finalizer.
	Finalizer = "networking.k8s.io/service-cidr-finalizer"
	// managedBy is the label value of the allocator's IPAddresses.
	managedBy = "ipallocator.k8s.io"
	// ReasonTerminating is the Ready=False reason while addresses remain.
	ReasonTerminating = networkingv1.ServiceCIDRReasonTerminating
	// DeletionGrace is how long a deleted ServiceCIDR with no addresses
	// keeps its finalizer: an API server whose cache has not yet seen the
	// deletion may still be allocating from it.
	DeletionGrace = 10 * time.Second
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; Run takes the
	// ServiceCIDR and IPAddress informers from it.
	Informers informers.SharedInformerFactory
	Logger    *slog.Logger
	// Clock times the deletion grace (the real clock when nil).
	Clock clock.WithTicker
	// Grace overrides DeletionGrace (tests); zero means DeletionGrace.
	Grace time.Duration
}

type controller struct {
	cfg   Config
	clock clock.WithTicker
	grace time.Duration
	queue *worker.Queue
	cidrs networkinglisters.ServiceCIDRLister
	ips   networkinglisters.IPAddressLister
}

// Run looks after ServiceCIDRs until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("servicecidr controller: Client and Informers are required")
	}
	c := &controller{cfg: cfg, clock: cfg.Clock, grace: cfg.Grace}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.grace <= 0 {
		c.grace = DeletionGrace
	}
	c.queue = worker.New(worker.Config{Name: "servicecidrs", Clock: c.clock, Log: cfg.Logger, Message: "servicecidr sync", Noun: "servicecidr",
		Quiet: apierrors.IsConflict})
	defer c.queue.ShutDown()
	cidrInf := cfg.Informers.Networking().V1().ServiceCIDRs()
	ipInf := cfg.Informers.Networking().V1().IPAddresses()
	c.cidrs, c.ips = cidrInf.Lister(), ipInf.Lister()
	ipEvent := func(obj any) {
		if ip, ok := worker.Unwrap[*networkingv1.IPAddress](obj); ok {
			c.enqueueContaining(ip)
		}
	}
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: cidrInf.Informer(), Handler: c.queue.Handlers()},
		// An address going may unblock a deletion; one coming may block it.
		worker.Subscription{Informer: ipInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: ipEvent, DeleteFunc: ipEvent}},
	)
	if err != nil {
		return fmt.Errorf("servicecidr controller: add event handler: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	c.queue.Run(ctx, 1, c.sync)
	return nil
}

// enqueueContaining queues the ServiceCIDRs an allocator address lies in.
func (c *controller) enqueueContaining(ip *networkingv1.IPAddress) {
	addr, err := netip.ParseAddr(ip.Name)
	if err != nil || ip.Labels[networkingv1.LabelManagedBy] != managedBy {
		return
	}
	for _, cidr := range c.containing(addr) {
		c.queue.Add(cidr.Name)
	}
}

// containing are the ServiceCIDRs one of whose ranges holds addr.
func (c *controller) containing(addr netip.Addr) []*networkingv1.ServiceCIDR {
	all, err := c.cidrs.List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*networkingv1.ServiceCIDR
	for _, cidr := range all {
		for _, s := range cidr.Spec.CIDRs {
			if p, err := netip.ParsePrefix(s); err == nil && p.Contains(addr) {
				out = append(out, cidr)
				break
			}
		}
	}
	return out
}

func (c *controller) sync(ctx context.Context, name string) error {
	cidr, err := c.cidrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cidr.DeletionTimestamp != nil {
		return c.syncDeleting(ctx, cidr)
	}
	if !slices.Contains(cidr.Finalizers, Finalizer) {
		// The finalizer first: an address handed out of a ServiceCIDR
		// must keep it from going.
		cp := cidr.DeepCopy()
		cp.Finalizers = append(cp.Finalizers, Finalizer)
		if cidr, err = c.cfg.Client.NetworkingV1().ServiceCIDRs().Update(ctx, cp, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("add finalizer: %w", err)
		}
	}
	return c.setReady(ctx, cidr, metav1.ConditionTrue, "", "Kubernetes Service CIDR is ready")
}

func (c *controller) syncDeleting(ctx context.Context, cidr *networkingv1.ServiceCIDR) error {
	if !slices.Contains(cidr.Finalizers, Finalizer) {
		return nil
	}
	if c.inUse(cidr) {
		return c.setReady(ctx, cidr, metav1.ConditionFalse, ReasonTerminating,
			"There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR")
	}
	if wait := c.grace - c.clock.Since(cidr.DeletionTimestamp.Time); wait > 0 {
		c.queue.AddAfter(cidr.Name, wait)
		return nil
	}
	cp := cidr.DeepCopy()
	cp.Finalizers = slices.DeleteFunc(cp.Finalizers, func(f string) bool { return f == Finalizer })
	if _, err := c.cfg.Client.NetworkingV1().ServiceCIDRs().Update(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// inUse reports whether an allocator address lies in cidr and in no other
// ServiceCIDR that is staying. A ServiceCIDR whose ranges all lie in other
// ServiceCIDRs blocks nothing.
func (c *controller) inUse(cidr *networkingv1.ServiceCIDR) bool {
	ips, err := c.ips.List(labels.SelectorFromSet(labels.Set{networkingv1.LabelManagedBy: managedBy}))
	if err != nil {
		return true
	}
	for _, ip := range ips {
		addr, err := netip.ParseAddr(ip.Name)
		if err != nil {
			continue
		}
		holders := c.containing(addr)
		if len(holders) == 1 && holders[0].Name == cidr.Name {
			return true
		}
	}
	return false
}

func (c *controller) setReady(ctx context.Context, cidr *networkingv1.ServiceCIDR, status metav1.ConditionStatus, reason, message string) error {
	reason = orDefault(reason, "Ready") // a condition must have one
	cur := meta.FindStatusCondition(cidr.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
	if cur != nil && cur.Status == status && (status == metav1.ConditionTrue || cur.Reason == reason && cur.Message == message) {
		return nil // a ready one keeps whatever words it was made ready with
	}
	cp := cidr.DeepCopy()
	meta.SetStatusCondition(&cp.Status.Conditions, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady,
		Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	if _, err := c.cfg.Client.NetworkingV1().ServiceCIDRs().UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
