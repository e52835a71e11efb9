package endpointslice

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"skiff/server/controller/controllertest"
)

// cluster is the controller running against a real API server; the test
// plays the kubelet by writing pod status.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
}

func startCluster(t *testing.T, cfg Config) *cluster {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: 50 * time.Second})
	cfg.Client, cfg.Informers = ce.Client, ce.Informers
	cfg.Logger = controllertest.Logger(t, slog.LevelWarn)
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error { return Run(ctx, cfg) })
	return &cluster{t: t, ctx: ce.Ctx, client: ce.Client}
}

func (c *cluster) service(svc *corev1.Service) *corev1.Service {
	c.t.Helper()
	svc.Namespace = "default"
	got, err := c.client.CoreV1().Services("default").Create(c.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

// pod creates a scheduled pod and, when ip is set, reports it running with
// that address and the given readiness, as a kubelet would.
func (c *cluster) pod(pod *corev1.Pod, ip string, ready bool) *corev1.Pod {
	c.t.Helper()
	pod.Namespace = "default"
	if pod.Spec.NodeName == "" {
		pod.Spec.NodeName = "node-1"
	}
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Image = "registry.example/app:1"
	}
	got, err := c.client.CoreV1().Pods("default").Create(c.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	if ip == "" {
		return got
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

func (c *cluster) slicesOf(svc string) []discovery.EndpointSlice {
	c.t.Helper()
	l, err := c.client.DiscoveryV1().EndpointSlices("default").List(c.ctx, metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + svc})
	if err != nil {
		c.t.Fatal(err)
	}
	return l.Items
}

// eventually polls until cond holds; the deadline is generous because this
// machine is shared, and speed is measured separately.
func (c *cluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	controllertest.Eventually(c.t, c.ctx, 10*time.Second, func(context.Context) (bool, error) { return cond(), nil }, "%s", what)
}

func webPod(name string, port int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}}}}},
	}
}

func webService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"}, ClusterIP: "10.43.0.20",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
}

// endpointsByPod reads the endpoints of a service's slices by pod name.
func endpointsByPod(sl []discovery.EndpointSlice) map[string]discovery.Endpoint {
	out := map[string]discovery.Endpoint{}
	for _, s := range sl {
		for _, ep := range s.Endpoints {
			out[ep.TargetRef.Name] = ep
		}
	}
	return out
}

func readyCount(sl []discovery.EndpointSlice) int {
	n := 0
	for _, ep := range endpointsByPod(sl) {
		if *ep.Conditions.Ready {
			n++
		}
	}
	return n
}

func TestEndpointSlice_ThreeReadyPods_OneSliceThenPodTurnsNotReady(t *testing.T) {
	c := startCluster(t, Config{})
	svc := c.service(webService("web"))
	var ps []*corev1.Pod
	for i := range 3 {
		ps = append(ps, c.pod(webPod(fmt.Sprintf("web-%d", i), 8080), fmt.Sprintf("10.42.0.%d", i+1), true))
	}
	c.eventually("one slice with 3 ready endpoints", func() bool {
		sl := c.slicesOf("web")
		return len(sl) == 1 && len(sl[0].Endpoints) == 3 && readyCount(sl) == 3
	})
	s := c.slicesOf("web")[0]
	if s.AddressType != discovery.AddressTypeIPv4 || s.Labels[discovery.LabelManagedBy] != ControllerName || s.GenerateName != "web-" {
		t.Errorf("slice %s: addressType %s, labels %v, generateName %q", s.Name, s.AddressType, s.Labels, s.GenerateName)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != svc.UID {
		t.Errorf("owner references %+v, want the service", s.OwnerReferences)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Port != 8080 || *s.Ports[0].Name != "http" {
		t.Errorf("ports %+v, want http 8080", s.Ports)
	}
	ep := endpointsByPod([]discovery.EndpointSlice{s})["web-1"]
	if ep.NodeName == nil || *ep.NodeName != "node-1" || ep.TargetRef.UID != ps[1].UID || ep.Addresses[0] != "10.42.0.2" {
		t.Errorf("endpoint for web-1 = %+v", ep)
	}

	c.setReady(ps[1], false)
	c.eventually("web-1 not ready", func() bool {
		e := endpointsByPod(c.slicesOf("web"))["web-1"]
		return e.Conditions.Ready != nil && !*e.Conditions.Ready && !*e.Conditions.Serving
	})
	if n := len(c.slicesOf("web")); n != 1 {
		t.Errorf("%d slices after the change, want still 1", n)
	}
}

// TestEndpointSlice_ReadinessLatency measures how long a readiness change
// written by the kubelet takes to show in the slice, as seen by a watcher
// (which is how kube-proxy sees it). It is logged, not asserted: the
// machine running the tests is shared.
func TestEndpointSlice_ReadinessLatency(t *testing.T) {
	c := startCluster(t, Config{})
	c.service(webService("web"))
	pod := c.pod(webPod("web-0", 8080), "10.42.0.1", true)
	c.eventually("the endpoint", func() bool { return readyCount(c.slicesOf("web")) == 1 })
	w, err := c.client.DiscoveryV1().EndpointSlices("default").Watch(c.ctx, metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var lat []time.Duration
	ready := true
	for range 20 {
		ready = !ready
		start := time.Now()
		pod = c.setReady(pod, ready)
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case ev := <-w.ResultChan():
				s, ok := ev.Object.(*discovery.EndpointSlice)
				if ok && len(s.Endpoints) == 1 && *s.Endpoints[0].Conditions.Ready == ready {
					lat = append(lat, time.Since(start))
					break wait
				}
			case <-deadline:
				t.Fatalf("slice did not follow readiness=%v", ready)
			}
		}
	}
	slices.Sort(lat)
	t.Logf("readiness -> EndpointSlice latency over %d flips: min %v, median %v, max %v", len(lat), lat[0], lat[len(lat)/2], lat[len(lat)-1])
}

func TestEndpointSlice_250Pods_ThreeSlicesOfAtMost100(t *testing.T) {
	c := startCluster(t, Config{})
	c.service(webService("web"))
	for i := range 250 {
		c.pod(webPod(fmt.Sprintf("web-%03d", i), 8080), fmt.Sprintf("10.42.%d.%d", i/200, i%200+1), true)
	}
	c.eventually("250 endpoints in 3 slices", func() bool {
		sl := c.slicesOf("web")
		return len(sl) == 3 && len(endpointsByPod(sl)) == 250
	})
	versions := map[string]string{}
	holder := ""
	for _, s := range c.slicesOf("web") {
		if len(s.Endpoints) > 100 {
			t.Errorf("slice %s has %d endpoints", s.Name, len(s.Endpoints))
		}
		versions[s.Name] = s.ResourceVersion
		if _, ok := endpointsByPod([]discovery.EndpointSlice{s})["web-123"]; ok {
			holder = s.Name
		}
	}

	// A readiness flip rewrites only the slice holding the pod. Flipping
	// back and waiting for that too makes sure the first sync's writes
	// are all done (syncs of one service never overlap).
	pod, err := c.client.CoreV1().Pods("default").Get(c.ctx, "web-123", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod = c.setReady(pod, false)
	c.eventually("web-123 not ready", func() bool { return readyCount(c.slicesOf("web")) == 249 })
	c.setReady(pod, true)
	c.eventually("web-123 ready again", func() bool { return readyCount(c.slicesOf("web")) == 250 })
	for _, s := range c.slicesOf("web") {
		changed := s.ResourceVersion != versions[s.Name]
		if changed != (s.Name == holder) {
			t.Errorf("slice %s rewritten: %v; only %s should have been", s.Name, changed, holder)
		}
	}
}

func TestEndpointSlice_NamedTargetPortResolvingDifferently_SlicePerPort(t *testing.T) {
	c := startCluster(t, Config{})
	c.service(webService("web"))
	c.pod(webPod("web-a", 8080), "10.42.0.1", true)
	c.pod(webPod("web-b", 8080), "10.42.0.2", true)
	c.pod(webPod("web-c", 9090), "10.42.0.3", true)
	byPort := func() map[int32]int {
		out := map[int32]int{}
		for _, s := range c.slicesOf("web") {
			if len(s.Ports) == 1 {
				out[*s.Ports[0].Port] += len(s.Endpoints)
			}
		}
		return out
	}
	c.eventually("a slice for 8080 with 2 endpoints and one for 9090 with 1", func() bool {
		m := byPort()
		return len(c.slicesOf("web")) == 2 && m[8080] == 2 && m[9090] == 1
	})
}

func TestEndpointSlice_HeadlessService_LabelAndHostnames(t *testing.T) {
	c := startCluster(t, Config{})
	svc := webService("db")
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Spec.Ports = nil
	c.service(svc)
	p := webPod("db-0", 5432)
	p.Spec.Hostname, p.Spec.Subdomain = "db-0", "db"
	c.pod(p, "10.42.0.1", true)
	c.eventually("a headless slice with the pod's hostname", func() bool {
		sl := c.slicesOf("db")
		if len(sl) != 1 || len(sl[0].Endpoints) != 1 {
			return false
		}
		_, headless := sl[0].Labels[LabelHeadless]
		h := sl[0].Endpoints[0].Hostname
		return headless && h != nil && *h == "db-0" && len(sl[0].Ports) == 0
	})
}

func TestEndpointSlice_TerminatingPod_ServingButNotReady(t *testing.T) {
	c := startCluster(t, Config{})
	c.service(webService("web"))
	c.pod(webPod("web-0", 8080), "10.42.0.1", true)
	c.eventually("the endpoint", func() bool { return readyCount(c.slicesOf("web")) == 1 })
	// The pod is on a node, so the server only marks it terminating.
	if err := c.client.CoreV1().Pods("default").Delete(c.ctx, "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually("terminating, serving, not ready", func() bool {
		e, ok := endpointsByPod(c.slicesOf("web"))["web-0"]
		return ok && *e.Conditions.Terminating && *e.Conditions.Serving && !*e.Conditions.Ready
	})
	if err := c.client.CoreV1().Pods("default").Delete(c.ctx, "web-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	c.eventually("the slice emptied but kept", func() bool {
		sl := c.slicesOf("web")
		return len(sl) == 1 && len(sl[0].Endpoints) == 0
	})
}

func TestEndpointSlice_ServiceWithoutSelector_LeftAlone(t *testing.T) {
	c := startCluster(t, Config{})
	manual := webService("manual")
	manual.Spec.Selector = nil
	c.service(manual)
	c.service(webService("web"))
	c.pod(webPod("web-0", 8080), "10.42.0.1", true)
	// The selector service is synced after the other one was seen, so once
	// its slice exists the selectorless one has had its chance too.
	c.eventually("the selector service's slice", func() bool { return readyCount(c.slicesOf("web")) == 1 })
	if sl := c.slicesOf("manual"); len(sl) != 0 {
		t.Errorf("service without selector got %d slices", len(sl))
	}
}

func TestEndpointSlice_SliceDeletedByHand_Recreated(t *testing.T) {
	c := startCluster(t, Config{})
	c.service(webService("web"))
	c.pod(webPod("web-0", 8080), "10.42.0.1", true)
	c.eventually("the endpoint", func() bool { return readyCount(c.slicesOf("web")) == 1 })
	old := c.slicesOf("web")[0].Name
	if err := c.client.DiscoveryV1().EndpointSlices("default").Delete(c.ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually("a new slice with the endpoint", func() bool {
		sl := c.slicesOf("web")
		return len(sl) == 1 && sl[0].Name != old && readyCount(sl) == 1
	})
}
