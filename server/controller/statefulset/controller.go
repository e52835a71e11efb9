// Package statefulset runs StatefulSets (upstream's stateful set
// controller): pods with stable names <set>-<ordinal>, each with its own
// PersistentVolumeClaims, created and deleted in ordinal order (or all at
// once for Parallel), and updated from the highest ordinal down to the
// partition, with the template history kept as ControllerRevisions for
// `kubectl rollout history/undo`.
package statefulset

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/ownerref"
	"skiff/server/controller/worker"
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is the factory shared with the other controllers; the
	// StatefulSet, Pod, ControllerRevision and PersistentVolumeClaim
	// informers are taken from it. Nil makes a private one from Client.
	Informers informers.SharedInformerFactory
	// Recorder receives the events about stateful sets (core/v1, which
	// `kubectl describe` reads). Nil drops them.
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many stateful sets sync at once (default 5, upstream's
	// --concurrent-statefulset-syncs).
	Workers int
}

type controller struct {
	client    kubernetes.Interface
	recorder  record.EventRecorder
	log       *slog.Logger
	sets      appslisters.StatefulSetLister
	pods      corelisters.PodLister
	revisions appslisters.ControllerRevisionLister
	claims    corelisters.PersistentVolumeClaimLister
	queue     *worker.Queue
}

// Run keeps stateful sets' pods and claims in place until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil {
		return fmt.Errorf("statefulset: no client")
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
	cfg.Workers = cmp.Or(cfg.Workers, 5)
	apps, core := cfg.Informers.Apps().V1(), cfg.Informers.Core().V1()
	c := &controller{
		client:    cfg.Client,
		recorder:  cfg.Recorder,
		log:       cfg.Logger,
		sets:      apps.StatefulSets().Lister(),
		pods:      core.Pods().Lister(),
		revisions: apps.ControllerRevisions().Lister(),
		claims:    core.PersistentVolumeClaims().Lister(),
		queue:     worker.New(worker.Config{Name: "statefulset", Log: cfg.Logger, Message: "stateful set sync", Noun: "statefulset"}),
	}
	defer c.queue.ShutDown()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: apps.StatefulSets().Informer(), Handler: c.queue.Handlers()},
		worker.Subscription{Informer: core.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.addPod, UpdateFunc: c.updatePod, DeleteFunc: c.deletePodEvent}},
		// Claims and revisions are read, not reacted to: every change the
		// controller cares about also shows on a pod or the set.
		worker.Subscription{Informer: apps.ControllerRevisions().Informer(), Handler: cache.ResourceEventHandlerFuncs{}},
		worker.Subscription{Informer: core.PersistentVolumeClaims().Informer(), Handler: cache.ResourceEventHandlerFuncs{}},
	)
	if err != nil {
		return fmt.Errorf("statefulset: add event handler: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	c.queue.Run(ctx, cfg.Workers, c.sync)
	return nil
}

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	set, err := c.sets.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pods, err := c.claimPods(ctx, set)
	if err != nil {
		return err
	}
	status, err := c.updateStatefulSet(ctx, set, pods)
	if err != nil {
		return err
	}
	if set.Spec.MinReadySeconds > 0 && status != nil && status.AvailableReplicas != int32(replicas(set)) {
		// Nothing else happens when a ready pod becomes available.
		c.queue.AddAfter(key, time.Duration(set.Spec.MinReadySeconds)*time.Second)
	}
	return nil
}

// claimPods returns set's pods: those it controls that still match its
// selector and name pattern, plus matching orphans it adopts. Controlled
// pods that stopped matching are released.
func (c *controller) claimPods(ctx context.Context, set *appsv1.StatefulSet) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of stateful set %s/%s: %w", set.Namespace, set.Name, err)
	}
	all, err := c.pods.Pods(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, pod := range all {
		ref := metav1.GetControllerOf(pod)
		matches := selector.Matches(labels.Set(pod.Labels)) && isMemberOf(set, pod)
		switch {
		case ref != nil && ref.UID != set.UID:
		case ref != nil && matches:
			out = append(out, pod)
		case ref != nil:
			if set.DeletionTimestamp == nil {
				if err := c.patchOwner(ctx, pod, set, false); err != nil {
					return nil, err
				}
			}
		case matches && pod.DeletionTimestamp == nil && set.DeletionTimestamp == nil:
			if err := c.patchOwner(ctx, pod, set, true); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			out = append(out, pod)
		}
	}
	return out, nil
}

func (c *controller) patchOwner(ctx context.Context, pod *corev1.Pod, set *appsv1.StatefulSet, adopt bool) error {
	var ref any = map[string]any{"$patch": "delete", "uid": set.UID}
	if adopt {
		ref = metav1.NewControllerRef(set, controllerKind)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []any{ref}, "uid": pod.UID}})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !(apierrors.IsNotFound(err) && !adopt) {
		return fmt.Errorf("patch owner of pod %s: %w", pod.Name, err)
	}
	return nil
}

// writeStatus stores status when it differs from the set's. A rolling
// update whose pods are all updated and ready is complete: the update
// revision becomes the current one.
func (c *controller) writeStatus(ctx context.Context, set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) error {
	if set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		status.UpdatedReplicas == status.Replicas && status.ReadyReplicas == status.Replicas {
		status.CurrentReplicas = status.UpdatedReplicas
		status.CurrentRevision = status.UpdateRevision
	}
	if !statusChanged(&set.Status, status) {
		return nil
	}
	client := c.client.AppsV1().StatefulSets(set.Namespace)
	cur := set.DeepCopy()
	for attempt := 0; ; attempt++ {
		conditions := cur.Status.Conditions
		cur.Status = *status.DeepCopy()
		cur.Status.Conditions = conditions
		_, err := client.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 5 {
			return fmt.Errorf("update status of stateful set %s/%s: %w", set.Namespace, set.Name, err)
		}
		if cur, err = client.Get(ctx, set.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get stateful set %s/%s: %w", set.Namespace, set.Name, err)
		}
	}
}

func statusChanged(old, cur *appsv1.StatefulSetStatus) bool {
	return cur.ObservedGeneration > old.ObservedGeneration ||
		cur.Replicas != old.Replicas || cur.ReadyReplicas != old.ReadyReplicas || cur.AvailableReplicas != old.AvailableReplicas ||
		cur.CurrentReplicas != old.CurrentReplicas || cur.UpdatedReplicas != old.UpdatedReplicas ||
		cur.CurrentRevision != old.CurrentRevision || cur.UpdateRevision != old.UpdateRevision ||
		(cur.CollisionCount != nil && (old.CollisionCount == nil || *old.CollisionCount != *cur.CollisionCount))
}

// owner returns the stateful set ref names, if it still is the same one.
func (c *controller) owner(namespace string, ref *metav1.OwnerReference) *appsv1.StatefulSet {
	set, _ := ownerref.Resolve(ref, controllerKind, c.sets.StatefulSets(namespace).Get)
	return set
}

// enqueueSelecting queues the sets that might adopt an orphan pod.
func (c *controller) enqueueSelecting(pod *corev1.Pod) {
	sets, _ := c.sets.StatefulSets(pod.Namespace).List(labels.Everything())
	for _, set := range ownerref.Selecting(sets, func(s *appsv1.StatefulSet) *metav1.LabelSelector { return s.Spec.Selector }, pod.Labels) {
		if isMemberOf(set, pod) {
			c.queue.Enqueue(set)
		}
	}
}

func (c *controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		c.deletePodEvent(pod)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if set := c.owner(pod.Namespace, ref); set != nil {
			c.queue.Enqueue(set)
		}
		return
	}
	c.enqueueSelecting(pod)
}

func (c *controller) updatePod(oldObj, curObj any) {
	old, cur := oldObj.(*corev1.Pod), curObj.(*corev1.Pod)
	if old.ResourceVersion == cur.ResourceVersion {
		return
	}
	oldRef, curRef := metav1.GetControllerOf(old), metav1.GetControllerOf(cur)
	if oldRef != nil && (curRef == nil || oldRef.UID != curRef.UID) {
		if set := c.owner(old.Namespace, oldRef); set != nil {
			c.queue.Enqueue(set)
		}
	}
	if curRef != nil {
		set := c.owner(cur.Namespace, curRef)
		if set == nil {
			return
		}
		c.queue.Enqueue(set)
		if set.Spec.MinReadySeconds > 0 && readyCondition(old) == nil && readyCondition(cur) != nil {
			c.queue.EnqueueAfter(set, time.Duration(set.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if !maps.Equal(old.Labels, cur.Labels) || oldRef != nil {
		c.enqueueSelecting(cur)
	}
}

func (c *controller) deletePodEvent(obj any) {
	pod, ok := worker.Unwrap[*corev1.Pod](obj)
	if !ok {
		return
	}
	if set := c.owner(pod.Namespace, metav1.GetControllerOf(pod)); set != nil {
		c.queue.Enqueue(set)
	}
}
