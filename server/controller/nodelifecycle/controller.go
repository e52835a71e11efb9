// Package nodelifecycle judges node health from kubelet heartbeats and acts
// on it, as upstream's node lifecycle and taint eviction controllers do: a
// node whose Lease and Ready heartbeat stop moving has its conditions set to
// Unknown, its pods marked not ready and its "unreachable"/"not-ready"
// taints added, and the NoExecute taints then evict the pods that do not
// tolerate them (or tolerate them only for a while).
package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"skiff/server/controller/worker"
)

// Defaults of the Config knobs, upstream's kube-controller-manager defaults.
const (
	DefaultNodeMonitorPeriod           = 5 * time.Second
	DefaultNodeMonitorGracePeriod      = 40 * time.Second
	DefaultNodeStartupGracePeriod      = 60 * time.Second
	DefaultEvictionLimiterQPS          = 0.1
	DefaultSecondaryEvictionLimiterQPS = 0.01
	DefaultLargeClusterSizeThreshold   = 50
	DefaultUnhealthyZoneThreshold      = 0.55
)

// evictionWorkers delete pods in parallel: a node going away can take many
// pods with it, and each deletion is a round trip.
const evictionWorkers = 4

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is the factory shared with the other controllers; nodes,
	// pods and leases informers are taken from it (one of its own, over
	// Client, when nil).
	Informers informers.SharedInformerFactory
	// Recorder records core/v1 events (one sending to Client as
	// "node-controller" when nil).
	Recorder record.EventRecorder
	Logger   *slog.Logger

	// NodeMonitorPeriod is how often node health is checked (default 5 s).
	NodeMonitorPeriod time.Duration
	// NodeMonitorGracePeriod is how long a node's heartbeats may stand
	// still before it is judged unreachable (default 40 s).
	NodeMonitorGracePeriod time.Duration
	// NodeStartupGracePeriod is how long a node that never posted a Ready
	// condition gets, from when this controller first saw it (default 60 s).
	NodeStartupGracePeriod time.Duration

	// EvictionLimiterQPS is how many nodes per second a healthy zone may
	// have NoExecute-tainted, i.e. evicted (default 0.1: one every 10 s,
	// the first at once). Negative means no limit.
	EvictionLimiterQPS float64
	// SecondaryEvictionLimiterQPS replaces it in a partially disrupted zone
	// larger than LargeClusterSizeThreshold (default 0.01); smaller
	// partially disrupted zones get no new NoExecute taints at all, as
	// upstream. Negative means no limit.
	SecondaryEvictionLimiterQPS float64
	// LargeClusterSizeThreshold is the zone size above which a partially
	// disrupted zone is still evicted from, slowly (default 50).
	LargeClusterSizeThreshold int
	// UnhealthyZoneThreshold is the fraction of not-Ready nodes (with more
	// than two of them) from which a zone is partially disrupted (default
	// 0.55).
	UnhealthyZoneThreshold float64

	// Clock is what heartbeats are timed with (the real clock when nil).
	Clock clock.WithTicker
}

func (cfg Config) withDefaults() (Config, error) {
	if cfg.Client == nil {
		return cfg, errors.New("nodelifecycle: Config.Client is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	durations := []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&cfg.NodeMonitorPeriod, DefaultNodeMonitorPeriod},
		{&cfg.NodeMonitorGracePeriod, DefaultNodeMonitorGracePeriod},
		{&cfg.NodeStartupGracePeriod, DefaultNodeStartupGracePeriod},
	}
	for _, d := range durations {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if cfg.EvictionLimiterQPS == 0 {
		cfg.EvictionLimiterQPS = DefaultEvictionLimiterQPS
	}
	if cfg.SecondaryEvictionLimiterQPS == 0 {
		cfg.SecondaryEvictionLimiterQPS = DefaultSecondaryEvictionLimiterQPS
	}
	if cfg.LargeClusterSizeThreshold <= 0 {
		cfg.LargeClusterSizeThreshold = DefaultLargeClusterSizeThreshold
	}
	if cfg.UnhealthyZoneThreshold <= 0 {
		cfg.UnhealthyZoneThreshold = DefaultUnhealthyZoneThreshold
	}
	return cfg, nil
}

// podsByNode indexes pods by spec.nodeName; the name is this package's so
// it cannot clash with another controller's index on the shared informer.
const podsByNode = "nodelifecycle.skiff/spec.nodeName"

type controller struct {
	cfg    Config
	log    *slog.Logger
	clock  clock.WithTicker
	client kubernetes.Interface
	rec    record.EventRecorder

	nodes  listers.NodeLister
	pods   listers.PodLister
	leases coordlisters.LeaseLister
	podIdx cache.Indexer

	// taintQ holds node names whose taints are to be reconciled.
	taintQ *worker.Queue
	// evictQ holds pod keys to judge against their node's NoExecute
	// taints; a pod tolerating them for a while comes back with AddAfter.
	evictQ *worker.Queue

	// monitor is touched only by the monitor goroutine.
	monitor monitorState

	mu sync.Mutex
	// noExecute is the monitor's verdict per node: which of our NoExecute
	// taints it should carry ("" for none). A node without an entry keeps
	// whatever it has.
	noExecute map[string]string
	// taintSeen is when each NoExecute taint without timeAdded was first
	// seen on a node, to count tolerationSeconds from.
	taintSeen map[string]map[corev1.Taint]time.Time
	// scheduled holds pods waiting out their tolerationSeconds, to tell
	// when an eviction is called off.
	scheduled map[string]time.Time
	// evicted holds the pods we deleted until the informer sees them go:
	// the eviction's own status write would otherwise evict them twice.
	evicted map[string]types.UID
}

// Run judges nodes and evicts pods until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	factory := cfg.Informers
	if factory == nil {
		factory = informers.NewSharedInformerFactory(cfg.Client, 0)
		defer factory.Shutdown()
	}
	if cfg.Recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		defer b.Shutdown()
		cfg.Recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "node-controller"})
	}
	c := newController(cfg, factory)
	nodeInf := factory.Core().V1().Nodes().Informer()
	podInf := factory.Core().V1().Pods().Informer()
	leaseInf := factory.Coordination().V1().Leases().Informer()
	if _, ok := podInf.GetIndexer().GetIndexers()[podsByNode]; !ok {
		if err := podInf.AddIndexers(cache.Indexers{podsByNode: indexPodByNode}); err != nil {
			return fmt.Errorf("index pods by node: %w", err)
		}
	}
	c.podIdx = podInf.GetIndexer()
	unsubscribe, err := c.subscribe(nodeInf, podInf)
	if err != nil {
		return err
	}
	defer unsubscribe()
	defer c.taintQ.ShutDown()
	defer c.evictQ.ShutDown()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodeInf.HasSynced, podInf.HasSynced, leaseInf.HasSynced) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.runMonitor(ctx) })
	wg.Go(func() { c.taintQ.Run(ctx, 1, c.syncTaints) })
	wg.Go(func() { c.evictQ.Run(ctx, evictionWorkers, c.judgePod) })
	wg.Wait()
	return nil
}

func newController(cfg Config, factory informers.SharedInformerFactory) *controller {
	queue := func(name string) *worker.Queue {
		return worker.New(worker.Config{Name: name, Clock: cfg.Clock, Log: cfg.Logger, Message: "node lifecycle sync", Noun: "key"})
	}
	return &controller{
		cfg:       cfg,
		log:       cfg.Logger,
		clock:     cfg.Clock,
		client:    cfg.Client,
		rec:       cfg.Recorder,
		nodes:     factory.Core().V1().Nodes().Lister(),
		pods:      factory.Core().V1().Pods().Lister(),
		leases:    factory.Coordination().V1().Leases().Lister(),
		taintQ:    queue("node_lifecycle_taints"),
		evictQ:    queue("taint_eviction"),
		monitor:   monitorState{health: map[string]*health{}, zones: map[string]*zoneLimiter{}, retry: map[string]bool{}},
		noExecute: map[string]string{},
		taintSeen: map[string]map[corev1.Taint]time.Time{},
		scheduled: map[string]time.Time{},
		evicted:   map[string]types.UID{},
	}
}

func indexPodByNode(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// subscribe watches nodes and pods. Leases need no handler: the monitor
// reads them on its own schedule, as heartbeats are judged by time.
func (c *controller) subscribe(nodeInf, podInf cache.SharedIndexInformer) (unsubscribe func(), err error) {
	enqueuePod := func(obj any) {
		if pod, ok := worker.Unwrap[*corev1.Pod](obj); ok && pod.Spec.NodeName != "" {
			c.evictQ.Add(cache.MetaObjectToName(pod).String())
		}
	}
	_, unsubscribe, err = worker.Subscribe(
		worker.Subscription{Informer: nodeInf, Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.nodeChanged(nil, obj) },
			UpdateFunc: c.nodeChanged,
			DeleteFunc: c.nodeDeleted,
		}},
		worker.Subscription{Informer: podInf, Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueuePod,
			UpdateFunc: func(_, obj any) { enqueuePod(obj) },
			DeleteFunc: enqueuePod,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("watch nodes and pods: %w", err)
	}
	return unsubscribe, nil
}

func (c *controller) nodeChanged(oldObj, obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	c.taintQ.Add(node.Name)
	var old []corev1.Taint
	if o, ok := oldObj.(*corev1.Node); ok {
		old = noExecuteTaints(o.Spec.Taints)
	}
	now := noExecuteTaints(node.Spec.Taints)
	c.noteTaints(node.Name, now)
	if oldObj == nil || !sameTaints(old, now) {
		c.enqueuePodsOn(node.Name)
	}
}

func (c *controller) nodeDeleted(obj any) {
	node, ok := worker.Unwrap[*corev1.Node](obj)
	if !ok {
		return
	}
	c.mu.Lock()
	delete(c.taintSeen, node.Name)
	delete(c.noExecute, node.Name)
	c.mu.Unlock()
	c.enqueuePodsOn(node.Name)
}

func (c *controller) enqueuePodsOn(node string) {
	objs, err := c.podIdx.ByIndex(podsByNode, node)
	if err != nil {
		c.log.Warn("list pods by node", "node", node, "err", err)
		return
	}
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			c.evictQ.Add(cache.MetaObjectToName(pod).String())
		}
	}
}

func (c *controller) podsOn(node string) []*corev1.Pod {
	objs, err := c.podIdx.ByIndex(podsByNode, node)
	if err != nil {
		c.log.Warn("list pods by node", "node", node, "err", err)
		return nil
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	return pods
}
