// Package servicelb publishes the load balancer status of LoadBalancer
// Services, as k3s's ServiceLB does: with no cloud to provision a balancer,
// the service is reachable on its ports at the addresses of the nodes that
// can serve it, and status.loadBalancer.ingress lists those addresses so
// that clients (kubectl, ingress controllers, external-dns) find them. The
// packet forwarding itself is the node proxy's job, not this package's.
package servicelb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/worker"
)

// DefaultWorkers: status writes are small and rare, two suffice.
const DefaultWorkers = 2

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; Run takes the
	// Service, Node and EndpointSlice informers from it.
	Informers informers.SharedInformerFactory
	// Recorder receives the UpdatedLoadBalancer events; when nil, Run
	// records to the API server as "service-lb-controller".
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many services are synced at once (DefaultWorkers when
	// zero).
	Workers int
}

type controller struct {
	cfg      Config
	log      *slog.Logger
	recorder record.EventRecorder
	queue    *worker.Queue
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
}

// Run keeps load balancer statuses up to date until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("servicelb controller: Client and Informers are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	c := &controller{cfg: cfg, log: cfg.Logger, recorder: cfg.Recorder}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		defer b.Shutdown()
		c.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "service-lb-controller"})
	}
	c.queue = worker.New(worker.Config{Name: "servicelb", Log: c.log, Message: "load balancer status sync", Noun: "service", Quiet: apierrors.IsConflict})
	defer c.queue.ShutDown()

	svcInf := cfg.Informers.Core().V1().Services()
	nodeInf := cfg.Informers.Core().V1().Nodes()
	sliceInf := cfg.Informers.Discovery().V1().EndpointSlices()
	c.services, c.nodes, c.slices = svcInf.Lister(), nodeInf.Lister(), sliceInf.Lister()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: svcInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.enqueue, UpdateFunc: func(_, n any) { c.enqueue(n) }}},
		worker.Subscription{Informer: nodeInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.enqueueAll() },
			UpdateFunc: c.updateNode,
			DeleteFunc: func(any) { c.enqueueAll() },
		}},
		worker.Subscription{Informer: sliceInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.sliceChanged, UpdateFunc: func(_, n any) { c.sliceChanged(n) }, DeleteFunc: c.sliceChanged}},
	)
	if err != nil {
		return fmt.Errorf("servicelb controller: add event handler: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	c.queue.Run(ctx, cfg.Workers, c.sync)
	return nil
}

func (c *controller) enqueue(obj any) {
	svc, ok := obj.(*corev1.Service)
	// Services that are not load balancers only matter while they still
	// carry an ingress to clear.
	if ok && ours(svc) && (wantsLB(svc) || len(svc.Status.LoadBalancer.Ingress) > 0) {
		c.queue.Add(svc.Namespace + "/" + svc.Name)
	}
}

func (c *controller) enqueueAll() {
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		if wantsLB(svc) {
			c.queue.Add(svc.Namespace + "/" + svc.Name)
		}
	}
}

// updateNode ignores the frequent status heartbeats: only what decides
// whether and at which addresses a node serves matters.
func (c *controller) updateNode(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Node)
	cur, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	if nodeReady(old) != nodeReady(cur) || old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		!slices.Equal(old.Status.Addresses, cur.Status.Addresses) ||
		old.Labels[LabelEnableLB] != cur.Labels[LabelEnableLB] || old.Labels[LabelLBPool] != cur.Labels[LabelLBPool] {
		c.enqueueAll()
	}
}

// sliceChanged follows endpoints only for the services whose addresses
// depend on where their pods run.
func (c *controller) sliceChanged(obj any) {
	s, ok := worker.Unwrap[*discovery.EndpointSlice](obj)
	if !ok {
		return
	}
	name := s.Labels[discovery.LabelServiceName]
	if name == "" {
		return
	}
	if svc, err := c.services.Services(s.Namespace).Get(name); err == nil && wantsLB(svc) && localOnly(svc) {
		c.queue.Add(s.Namespace + "/" + name)
	}
}

func localOnly(svc *corev1.Service) bool {
	return svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ours(svc) {
		return nil
	}
	var want []corev1.LoadBalancerIngress
	if wantsLB(svc) {
		nodes, err := c.nodes.List(labels.Everything())
		if err != nil {
			return err
		}
		var local map[string]bool
		if localOnly(svc) {
			eps, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{discovery.LabelServiceName: name}))
			if err != nil {
				return err
			}
			local = localNodes(eps)
		}
		want = desiredIngress(svc, nodes, local)
	}
	have := svc.Status.LoadBalancer.Ingress
	if ingressEqual(have, want) {
		return nil
	}
	updated := svc.DeepCopy()
	updated.Status.LoadBalancer = corev1.LoadBalancerStatus{Ingress: want}
	if _, err := c.cfg.Client.CoreV1().Services(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update load balancer status: %w", err)
	}
	switch {
	case !wantsLB(svc):
		c.recorder.Event(svc, corev1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	case len(want) == 0:
		c.recorder.Event(svc, corev1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer")
	default:
		c.recorder.Eventf(svc, corev1.EventTypeNormal, "UpdatedLoadBalancer", "Updated LoadBalancer with new IPs: %v -> %v", ingressIPs(have), ingressIPs(want))
	}
	return nil
}
