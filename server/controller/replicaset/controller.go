// Package replicaset keeps the number of pods each ReplicaSet asks for
// (upstream's replicaset controller), and, run over them, each
// ReplicationController (upstream's replication manager). It creates pods
// from the template in slow-start batches, deletes the least valuable ones
// first when there are too many, adopts matching orphans and releases pods
// whose labels stopped matching, and reports counts and a ReplicaFailure
// condition in status.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/ownerref"
	"skiff/server/controller/worker"
)

const (
	// defaultWorkers matches upstream's --concurrent-replicaset-syncs.
	defaultWorkers = 5
	// defaultBurstReplicas caps the pods one sync creates or deletes, so a
	// ReplicaSet scaled to thousands does not flood the API server in one
	// go and other ReplicaSets get their turn.
	defaultBurstReplicas = 500
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; the ReplicaSet (or
	// ReplicationController) and Pod informers are taken from it.
	Informers informers.SharedInformerFactory
	// Recorder records the SuccessfulCreate/SuccessfulDelete/FailedCreate
	// events on ReplicaSets (or ReplicationControllers).
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many objects are synced at once (5 when zero).
	Workers int
	// BurstReplicas caps the pods created or deleted per sync (500 when
	// zero).
	BurstReplicas int
}

type controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	burst    int
	kind     ownerKind
	pods     corelisters.PodLister
	queue    *worker.Queue
	exp      *expectations
}

// Run keeps ReplicaSets supplied with pods until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return run(ctx, cfg, newReplicaSets)
}

func run(ctx context.Context, cfg Config, newKind func(kubernetes.Interface, informers.SharedInformerFactory) ownerKind) error {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return errors.New("replicaset controller: Client, Informers and Recorder are required")
	}
	kind := newKind(cfg.Client, cfg.Informers)
	noun := kind.noun()
	c := &controller{
		client:   cfg.Client,
		recorder: cfg.Recorder,
		log:      cfg.Logger,
		burst:    cfg.BurstReplicas,
		kind:     kind,
		exp:      newExpectations(),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.queue = worker.New(worker.Config{Name: noun, Log: c.log, Message: noun + " sync", Noun: noun,
		// A cache behind our own writes; the retry reads anew.
		Quiet: apierrors.IsConflict, QuietMessage: noun + " sync conflict"})
	defer c.queue.ShutDown()
	if c.burst <= 0 {
		c.burst = defaultBurstReplicas
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = defaultWorkers
	}
	podInf := cfg.Informers.Core().V1().Pods()
	c.pods = podInf.Lister()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: kind.informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.queue.Enqueue, UpdateFunc: c.queue.EnqueueUpdate, DeleteFunc: c.deleteRS}},
		worker.Subscription{Informer: podInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addPod, UpdateFunc: c.updatePod, DeleteFunc: c.deletePod}},
	)
	if err != nil {
		return fmt.Errorf("%s controller informer: %w", noun, err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	c.queue.Run(ctx, workers, c.sync)
	return nil
}

func (c *controller) deleteRS(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	// A ReplicaSet recreated under the same name must not inherit the
	// outstanding expectations of the deleted one.
	c.exp.forget(key)
	c.queue.Add(key)
}

// resolveControllerRef returns the ReplicaSet a controller reference
// points to, or nil when it is not one of ours or names a ReplicaSet that
// has since been replaced by another with the same name.
func (c *controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.ReplicaSet {
	rs, _ := ownerref.Resolve(ref, c.kind.gvk(), func(name string) (*appsv1.ReplicaSet, error) { return c.kind.get(namespace, name) })
	return rs
}

// replicaSetsSelecting lists the ReplicaSets whose selector matches the
// pod: the candidates to adopt an orphan.
func (c *controller) replicaSetsSelecting(pod *corev1.Pod) []*appsv1.ReplicaSet {
	if len(pod.Labels) == 0 {
		return nil
	}
	list, err := c.kind.list(pod.Namespace)
	if err != nil {
		return nil
	}
	return ownerref.Selecting(list, func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector }, pod.Labels)
}

func (c *controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already terminating (e.g. after a
		// restart): it must not count as a pending creation.
		c.deletePod(pod)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if rs := c.resolveControllerRef(pod.Namespace, ref); rs != nil {
			key, _ := cache.MetaNamespaceKeyFunc(rs)
			c.exp.creationObserved(key)
			c.queue.Add(key)
		}
		return
	}
	// An orphan: every ReplicaSet that selects it gets a chance to adopt.
	for _, rs := range c.replicaSetsSelecting(pod) {
		c.queue.Enqueue(rs)
	}
}

func (c *controller) updatePod(oldObj, curObj any) {
	old, cur := oldObj.(*corev1.Pod), curObj.(*corev1.Pod)
	if old.ResourceVersion == cur.ResourceVersion {
		return
	}
	labelChanged := !reflect.DeepEqual(old.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// A terminating pod is gone as far as counting goes; observe it
		// now rather than when the kubelet finally removes it.
		c.deletePod(cur)
		if labelChanged {
			c.deletePod(old)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOf(cur), metav1.GetControllerOf(old)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if rs := c.resolveControllerRef(old.Namespace, oldRef); rs != nil {
			c.queue.Enqueue(rs)
		}
	}
	if curRef != nil {
		rs := c.resolveControllerRef(cur.Namespace, curRef)
		if rs == nil {
			return
		}
		c.queue.Enqueue(rs)
		if !podReady(old) && podReady(cur) && rs.Spec.MinReadySeconds > 0 {
			// Available only minReadySeconds after turning ready: look again
			// then, or status would wait for some unrelated event.
			c.queue.EnqueueAfter(rs, time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if labelChanged || refChanged {
		for _, rs := range c.replicaSetsSelecting(cur) {
			c.queue.Enqueue(rs)
		}
	}
}

func (c *controller) deletePod(obj any) {
	pod, ok := worker.Unwrap[*corev1.Pod](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return
	}
	rs := c.resolveControllerRef(pod.Namespace, ref)
	if rs == nil {
		return
	}
	key, _ := cache.MetaNamespaceKeyFunc(rs)
	c.exp.deletionObserved(key, podKey(pod))
	c.queue.Add(key)
}

func podKey(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}
