// Package daemonset runs one pod of each DaemonSet on every node it selects
// (upstream's daemon set controller): pods are pinned to their node by a
// required node affinity and left for the scheduler to bind; they are
// replaced revision by revision on a template change, with the template
// history kept as ControllerRevisions for `kubectl rollout history/undo`.
package daemonset

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"

	"skiff/server/controller/ownerref"
	"skiff/server/controller/worker"
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is the factory shared with the other controllers; the
	// DaemonSet, Pod, Node and ControllerRevision informers are taken from
	// it. Nil makes a private one from Client.
	Informers informers.SharedInformerFactory
	// Recorder receives the events about daemon sets (core/v1, which
	// `kubectl describe` reads). Nil drops them.
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many daemon sets sync at once (default 2, upstream's
	// --concurrent-daemonset-syncs).
	Workers int
	// Burst caps the pods one sync creates, and those it deletes, for a
	// daemon set (default 250, upstream's burstReplicas).
	Burst int
	// FailedPodBackoff and MaxFailedPodBackoff bound the delay before a
	// failed daemon pod on a node is replaced again (default 1s and 15m).
	FailedPodBackoff, MaxFailedPodBackoff time.Duration
}

type controller struct {
	client       kubernetes.Interface
	recorder     record.EventRecorder
	log          *slog.Logger
	sets         appslisters.DaemonSetLister
	pods         corelisters.PodLister
	nodes        corelisters.NodeLister
	revisions    appslisters.ControllerRevisionLister
	queue        *worker.Queue
	expectations *expectations
	backoff      *flowcontrol.Backoff
	burst        int
}

// Run keeps daemon sets' pods in place until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil {
		return fmt.Errorf("daemonset: no client")
	}
	if cfg.Informers == nil {
		cfg.Informers = informers.NewSharedInformerFactory(cfg.Client, 0)
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Workers = cmp.Or(cfg.Workers, 2)
	cfg.Burst = cmp.Or(cfg.Burst, 250)
	cfg.FailedPodBackoff = cmp.Or(cfg.FailedPodBackoff, time.Second)
	cfg.MaxFailedPodBackoff = cmp.Or(cfg.MaxFailedPodBackoff, 15*time.Minute)

	apps, core := cfg.Informers.Apps().V1(), cfg.Informers.Core().V1()
	c := &controller{
		client:       cfg.Client,
		recorder:     cfg.Recorder,
		log:          cfg.Logger,
		sets:         apps.DaemonSets().Lister(),
		pods:         core.Pods().Lister(),
		nodes:        core.Nodes().Lister(),
		revisions:    apps.ControllerRevisions().Lister(),
		queue:        worker.New(worker.Config{Name: "daemonset", Log: cfg.Logger, Message: "daemon set sync", Noun: "daemonset"}),
		expectations: newExpectations(),
		backoff:      flowcontrol.NewBackOff(cfg.FailedPodBackoff, cfg.MaxFailedPodBackoff),
		burst:        cfg.Burst,
	}
	defer c.queue.ShutDown()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: apps.DaemonSets().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.queue.Enqueue,
			UpdateFunc: c.queue.EnqueueUpdate,
			DeleteFunc: c.deleteSet,
		}},
		worker.Subscription{Informer: core.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addPod, UpdateFunc: c.updatePod, DeleteFunc: c.deletePodEvent}},
		worker.Subscription{Informer: core.Nodes().Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addNode, UpdateFunc: c.updateNode, DeleteFunc: func(any) { c.enqueueAll() }}},
		worker.Subscription{Informer: apps.ControllerRevisions().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.revisionChanged,
			UpdateFunc: func(_, cur any) { c.revisionChanged(cur) },
			DeleteFunc: c.revisionChanged,
		}},
	)
	if err != nil {
		return fmt.Errorf("daemonset: add event handler: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { wait.Until(c.backoff.GC, time.Minute, ctx.Done()) })
	c.queue.Run(ctx, cfg.Workers, c.sync)
	wg.Wait()
	return nil
}

func (c *controller) enqueueAll() {
	sets, _ := c.sets.List(labels.Everything())
	for _, ds := range sets {
		c.queue.Enqueue(ds)
	}
}

func (c *controller) deleteSet(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.expectations.forget(key)
	}
}

// owner returns the daemon set ref names, if it still is the same one.
func (c *controller) owner(namespace string, ref *metav1.OwnerReference) *appsv1.DaemonSet {
	ds, _ := ownerref.Resolve(ref, controllerKind, c.sets.DaemonSets(namespace).Get)
	return ds
}

// setsSelecting returns the daemon sets whose selector matches lbls: the
// candidates to adopt an orphan.
func (c *controller) setsSelecting(namespace string, lbls map[string]string) []*appsv1.DaemonSet {
	sets, _ := c.sets.DaemonSets(namespace).List(labels.Everything())
	return ownerref.Selecting(sets, func(ds *appsv1.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector }, lbls)
}

func (c *controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already deleting (after a restart).
		c.deletePodEvent(pod)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ds := c.owner(pod.Namespace, ref); ds != nil {
			c.expectations.observe(pod.Namespace+"/"+ds.Name, 1, 0)
			c.queue.Enqueue(ds)
		}
		return
	}
	for _, ds := range c.setsSelecting(pod.Namespace, pod.Labels) {
		c.queue.Enqueue(ds)
	}
}

func (c *controller) updatePod(oldObj, curObj any) {
	old, cur := oldObj.(*corev1.Pod), curObj.(*corev1.Pod)
	if old.ResourceVersion == cur.ResourceVersion {
		return
	}
	oldRef, curRef := metav1.GetControllerOf(old), metav1.GetControllerOf(cur)
	if oldRef != nil && (curRef == nil || oldRef.UID != curRef.UID) {
		if ds := c.owner(old.Namespace, oldRef); ds != nil {
			c.queue.Enqueue(ds)
		}
	}
	if cur.DeletionTimestamp != nil {
		// A graceful deletion started: the replacement need not wait for
		// the kubelet to finish it.
		c.deletePodEvent(cur)
		return
	}
	if curRef != nil {
		ds := c.owner(cur.Namespace, curRef)
		if ds == nil {
			return
		}
		c.queue.Enqueue(ds)
		if ds.Spec.MinReadySeconds > 0 && !podReady(old) && podReady(cur) {
			c.queue.EnqueueAfter(ds, time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if !maps.Equal(old.Labels, cur.Labels) || oldRef != nil {
		for _, ds := range c.setsSelecting(cur.Namespace, cur.Labels) {
			c.queue.Enqueue(ds)
		}
	}
}

func (c *controller) deletePodEvent(obj any) {
	pod, ok := worker.Unwrap[*corev1.Pod](obj)
	if !ok {
		return
	}
	if ds := c.owner(pod.Namespace, metav1.GetControllerOf(pod)); ds != nil {
		c.expectations.observe(pod.Namespace+"/"+ds.Name, 0, 1)
		c.queue.Enqueue(ds)
	}
}

func (c *controller) addNode(obj any) {
	node := obj.(*corev1.Node)
	sets, _ := c.sets.List(labels.Everything())
	for _, ds := range sets {
		if run, _ := nodeShouldRunDaemonPod(node, ds); run {
			c.queue.Enqueue(ds)
		}
	}
}

// updateNode reacts only to what eligibility reads (labels, taints), and
// only for the sets whose verdict on the node changed: nodes update their
// status every few seconds.
func (c *controller) updateNode(oldObj, curObj any) {
	old, cur := oldObj.(*corev1.Node), curObj.(*corev1.Node)
	if maps.Equal(old.Labels, cur.Labels) && taintsEqual(old.Spec.Taints, cur.Spec.Taints) {
		return
	}
	sets, _ := c.sets.List(labels.Everything())
	for _, ds := range sets {
		oldRun, oldStay := nodeShouldRunDaemonPod(old, ds)
		curRun, curStay := nodeShouldRunDaemonPod(cur, ds)
		if oldRun != curRun || oldStay != curStay {
			c.queue.Enqueue(ds)
		}
	}
}

func taintsEqual(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value || a[i].Effect != b[i].Effect {
			return false
		}
	}
	return true
}

func (c *controller) revisionChanged(obj any) {
	r, ok := worker.Unwrap[*appsv1.ControllerRevision](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(r); ref != nil {
		if ds := c.owner(r.Namespace, ref); ds != nil {
			c.queue.Enqueue(ds)
		}
		return
	}
	for _, ds := range c.setsSelecting(r.Namespace, r.Labels) {
		c.queue.Enqueue(ds)
	}
}
