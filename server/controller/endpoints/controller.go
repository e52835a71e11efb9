// Package endpoints maintains the legacy core/v1 Endpoints object of every
// Service with a selector (upstream's endpoints controller): one object
// named after the service, listing the addresses of the selected pods,
// ready and not ready apart, per set of resolved ports. Newer consumers
// read EndpointSlices; this object is kept for the many that still read
// Endpoints, and so is capped at MaxAddresses.
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/worker"
)

// DefaultWorkers is upstream's default number of concurrent service syncs.
const DefaultWorkers = 5

// leaderAnnotation marks Endpoints used as leader-election locks by old
// components; they have no service and must survive the leftover sweep.
const leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; Run takes the
	// Service, Pod and Endpoints informers from it.
	Informers informers.SharedInformerFactory
	// Recorder receives the warning events about failed writes; when nil,
	// Run records to the API server as "endpoint-controller".
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many services are synced at once (DefaultWorkers when
	// zero).
	Workers int
}

type controller struct {
	cfg       Config
	log       *slog.Logger
	recorder  record.EventRecorder
	queue     *worker.Queue
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	endpoints corelisters.EndpointsLister
	triggers  *triggerTimes
}

// Run keeps Endpoints objects up to date until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("endpoints controller: Client and Informers are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	c := &controller{cfg: cfg, log: cfg.Logger, recorder: cfg.Recorder, triggers: newTriggerTimes()}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		defer b.Shutdown()
		c.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "endpoint-controller"})
	}
	c.queue = worker.New(worker.Config{Name: "endpoints", Log: c.log, Message: "endpoints sync", Noun: "service",
		Quiet: func(err error) bool { return errors.Is(err, errConflict) }})
	defer c.queue.ShutDown()

	svcInf := cfg.Informers.Core().V1().Services()
	podInf := cfg.Informers.Core().V1().Pods()
	epInf := cfg.Informers.Core().V1().Endpoints()
	c.services, c.pods, c.endpoints = svcInf.Lister(), podInf.Lister(), epInf.Lister()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: svcInf.Informer(), Handler: c.queue.Handlers()},
		worker.Subscription{Informer: podInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addPod, UpdateFunc: c.updatePod, DeleteFunc: c.deletePod}},
		// Someone else's change to (or deletion of) an Endpoints object
		// of a Service is undone; the controller's own writes come back
		// too, and sync then finds nothing to do.
		worker.Subscription{Informer: epInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{UpdateFunc: c.updateEndpoints, DeleteFunc: c.queue.Enqueue}},
	)
	if err != nil {
		return fmt.Errorf("endpoints controller: add event handler: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	c.sweepLeftovers()
	c.queue.Run(ctx, cfg.Workers, c.sync)
	return nil
}

// sweepLeftovers queues the Endpoints whose service went while the
// controller was not running; their sync deletes them.
func (c *controller) sweepLeftovers() {
	eps, err := c.endpoints.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ep := range eps {
		if _, leader := ep.Annotations[leaderAnnotation]; leader {
			continue
		}
		if _, err := c.services.Services(ep.Namespace).Get(ep.Name); err != nil {
			c.queue.Add(ep.Namespace + "/" + ep.Name)
		}
	}
}

// updateEndpoints queues the Endpoints of an existing Service only. Those
// without a Service are someone's own (made by hand, as upstream allows),
// left alone as upstream leaves them: only a Service's deletion, or the
// sweep at start, removes the Endpoints it leaves behind.
func (c *controller) updateEndpoints(_, cur any) {
	ep, ok := cur.(*corev1.Endpoints)
	if !ok {
		return
	}
	if _, err := c.services.Services(ep.Namespace).Get(ep.Name); err == nil {
		c.queue.Enqueue(ep)
	}
}

// servicesFor adds the keys of the services in the pod's namespace that
// select it.
func (c *controller) servicesFor(pod *corev1.Pod, into map[string]bool) {
	svcs, err := c.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	set := labels.Set(pod.Labels)
	for _, svc := range svcs {
		if len(svc.Spec.Selector) > 0 && labels.SelectorFromValidatedSet(svc.Spec.Selector).Matches(set) {
			into[svc.Namespace+"/"+svc.Name] = true
		}
	}
}

func (c *controller) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	keys := map[string]bool{}
	c.servicesFor(pod, keys)
	for k := range keys {
		c.queue.Add(k)
	}
}

// updatePod skips pod updates that change nothing an address is made of,
// which is most of them.
func (c *controller) updatePod(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	labelsChanged := !labels.Equals(old.Labels, cur.Labels)
	if !labelsChanged && !addressChanged(old, cur) {
		return
	}
	keys := map[string]bool{}
	c.servicesFor(cur, keys)
	if labelsChanged {
		c.servicesFor(old, keys)
	}
	for k := range keys {
		c.queue.Add(k)
	}
}

func addressChanged(old, cur *corev1.Pod) bool {
	return isPodReady(old) != isPodReady(cur) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		old.Status.Phase != cur.Status.Phase ||
		old.Status.PodIP != cur.Status.PodIP ||
		!slices.Equal(old.Status.PodIPs, cur.Status.PodIPs) ||
		old.Spec.NodeName != cur.Spec.NodeName ||
		old.Spec.Hostname != cur.Spec.Hostname ||
		old.Spec.Subdomain != cur.Spec.Subdomain
}

func (c *controller) deletePod(obj any) {
	if pod, ok := worker.Unwrap[*corev1.Pod](obj); ok {
		c.addPod(pod)
	}
}
