// Package endpointslice keeps the discovery.k8s.io/v1 EndpointSlices of
// every Service with a selector in step with the pods it selects
// (upstream's EndpointSlice controller): one family of slices per address
// type and resolved port list, at most MaxEndpointsPerSlice endpoints
// each, with the ready/serving/terminating conditions proxies and DNS act
// on. Services without a selector are left to whoever manages their
// slices.
package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

const (
	// DefaultMaxEndpointsPerSlice is upstream's default: small enough that
	// one pod changing does not resend thousands of endpoints to every
	// proxy, large enough to keep the number of slices low.
	DefaultMaxEndpointsPerSlice = 100
	// maxEndpointsPerSliceLimit is what the API server accepts.
	maxEndpointsPerSliceLimit = 1000
	// DefaultWorkers is upstream's default number of concurrent service syncs.
	DefaultWorkers = 5
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; Run takes the
	// Service, Pod, Node and EndpointSlice informers from it.
	Informers informers.SharedInformerFactory
	// Recorder receives the warning events about failed writes; when nil,
	// Run records to the API server as "endpointslice-controller".
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// MaxEndpointsPerSlice caps each slice (DefaultMaxEndpointsPerSlice
	// when zero; at most 1000, which the server enforces).
	MaxEndpointsPerSlice int
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
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
	tracker  *tracker
}

// Run keeps EndpointSlices up to date until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("endpointslice controller: Client and Informers are required")
	}
	if cfg.MaxEndpointsPerSlice <= 0 {
		cfg.MaxEndpointsPerSlice = DefaultMaxEndpointsPerSlice
	}
	if cfg.MaxEndpointsPerSlice > maxEndpointsPerSliceLimit {
		return fmt.Errorf("endpointslice controller: MaxEndpointsPerSlice %d is over the limit of %d", cfg.MaxEndpointsPerSlice, maxEndpointsPerSliceLimit)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	c := &controller{cfg: cfg, log: cfg.Logger, recorder: cfg.Recorder, tracker: newTracker()}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		defer b.Shutdown()
		c.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "endpointslice-controller"})
	}
	c.queue = worker.New(worker.Config{Name: "endpointslice", Log: c.log, Message: "endpoint slice sync", Noun: "service",
		// The informer will catch up within moments, or another writer got
		// there first; retry soon without calling it a failure.
		Quiet:        func(err error) bool { return errors.Is(err, errStale) || apierrors.IsConflict(err) },
		QuietMessage: "endpoint slices out of date, retrying"})
	defer c.queue.ShutDown()

	svcInf := cfg.Informers.Core().V1().Services()
	podInf := cfg.Informers.Core().V1().Pods()
	nodeInf := cfg.Informers.Core().V1().Nodes()
	sliceInf := cfg.Informers.Discovery().V1().EndpointSlices()
	c.services, c.pods, c.nodes, c.slices = svcInf.Lister(), podInf.Lister(), nodeInf.Lister(), sliceInf.Lister()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: svcInf.Informer(), Handler: c.queue.Handlers()},
		worker.Subscription{Informer: podInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addPod, UpdateFunc: c.updatePod, DeleteFunc: c.deletePod}},
		worker.Subscription{Informer: nodeInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.nodeChanged, UpdateFunc: c.updateNode, DeleteFunc: c.nodeChanged}},
		worker.Subscription{Informer: sliceInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addSlice, UpdateFunc: c.updateSlice, DeleteFunc: c.deleteSlice}},
	)
	if err != nil {
		return fmt.Errorf("endpointslice controller: add event handler: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	c.queue.Run(ctx, cfg.Workers, c.sync)
	return nil
}

// servicesFor lists the keys of the services in the pod's namespace that
// select it. Services are taken from the cache; with the few services a
// namespace has, a scan is cheaper than maintaining an index.
func (c *controller) servicesFor(pod *corev1.Pod, into map[string]bool) {
	svcs, err := c.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	set := labels.Set(pod.Labels)
	for _, svc := range svcs {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		if labels.SelectorFromValidatedSet(svc.Spec.Selector).Matches(set) {
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

// updatePod enqueues the services of the pod only when something its
// endpoints are made of changed; most pod updates (container statuses,
// annotations) do not concern the slices.
func (c *controller) updatePod(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	labelsChanged := !labels.Equals(old.Labels, cur.Labels)
	if !labelsChanged && !endpointChanged(old, cur) {
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

func endpointChanged(old, cur *corev1.Pod) bool {
	return isPodReady(old) != isPodReady(cur) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		includePod(old) != includePod(cur) ||
		!equalStrings(podIPs(old), podIPs(cur)) ||
		old.Spec.NodeName != cur.Spec.NodeName ||
		old.Spec.Hostname != cur.Spec.Hostname ||
		old.Spec.Subdomain != cur.Spec.Subdomain
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (c *controller) deletePod(obj any) {
	if pod, ok := worker.Unwrap[*corev1.Pod](obj); ok {
		c.addPod(pod)
	}
}

// updateNode reacts only to what endpoints carry from a node, its zone;
// nodes report status every few seconds and that must not resync services.
func (c *controller) updateNode(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Node)
	cur, ok2 := newObj.(*corev1.Node)
	if ok1 && ok2 && old.Labels[corev1.LabelTopologyZone] == cur.Labels[corev1.LabelTopologyZone] {
		return
	}
	c.nodeChanged(newObj)
}

// nodeChanged resyncs the services with pods on a node whose zone may have
// appeared, changed or gone.
func (c *controller) nodeChanged(obj any) {
	node, ok := worker.Unwrap[*corev1.Node](obj)
	if !ok {
		return
	}
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return
	}
	keys := map[string]bool{}
	for _, pod := range pods {
		if pod.Spec.NodeName == node.Name {
			c.servicesFor(pod, keys)
		}
	}
	for k := range keys {
		c.queue.Add(k)
	}
}

// sliceService is the key of the service a slice of this controller
// belongs to, or "" for slices that are someone else's.
func sliceService(s *discovery.EndpointSlice) string {
	name := s.Labels[discovery.LabelServiceName]
	if name == "" || s.Labels[discovery.LabelManagedBy] != ControllerName {
		return ""
	}
	return s.Namespace + "/" + name
}

func (c *controller) addSlice(obj any) {
	s, ok := obj.(*discovery.EndpointSlice)
	if !ok {
		return
	}
	if key := sliceService(s); key != "" && !c.tracker.ownEcho(key, s) {
		c.queue.Add(key)
	}
}

func (c *controller) updateSlice(oldObj, newObj any) {
	old, ok1 := oldObj.(*discovery.EndpointSlice)
	cur, ok2 := newObj.(*discovery.EndpointSlice)
	if !ok1 || !ok2 {
		return
	}
	// A slice relabelled away from its service (or from this controller)
	// is gone as far as that service is concerned.
	if oldKey := sliceService(old); oldKey != "" && oldKey != sliceService(cur) {
		c.tracker.ownDeletion(oldKey, old)
		c.queue.Add(oldKey)
	}
	c.addSlice(cur)
}

func (c *controller) deleteSlice(obj any) {
	s, ok := worker.Unwrap[*discovery.EndpointSlice](obj)
	if !ok {
		return
	}
	if key := sliceService(s); key != "" && !c.tracker.ownDeletion(key, s) {
		c.queue.Add(key)
	}
}

// zoneOf reads a node's zone from the cache; a node not (yet) known simply
// gives no zone, and its arrival resyncs the services concerned.
func (c *controller) zoneOf(name string) (string, bool) {
	node, err := c.nodes.Get(name)
	if err != nil {
		return "", false
	}
	zone, ok := node.Labels[corev1.LabelTopologyZone]
	return zone, ok
}
