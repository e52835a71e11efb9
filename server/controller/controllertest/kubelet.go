package controllertest

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Kubelet plays the scheduler and the node agent for the pods of
// workload controllers: it binds new pods to node-1, reports them Running
// and Ready when Ready says so (always when nil), and, unless
// KeepTerminating, finishes the deletion of terminating pods as a kubelet
// does once the containers have stopped.
type Kubelet struct {
	Ready           func(*corev1.Pod) bool
	KeepTerminating bool
}

// Run plays the part until the test ends.
func (k Kubelet) Run(t testing.TB, ctx context.Context, client kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods()
	q := workqueue.NewTyped[string]()
	add := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			q.Add(key)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o any) { add(o) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			key, quit := q.Get()
			if quit {
				return
			}
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			if pod, err := pods.Lister().Pods(ns).Get(name); err == nil {
				if err := k.handle(ctx, client, pod); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					t.Errorf("kubelet: %s: %v", key, err)
				}
			}
			q.Done(key)
		}
	})
	t.Cleanup(func() {
		cancel()
		q.ShutDown()
		wg.Wait()
		factory.Shutdown()
	})
}

func (k Kubelet) handle(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) error {
	pods := client.CoreV1().Pods(pod.Namespace)
	switch {
	case pod.DeletionTimestamp != nil:
		if k.KeepTerminating {
			return nil
		}
		return pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	case pod.Spec.NodeName == "":
		return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
	case pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending:
		if k.Ready != nil && !k.Ready(pod) {
			return nil
		}
		return markReady(ctx, client, pod)
	}
	return nil
}

// markReady reports the pod Running and Ready, as its kubelet would once
// its containers passed their readiness checks.
func markReady(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	_, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}
