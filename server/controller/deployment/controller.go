// Package deployment rolls Deployments out (upstream's deployment
// controller). A Deployment owns one ReplicaSet per pod template it has
// run, named <deployment>-<template hash>; the controller scales the
// ReplicaSet of the current template up and the others down, within the
// RollingUpdate surge and unavailability limits or all at once for
// Recreate, scales them proportionally when the Deployment is resized
// mid-rollout, prunes old ReplicaSets beyond revisionHistoryLimit and
// reports progress in status and conditions. The ReplicaSet controller
// makes the pods; kubectl's rollout commands read and write what this one
// leaves on the ReplicaSets (revision annotations, template).
package deployment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// defaultWorkers matches upstream's --concurrent-deployment-syncs.
const defaultWorkers = 5

var controllerKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; the Deployment,
	// ReplicaSet and Pod informers are taken from it.
	Informers informers.SharedInformerFactory
	// Recorder records ScalingReplicaSet and the other events on
	// Deployments.
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many Deployments are synced at once (5 when zero).
	Workers int
}

type controller struct {
	client    kubernetes.Interface
	recorder  record.EventRecorder
	log       *slog.Logger
	dLister   appslisters.DeploymentLister
	rsLister  appslisters.ReplicaSetLister
	podLister corelisters.PodLister
	queue     workqueue.TypedRateLimitingInterface[string]
	// now is the clock of progress deadlines.
	now func() time.Time
}

// Run rolls Deployments out until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return errors.New("deployment controller: Client, Informers and Recorder are required")
	}
	c := &controller{
		client:   cfg.Client,
		recorder: cfg.Recorder,
		log:      cfg.Logger,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployment"}),
		now: time.Now,
	}
	defer c.queue.ShutDown()
	if c.log == nil {
		c.log = slog.Default()
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = defaultWorkers
	}
	dInf := cfg.Informers.Apps().V1().Deployments()
	rsInf := cfg.Informers.Apps().V1().ReplicaSets()
	podInf := cfg.Informers.Core().V1().Pods()
	c.dLister, c.rsLister, c.podLister = dInf.Lister(), rsInf.Lister(), podInf.Lister()
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandlerFuncs
	}{
		{dInf.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: c.enqueue, UpdateFunc: func(_, cur any) { c.enqueue(cur) }, DeleteFunc: c.enqueue}},
		{rsInf.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: c.addRS, UpdateFunc: c.updateRS, DeleteFunc: c.deleteRS}},
		{podInf.Informer(), cache.ResourceEventHandlerFuncs{DeleteFunc: c.deletePod}},
	}
	var synced []cache.InformerSynced
	for _, h := range handlers {
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			return fmt.Errorf("deployment controller informer: %w", err)
		}
		defer func() { _ = h.inf.RemoveEventHandler(reg) }()
		synced = append(synced, reg.HasSynced)
	}
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	wg.Wait()
	return nil
}

func (c *controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		if ctx.Err() != nil {
			// Shutting down: the failure is the cancellation's.
			return true
		}
		if apierrors.IsConflict(err) {
			// A cache behind our own writes; the retry reads anew.
			c.log.Debug("deployment sync conflict", "deployment", key, "err", err)
		} else {
			c.log.Warn("deployment sync", "deployment", key, "err", err)
		}
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

func (c *controller) enqueueAfter(d *appsv1.Deployment, after time.Duration) {
	if key, err := cache.MetaNamespaceKeyFunc(d); err == nil {
		c.queue.AddAfter(key, after)
	}
}

// resolveControllerRef returns the Deployment a controller reference
// points to, unless it is not a Deployment or names a successor.
func (c *controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	if ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	d, err := c.dLister.Deployments(namespace).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return nil
	}
	return d
}

// deploymentsSelecting lists the Deployments that could adopt an orphaned
// ReplicaSet.
func (c *controller) deploymentsSelecting(rs *appsv1.ReplicaSet) []*appsv1.Deployment {
	if len(rs.Labels) == 0 {
		return nil
	}
	list, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*appsv1.Deployment
	for _, d := range list {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		out = append(out, d)
	}
	return out
}

func (c *controller) addRS(obj any) {
	rs := obj.(*appsv1.ReplicaSet)
	if rs.DeletionTimestamp != nil {
		c.deleteRS(rs)
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.deploymentsSelecting(rs) {
		c.enqueue(d)
	}
}

func (c *controller) updateRS(oldObj, curObj any) {
	old, cur := oldObj.(*appsv1.ReplicaSet), curObj.(*appsv1.ReplicaSet)
	if old.ResourceVersion == cur.ResourceVersion {
		return
	}
	curRef, oldRef := metav1.GetControllerOf(cur), metav1.GetControllerOf(old)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if d := c.resolveControllerRef(old.Namespace, oldRef); d != nil {
			c.enqueue(d)
		}
	}
	if curRef != nil {
		if d := c.resolveControllerRef(cur.Namespace, curRef); d != nil {
			c.enqueue(d)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(old.Labels, cur.Labels) {
		for _, d := range c.deploymentsSelecting(cur) {
			c.enqueue(d)
		}
	}
}

func (c *controller) deleteRS(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if rs, ok = tomb.Obj.(*appsv1.ReplicaSet); !ok {
			return
		}
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
	}
}

// deletePod wakes a Recreate Deployment, which waits for every old pod to
// be gone before it starts the new ones.
func (c *controller) deletePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	rsRef := metav1.GetControllerOf(rs)
	if rsRef == nil {
		return
	}
	if d := c.resolveControllerRef(rs.Namespace, rsRef); d != nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.enqueue(d)
	}
}
