package endpoints

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"skiff/server/controller/controllertest"
)

type cluster struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
}

// startCluster runs the controller against a real API server; the test
// plays the kubelet. One worker keeps the queue first-in first-out, which
// lets a test know an earlier service was synced once a later one is.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: 50 * time.Second})
	cfg := Config{Client: ce.Client, Informers: ce.Informers, Workers: 1, Logger: controllertest.Logger(t, slog.LevelWarn)}
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error { return Run(ctx, cfg) })
	return &cluster{t: t, ctx: ce.Ctx, client: ce.Client}
}

func (c *cluster) service(name, clusterIP string, selector map[string]string) *corev1.Service {
	c.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"tier": "front"}},
		Spec: corev1.ServiceSpec{Selector: selector, ClusterIP: clusterIP,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
	got, err := c.client.CoreV1().Services("default").Create(c.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

func (c *cluster) pod(name, app, ip string, ready bool) *corev1.Pod {
	c.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
	}
	got, err := c.client.CoreV1().Pods("default").Create(c.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	got.Status.PodIP, got.Status.PodIPs, got.Status.Phase = ip, []corev1.PodIP{{IP: ip}}, corev1.PodRunning
	return c.setReady(got, ready)
}

func (c *cluster) setReady(pod *corev1.Pod, ready bool) *corev1.Pod {
	c.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod = pod.DeepCopy()
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	got, err := c.client.CoreV1().Pods("default").UpdateStatus(c.ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

func (c *cluster) endpoints(name string) *corev1.Endpoints {
	c.t.Helper()
	ep, err := c.client.CoreV1().Endpoints("default").Get(c.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return ep
}

func (c *cluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	controllertest.Eventually(c.t, c.ctx, 10*time.Second, func(context.Context) (bool, error) { return cond(), nil }, "%s", what)
}

func counts(ep *corev1.Endpoints) (ready, notReady int) {
	if ep == nil {
		return -1, -1
	}
	for _, s := range ep.Subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	return ready, notReady
}

func TestEndpoints_ReadyAndNotReadyPods_ListedApart(t *testing.T) {
	c := startCluster(t)
	c.service("web", "10.43.0.20", map[string]string{"app": "web"})
	pods := []*corev1.Pod{}
	for i := range 3 {
		pods = append(pods, c.pod(fmt.Sprintf("web-%d", i), "web", fmt.Sprintf("10.42.0.%d", i+1), i != 2))
	}
	c.eventually("2 ready and 1 not ready address", func() bool {
		r, n := counts(c.endpoints("web"))
		return r == 2 && n == 1
	})
	ep := c.endpoints("web")
	s := ep.Subsets[0]
	if len(s.Ports) != 1 || s.Ports[0].Port != 8080 || s.Ports[0].Name != "http" {
		t.Errorf("ports = %+v, want http 8080", s.Ports)
	}
	if a := s.Addresses[0]; a.IP != "10.42.0.1" || a.TargetRef == nil || a.TargetRef.Name != "web-0" || a.NodeName == nil || *a.NodeName != "node-1" {
		t.Errorf("first address = %+v", a)
	}
	if ep.Labels["tier"] != "front" {
		t.Errorf("labels = %v, want the service's", ep.Labels)
	}
	if _, ok := ep.Labels[LabelHeadless]; ok {
		t.Errorf("headless label on a service with a cluster IP")
	}
	if ep.Annotations[corev1.EndpointsLastChangeTriggerTime] == "" {
		t.Errorf("no %s annotation", corev1.EndpointsLastChangeTriggerTime)
	}

	c.setReady(pods[0], false)
	c.eventually("1 ready and 2 not ready", func() bool {
		r, n := counts(c.endpoints("web"))
		return r == 1 && n == 2
	})
}

func TestEndpoints_HeadlessService_Labelled(t *testing.T) {
	c := startCluster(t)
	c.service("db", corev1.ClusterIPNone, map[string]string{"app": "db"})
	c.pod("db-0", "db", "10.42.0.1", true)
	c.eventually("headless endpoints", func() bool {
		ep := c.endpoints("db")
		if ep == nil {
			return false
		}
		_, ok := ep.Labels[LabelHeadless]
		r, _ := counts(ep)
		return ok && r == 1
	})
}

func TestEndpoints_NothingChanged_NoWrite(t *testing.T) {
	c := startCluster(t)
	svc := c.service("web", "10.43.0.20", map[string]string{"app": "web"})
	c.service("other", "10.43.0.21", map[string]string{"app": "other"})
	c.pod("web-0", "web", "10.42.0.1", true)
	c.eventually("the endpoints", func() bool { r, _ := counts(c.endpoints("web")); return r == 1 })
	c.eventually("the other endpoints", func() bool { return c.endpoints("other") != nil })
	before := c.endpoints("web").ResourceVersion

	// An annotation changes nothing the Endpoints are made of; the change
	// to the other service is synced after it (same informer, one worker),
	// so once it shows the first sync has happened.
	svc.Annotations = map[string]string{"note": "irrelevant"}
	if _, err := c.client.CoreV1().Services("default").Update(c.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	other, err := c.client.CoreV1().Services("default").Get(c.ctx, "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Labels["marker"] = "x"
	if _, err := c.client.CoreV1().Services("default").Update(c.ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually("the other endpoints relabelled", func() bool { return c.endpoints("other").Labels["marker"] == "x" })
	if after := c.endpoints("web").ResourceVersion; after != before {
		t.Errorf("endpoints rewritten (resourceVersion %s -> %s) though nothing changed", before, after)
	}
}

func TestEndpoints_ServiceDeleted_EndpointsDeleted(t *testing.T) {
	c := startCluster(t)
	c.service("web", "10.43.0.20", map[string]string{"app": "web"})
	c.pod("web-0", "web", "10.42.0.1", true)
	c.eventually("the endpoints", func() bool { return c.endpoints("web") != nil })
	if err := c.client.CoreV1().Services("default").Delete(c.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually("the endpoints gone", func() bool { return c.endpoints("web") == nil })
}

func TestEndpoints_ServiceWithoutSelector_LeftAlone(t *testing.T) {
	c := startCluster(t)
	manual := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "manual", Namespace: "default"},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.10"}}, Ports: []corev1.EndpointPort{{Port: 5432}}}},
	}
	c.service("manual", "10.43.0.22", nil)
	if _, err := c.client.CoreV1().Endpoints("default").Create(c.ctx, manual, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.service("web", "10.43.0.20", map[string]string{"app": "web"})
	c.eventually("the selector service's endpoints", func() bool { return c.endpoints("web") != nil })
	ep := c.endpoints("manual")
	if r, _ := counts(ep); r != 1 || ep.Subsets[0].Addresses[0].IP != "192.0.2.10" {
		t.Errorf("hand-made endpoints changed: %+v", ep)
	}
}

// As the conformance test of the Endpoints lifecycle does: Endpoints with
// no Service at all, created, updated and patched by hand.
func TestEndpoints_WithoutService_UpdatedByHandAndKept(t *testing.T) {
	c := startCluster(t)
	// Past the sweep at start, which does delete Endpoints left by a
	// Service that went while the controller was away.
	c.service("first", "10.43.0.21", map[string]string{"app": "web"})
	c.eventually("the first service's endpoints", func() bool { return c.endpoints("first") != nil })
	standalone := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "standalone", Namespace: "default", Labels: map[string]string{"static": "true"}},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.24"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80}}}},
	}
	ep, err := c.client.CoreV1().Endpoints("default").Create(c.ctx, standalone, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep.Labels["updated"] = "true"
	if _, err := c.client.CoreV1().Endpoints("default").Update(c.ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One worker: once a later Service's endpoints exist, the update
	// above has been through the queue.
	c.service("web", "10.43.0.20", map[string]string{"app": "web"})
	c.eventually("the selector service's endpoints", func() bool { return c.endpoints("web") != nil })
	if got := c.endpoints("standalone"); got == nil || got.Labels["updated"] != "true" {
		t.Fatalf("Endpoints without a Service were deleted or reverted after an update: %+v", got)
	}
}
