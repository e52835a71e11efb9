package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
)

// cutTransport fails every request once cut: what the other servers see of
// one whose process died or whose network went away.
type cutTransport struct {
	next http.RoundTripper
	cut  *atomic.Bool
}

func (c cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("connection cut")
	}
	return c.next.RoundTrip(r)
}

// instance is one server's control loops, against a shared API server.
type instance struct {
	cut    atomic.Bool
	cancel context.CancelFunc
}

func startInstance(t *testing.T, srv *apitest.Server, name string) *instance {
	t.Helper()
	in := &instance{}
	transport := func(u *auth.User) http.RoundTripper {
		return cutTransport{next: srv.API.Transport(u), cut: &in.cut}
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("instance", name)
	l, err := newLoops(Config{NodeMonitorGracePeriod: time.Minute}, transport, log)
	if err != nil {
		t.Fatal(err)
	}
	l.election.Identity = name
	l.election.LeaseDuration, l.election.RenewDeadline, l.election.RetryPeriod = 4*time.Second, 3*time.Second, 250*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	t.Cleanup(cancel)
	l.start(ctx)
	return in
}

func holder(ctx context.Context, cs kubernetes.Interface, lease string) string {
	l, err := cs.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, lease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func TestControlLoops_TwoInstances_HandOverWithoutDoingWorkTwice(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	cs := kubernetes.NewForConfigOrDie(srv.Config(&auth.User{Name: "admin", Groups: []string{auth.GroupMasters}}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem, corev1.NamespaceNodeLease} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Capacity = node.Status.Allocatable
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Every pod creation is counted: work done twice shows as extra pods.
	w, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				mu.Lock()
				created[p.Name] = true
				mu.Unlock()
			}
		}
	}()
	createdCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(created)
	}

	a := startInstance(t, srv, "server-a")
	poll(t, ctx, "server-a to lead both loops", func() bool {
		return holder(ctx, cs, controllerManagerLease) == "server-a" && holder(ctx, cs, schedulerLease) == "server-a"
	})
	startInstance(t, srv, "server-b")

	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	boundPods := func(want int) func() bool {
		return func() bool {
			pods, err := cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) != want {
				return false
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" {
					return false
				}
			}
			return true
		}
	}
	poll(t, ctx, "3 pods created and bound by server-a", boundPods(3))

	// server-a dies without releasing its leases; the deployment grows
	// while nobody leads.
	killed := time.Now()
	a.cut.Store(true)
	a.cancel()
	if _, err := cs.AppsV1().Deployments(metav1.NamespaceDefault).UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "server-b to take both leases", func() bool {
		return holder(ctx, cs, controllerManagerLease) == "server-b" && holder(ctx, cs, schedulerLease) == "server-b"
	})
	t.Logf("hand-over took %v (lease duration 4s)", time.Since(killed).Round(100*time.Millisecond))
	poll(t, ctx, "5 pods bound after the hand-over", boundPods(5))

	// Give a second actor time to show itself, then count.
	time.Sleep(2 * time.Second)
	if n := createdCount(); n != 5 {
		t.Errorf("%d pods were ever created for 5 replicas: work was done twice", n)
	}
	rss, err := cs.AppsV1().ReplicaSets(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 1 {
		names := make([]string, 0, len(rss.Items))
		for _, rs := range rss.Items {
			names = append(names, rs.Name)
		}
		t.Errorf("ReplicaSets: %s, want exactly one", strings.Join(names, ", "))
	}
}

func poll(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
