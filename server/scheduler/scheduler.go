// Package scheduler is skiff's kube-scheduler: it watches pods no node has
// been chosen for, picks one with the algorithm package's filters and
// scores, and binds the pod there.
//
// A scheduling loop pops the most important pending pod, refreshes a
// snapshot of the cluster from the cache, runs the algorithm, assumes the
// pod onto the chosen node in the cache and hands the binding to a
// goroutine, so that the next pod is scheduled while the API server commits
// the last binding. A pod that fits nowhere may preempt lower-priority
// pods; otherwise its PodScheduled condition says why and it waits for a
// cluster change that may help it.
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/scheduler/algorithm"
)

// Config wires the scheduler.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with other controllers; the scheduler uses its
	// pods, nodes, namespaces, services, replicationcontrollers,
	// apps/v1 replicasets and statefulsets, and policy/v1
	// poddisruptionbudgets.
	Informers informers.SharedInformerFactory
	// Recorder records core/v1 Events (default: one writing through
	// Client as component "default-scheduler").
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Settings come from the configuration file (LoadConfig); the zero
	// value is upstream's default profile.
	Settings
	// BindConcurrency bounds the bindings and preemption deletions in
	// flight (default 256): enough to keep a group-committing store busy,
	// few enough that a slow API server pushes back on the loop.
	BindConcurrency int
	// StatusWorkers write PodScheduled conditions and nominations
	// (default 4).
	StatusWorkers int
}

type sched struct {
	cfg      Config
	log      *slog.Logger
	recorder record.EventRecorder
	algs     map[string]*algorithm.Algorithm
	cache    *clusterCache
	queue    *queue
	snap     *snapshot
	status   *statusWriter
	pods     corelisters.PodLister
	pdbs     policylisters.PodDisruptionBudgetLister
	// sem bounds the goroutines making API writes; wg waits for them.
	sem chan struct{}
	wg  sync.WaitGroup
}

func (c *Config) defaults() error {
	if c.Client == nil || c.Informers == nil {
		return fmt.Errorf("scheduler: Client and Informers are required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.Profiles) == 0 {
		c.Profiles = []algorithm.Profile{algorithm.DefaultProfile()}
	}
	if c.InitialBackoff <= 0 {
		c.InitialBackoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 10 * time.Second
	}
	c.MaxBackoff = max(c.MaxBackoff, c.InitialBackoff)
	if c.BindConcurrency <= 0 {
		c.BindConcurrency = 256
	}
	if c.StatusWorkers <= 0 {
		c.StatusWorkers = 4
	}
	return nil
}

// Run schedules pods until ctx ends, then waits for its goroutines.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	s := &sched{cfg: cfg, log: cfg.Logger, algs: map[string]*algorithm.Algorithm{}, cache: newClusterCache(), queue: newQueue(cfg.InitialBackoff, cfg.MaxBackoff), sem: make(chan struct{}, cfg.BindConcurrency)}
	for _, p := range cfg.Profiles {
		a, err := algorithm.New(p, algorithm.Options{PercentageOfNodesToScore: cfg.PercentageOfNodesToScore, Parallelism: cfg.Parallelism})
		if err != nil {
			return fmt.Errorf("scheduler profile %q: %w", p.SchedulerName, err)
		}
		s.algs[p.SchedulerName] = a
	}
	s.recorder = cfg.Recorder
	if s.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		defer b.Shutdown()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		s.recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: v1.DefaultSchedulerName})
	}
	f := cfg.Informers
	podInf, nodeInf := f.Core().V1().Pods(), f.Core().V1().Nodes()
	s.pods, s.pdbs = podInf.Lister(), f.Policy().V1().PodDisruptionBudgets().Lister()
	sel := &spreadSelectors{services: f.Core().V1().Services().Lister(), rcs: f.Core().V1().ReplicationControllers().Lister(),
		replicaSets: f.Apps().V1().ReplicaSets().Lister(), statefulSets: f.Apps().V1().StatefulSets().Lister()}
	s.snap = newSnapshot(f.Core().V1().Namespaces().Lister(), sel)
	s.status = newStatusWriter(cfg.Client, s.pods, s.log)
	synced := []cache.InformerSynced{
		f.Policy().V1().PodDisruptionBudgets().Informer().HasSynced, f.Core().V1().Namespaces().Informer().HasSynced,
		f.Core().V1().Services().Informer().HasSynced, f.Core().V1().ReplicationControllers().Informer().HasSynced,
		f.Apps().V1().ReplicaSets().Informer().HasSynced, f.Apps().V1().StatefulSets().Informer().HasSynced,
	}
	podReg, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: s.onPodAdd, UpdateFunc: s.onPodUpdate, DeleteFunc: s.onPodDelete})
	if err != nil {
		return fmt.Errorf("scheduler: pod handler: %w", err)
	}
	defer func() { _ = podInf.Informer().RemoveEventHandler(podReg) }()
	nodeReg, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: s.onNodeAdd, UpdateFunc: s.onNodeUpdate, DeleteFunc: s.onNodeDelete})
	if err != nil {
		return fmt.Errorf("scheduler: node handler: %w", err)
	}
	defer func() { _ = nodeInf.Informer().RemoveEventHandler(nodeReg) }()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), append(synced, podReg.HasSynced, nodeReg.HasSynced)...) {
		return ctx.Err()
	}
	var loops sync.WaitGroup
	loops.Go(func() { s.queue.run(ctx) })
	loops.Go(func() { s.status.run(ctx, cfg.StatusWorkers) })
	s.log.Info("scheduler started", "profiles", len(s.algs))
	for s.scheduleOne(ctx) {
	}
	s.wg.Wait()
	loops.Wait()
	return nil
}

func (s *sched) responsible(pod *v1.Pod) bool {
	_, ok := s.algs[pod.Spec.SchedulerName]
	return ok
}

func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// pending: ours to schedule now. Gated pods wait for their gates to go.
func (s *sched) pending(pod *v1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && !terminal(pod) && len(pod.Spec.SchedulingGates) == 0 && s.responsible(pod)
}

func (s *sched) onPodAdd(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	switch {
	case pod.Spec.NodeName != "" && !terminal(pod):
		s.cache.upsertPod(pod)
		s.queue.event(evPodAssigned)
	case s.pending(pod):
		s.queue.add(pod)
	}
}

func (s *sched) onPodUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*v1.Pod)
	pod, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	switch {
	case pod.Spec.NodeName != "" && terminal(pod):
		s.cache.removePod(pod.UID)
		if !terminal(old) {
			s.queue.event(evPodGone)
		}
	case pod.Spec.NodeName != "":
		if old.Spec.NodeName == "" {
			s.queue.remove(pod.UID)
		}
		s.cache.upsertPod(pod)
		if old.Spec.NodeName == "" || !labels.Equals(old.Labels, pod.Labels) {
			s.queue.event(evPodAssigned)
		}
	case s.pending(pod):
		s.queue.update(old, pod)
	default:
		s.queue.remove(pod.UID)
	}
}

func (s *sched) onPodDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	s.queue.remove(pod.UID)
	s.cache.removePod(pod.UID)
	if pod.Spec.NodeName != "" && !terminal(pod) {
		s.queue.event(evPodGone)
	}
}

func (s *sched) onNodeAdd(obj any) {
	if n, ok := obj.(*v1.Node); ok {
		s.cache.addNode(n)
		s.queue.event(evNodeAdd)
	}
}

func (s *sched) onNodeUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*v1.Node)
	n, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 {
		return
	}
	s.cache.addNode(n)
	if schedulingChanged(old, n) {
		s.queue.event(evNodeUpdate)
	}
}

// schedulingChanged ignores heartbeats: only what filters look at.
func schedulingChanged(a, b *v1.Node) bool {
	return a.Spec.Unschedulable != b.Spec.Unschedulable ||
		!labels.Equals(a.Labels, b.Labels) ||
		!equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints) ||
		!equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable)
}

func (s *sched) onNodeDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if n, ok := obj.(*v1.Node); ok {
		s.cache.removeNode(n.Name)
	}
}
