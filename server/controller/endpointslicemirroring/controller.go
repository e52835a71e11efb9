// Package endpointslicemirroring mirrors the Endpoints of Services without
// a selector into EndpointSlices (upstream's endpointslice-mirroring
// controller): such Endpoints are written by hand or by an outside
// controller, and consumers that read only EndpointSlices (the proxy, DNS)
// must see them too. Endpoints labelled skip-mirror, leader-election locks
// and the Endpoints of Services with a selector (whose slices the
// endpointslice controller makes) are not mirrored.
package endpointslicemirroring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/worker"
)

const (
	// ControllerName is the managed-by label value of mirrored slices.
	ControllerName = "endpointslicemirroring-controller.k8s.io"
	// DefaultWorkers is upstream's --mirroring-concurrent-service-endpoint-syncs.
	DefaultWorkers = 5
	// leaderAnnotation marks Endpoints used as leader-election locks.
	leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; Run takes the
	// Endpoints, Service and EndpointSlice informers from it.
	Informers informers.SharedInformerFactory
	// Recorder receives the warnings about addresses left unmirrored.
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many Endpoints are synced at once (DefaultWorkers
	// when zero).
	Workers int
	// MaxEndpointsPerSubset caps the addresses mirrored per subset and the
	// endpoints per slice (MaxEndpointsPerSubset when zero).
	MaxEndpointsPerSubset int
}

type controller struct {
	cfg       Config
	log       *slog.Logger
	queue     *worker.Queue
	endpoints corelisters.EndpointsLister
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	writes    *writeTracker
}

// Run mirrors Endpoints until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return errors.New("endpointslicemirroring controller: Client, Informers and Recorder are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.MaxEndpointsPerSubset <= 0 {
		cfg.MaxEndpointsPerSubset = MaxEndpointsPerSubset
	}
	c := &controller{cfg: cfg, log: cfg.Logger, writes: newWriteTracker()}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.queue = worker.New(worker.Config{Name: "endpoint_slice_mirroring", Log: c.log, Message: "endpointslice mirroring sync", Noun: "endpoints",
		Quiet: func(err error) bool { return errors.Is(err, errStale) }})
	defer c.queue.ShutDown()

	epInf := cfg.Informers.Core().V1().Endpoints()
	svcInf := cfg.Informers.Core().V1().Services()
	sliceInf := cfg.Informers.Discovery().V1().EndpointSlices()
	c.endpoints, c.services, c.slices = epInf.Lister(), svcInf.Lister(), sliceInf.Lister()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: epInf.Informer(), Handler: c.queue.Handlers()},
		worker.Subscription{Informer: svcInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: c.serviceEvent, DeleteFunc: c.serviceEvent, UpdateFunc: c.serviceUpdate}},
		// Someone else's change to a mirrored slice is undone.
		worker.Subscription{Informer: sliceInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: c.sliceEvent, DeleteFunc: c.sliceDeleted, UpdateFunc: func(_, cur any) { c.sliceEvent(cur) }}},
	)
	if err != nil {
		return fmt.Errorf("endpointslicemirroring controller: add event handler: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	c.queue.Run(ctx, cfg.Workers, c.sync)
	return nil
}

// serviceEvent: a selector-less Service coming or going starts or stops
// the mirroring of its Endpoints.
func (c *controller) serviceEvent(obj any) {
	if svc, ok := worker.Unwrap[*corev1.Service](obj); ok && svc.Spec.Selector == nil {
		c.queue.Enqueue(svc)
	}
}

func (c *controller) serviceUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Service)
	cur, ok2 := newObj.(*corev1.Service)
	if ok1 && ok2 && (old.Spec.Selector == nil) != (cur.Spec.Selector == nil) {
		c.queue.Enqueue(cur)
	}
}

func (c *controller) sliceEvent(obj any) {
	s, ok := worker.Unwrap[*discovery.EndpointSlice](obj)
	if !ok || s.Labels[discovery.LabelManagedBy] != ControllerName {
		return
	}
	if name := s.Labels[discovery.LabelServiceName]; name != "" {
		c.queue.Add(s.Namespace + "/" + name)
	}
}

// sliceDeleted: a slice deleted by anyone is no longer waited for.
func (c *controller) sliceDeleted(obj any) {
	if s, ok := worker.Unwrap[*discovery.EndpointSlice](obj); ok {
		c.writes.forget(s.Namespace+"/"+s.Labels[discovery.LabelServiceName], s)
	}
	c.sliceEvent(obj)
}

// shouldMirror: Endpoints someone asked not to mirror, and leader-election
// locks, stay out of the slices.
func shouldMirror(ep *corev1.Endpoints) bool {
	if ep.Labels[discovery.LabelSkipMirror] == "true" {
		return false
	}
	_, leader := ep.Annotations[leaderAnnotation]
	return !leader
}
