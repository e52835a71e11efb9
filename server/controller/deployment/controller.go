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

	"skiff/server/controller/ownerref"
	"skiff/server/controller/worker"
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
	queue     *worker.Queue
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
		now:      time.Now,
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.queue = worker.New(worker.Config{Name: "deployment", Log: c.log, Message: "deployment sync", Noun: "deployment",
		// A cache behind our own writes; the retry reads anew.
		Quiet: apierrors.IsConflict, QuietMessage: "deployment sync conflict"})
	defer c.queue.ShutDown()
	workers := cfg.Workers
	if workers <= 0 {
		workers = defaultWorkers
	}
	dInf := cfg.Informers.Apps().V1().Deployments()
	rsInf := cfg.Informers.Apps().V1().ReplicaSets()
	podInf := cfg.Informers.Core().V1().Pods()
	c.dLister, c.rsLister, c.podLister = dInf.Lister(), rsInf.Lister(), podInf.Lister()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: dInf.Informer(), Handler: c.queue.Handlers()},
		worker.Subscription{Informer: rsInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addRS, UpdateFunc: c.updateRS, DeleteFunc: c.deleteRS}},
		worker.Subscription{Informer: podInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{DeleteFunc: c.deletePod}},
	)
	if err != nil {
		return fmt.Errorf("deployment controller informer: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	c.queue.Run(ctx, workers, c.sync)
	return nil
}

// resolveControllerRef returns the Deployment a controller reference
// points to, unless it is not a Deployment or names a successor.
func (c *controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	d, _ := ownerref.Resolve(ref, controllerKind, c.dLister.Deployments(namespace).Get)
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
	return ownerref.Selecting(list, func(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector }, rs.Labels)
}

func (c *controller) addRS(obj any) {
	rs := obj.(*appsv1.ReplicaSet)
	if rs.DeletionTimestamp != nil {
		c.deleteRS(rs)
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
			c.queue.Enqueue(d)
		}
		return
	}
	for _, d := range c.deploymentsSelecting(rs) {
		c.queue.Enqueue(d)
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
			c.queue.Enqueue(d)
		}
	}
	if curRef != nil {
		if d := c.resolveControllerRef(cur.Namespace, curRef); d != nil {
			c.queue.Enqueue(d)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(old.Labels, cur.Labels) {
		for _, d := range c.deploymentsSelecting(cur) {
			c.queue.Enqueue(d)
		}
	}
}

func (c *controller) deleteRS(obj any) {
	rs, ok := worker.Unwrap[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
			c.queue.Enqueue(d)
		}
	}
}

// deletePod wakes a Recreate Deployment, which waits for every old pod to
// be gone before it starts the new ones.
func (c *controller) deletePod(obj any) {
	pod, ok := worker.Unwrap[*corev1.Pod](obj)
	if !ok {
		return
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
		c.queue.Enqueue(d)
	}
}
