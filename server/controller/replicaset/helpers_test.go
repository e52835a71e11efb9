package replicaset

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"skiff/server/apiserver/apitest"
)

// eventLog is a recorder that keeps what it is told, for assertions; it
// never blocks the controller, unlike record.FakeRecorder when full.
type eventLog struct {
	mu     sync.Mutex
	events []recorded
}

type recorded struct {
	object, eventType, reason, message string
}

func (l *eventLog) Event(obj runtime.Object, eventType, reason, message string) {
	name := ""
	if acc, err := meta.Accessor(obj); err == nil {
		name = acc.GetName()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, recorded{name, eventType, reason, message})
}

func (l *eventLog) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	l.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	l.Eventf(obj, eventType, reason, format, args...)
}

func (l *eventLog) withReason(reason string) []recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recorded
	for _, e := range l.events {
		if e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// env is a real API server with a "default" namespace and the controller
// running against it.
type env struct {
	ctx    context.Context
	client kubernetes.Interface
	events *eventLog
}

func start(t *testing.T, opts apitest.Options) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	client := kubernetes.NewForConfigOrDie(apitest.Start(t, opts).Config(nil))
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &env{ctx: ctx, client: client, events: &eventLog{}}
	factory := informers.NewSharedInformerFactory(client, 0)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Client: client, Informers: factory, Recorder: e.events, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("Run = %v", err)
		}
		factory.Shutdown()
	})
	return e
}

// kubelet plays the node agent: it binds new pods to a node, reports
// them Running and Ready when ready says so, and, unless keepTerminating,
// finishes the deletion of terminating pods as a kubelet would once the
// containers stopped.
type kubelet struct {
	ready           func(*corev1.Pod) bool
	keepTerminating bool
}

func (k kubelet) run(t *testing.T, ctx context.Context, client kubernetes.Interface) {
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

func (k kubelet) handle(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) error {
	pods := client.CoreV1().Pods(pod.Namespace)
	switch {
	case pod.DeletionTimestamp != nil:
		if k.keepTerminating {
			return nil
		}
		return pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	case pod.Spec.NodeName == "":
		return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
	case pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending:
		if k.ready != nil && !k.ready(pod) {
			return nil
		}
		return markReady(ctx, client, pod)
	}
	return nil
}

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

func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
