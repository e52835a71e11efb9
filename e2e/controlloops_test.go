package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// rolloutWatch checks, at every pod event of one app, that a rollout keeps
// the bounds its strategy promises: no more than maxTotal pods alive (not
// terminating) and, once the rollout began, no fewer than minReady ready.
type rolloutWatch struct {
	mu         sync.Mutex
	maxTotal   int
	minReady   int
	alive      map[string]bool
	ready      map[string]bool
	violations []string
	peakTotal  int
	lowReady   int
}

func watchRollout(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, selector string, maxTotal, minReady int) *rolloutWatch {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	rw := &rolloutWatch{maxTotal: maxTotal, minReady: minReady, alive: map[string]bool{}, ready: map[string]bool{}, lowReady: 1 << 30}
	for i := range list.Items {
		rw.track(watch.Added, &list.Items[i])
	}
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				rw.observe(ev.Type, p)
			}
		}
	}()
	return rw
}

// track records a pod's state without judging it: the starting point.
func (rw *rolloutWatch) track(typ watch.EventType, p *corev1.Pod) {
	if typ == watch.Deleted || p.DeletionTimestamp != nil {
		delete(rw.alive, p.Name)
		delete(rw.ready, p.Name)
	} else {
		rw.alive[p.Name] = true
		if podIsReady(p) {
			rw.ready[p.Name] = true
		} else {
			delete(rw.ready, p.Name)
		}
	}
}

// observe records a change and checks the bounds after it.
func (rw *rolloutWatch) observe(typ watch.EventType, p *corev1.Pod) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.track(typ, p)
	rw.peakTotal = max(rw.peakTotal, len(rw.alive))
	rw.lowReady = min(rw.lowReady, len(rw.ready))
	if len(rw.alive) > rw.maxTotal {
		rw.violations = append(rw.violations, fmt.Sprintf("%d pods alive (max %d) after %s %s", len(rw.alive), rw.maxTotal, typ, p.Name))
	}
	if len(rw.ready) < rw.minReady {
		rw.violations = append(rw.violations, fmt.Sprintf("%d pods ready (min %d) after %s %s", len(rw.ready), rw.minReady, typ, p.Name))
	}
}

func (rw *rolloutWatch) check(t *testing.T) {
	t.Helper()
	rw.mu.Lock()
	defer rw.mu.Unlock()
	t.Logf("rollout: peak %d pods alive (max %d), lowest %d ready (min %d)", rw.peakTotal, rw.maxTotal, rw.lowReady, rw.minReady)
	for _, v := range rw.violations {
		t.Error(v)
	}
}

// appPods are the live pods of app, sorted by name.
func appPods(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, app string) []corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// waitAppReady waits until app has exactly n live pods, all bound, Ready
// and running image.
func waitAppReady(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, app string, n int, image string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	cgEventually(t, fmt.Sprintf("%d ready pods of %s running %s", n, app, image), 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		pods = appPods(t, ctx, cs, ns, app)
		if len(pods) != n {
			return false, nil
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" || !podIsReady(&p) || p.Spec.Containers[0].Image != image {
				return false, nil
			}
		}
		return true, nil
	})
	return pods
}

func TestControlLoops_Deployment_SpreadRolloutUndo(t *testing.T) {
	c := startCluster(t)
	cfg := c.clientGoConfig(t)
	cs := cgClientset(t, cfg)
	ctx := cgContext(t, 4*time.Minute)
	startFakeKubelets(t, ctx, cs, "node-a", "node-b", "node-c")
	kubectl := kubectlVersions(t)["default"]

	c.ok(t, kubectl, "create", "deployment", "web", "--image=busybox:1", "--replicas=3")
	pods := waitAppReady(t, ctx, cs, "default", "web", 3, "busybox:1")
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
	}
	if len(nodes) != 3 {
		t.Errorf("3 replicas on 3 equal nodes landed on %d node(s): %v", len(nodes), nodes)
	}
	ev := c.ok(t, kubectl, "get", "events", "--field-selector", "reason=Scheduled", "-o", "jsonpath={.items[*].message}")
	mustContain(t, "Scheduled events", ev, "Successfully assigned default/web-")

	// Rollout with maxSurge 1, maxUnavailable 0: never more than 4 pods,
	// never fewer than 3 ready.
	c.ok(t, kubectl, "patch", "deployment", "web", "-p", `{"spec":{"strategy":{"rollingUpdate":{"maxSurge":1,"maxUnavailable":0}}}}`)
	rw := watchRollout(t, ctx, cs, "default", "app=web", 4, 3)
	c.ok(t, kubectl, "set", "image", "deployment/web", "busybox=busybox:2")
	c.ok(t, kubectl, "rollout", "status", "deployment/web", "--timeout=90s")
	waitAppReady(t, ctx, cs, "default", "web", 3, "busybox:2")
	rw.check(t)

	hist := c.ok(t, kubectl, "rollout", "history", "deployment/web")
	mustContain(t, "rollout history", hist, "REVISION", "1 ", "2 ")

	// Undo: maxSurge 0, maxUnavailable 1 this time.
	c.ok(t, kubectl, "patch", "deployment", "web", "-p", `{"spec":{"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}`)
	rw = watchRollout(t, ctx, cs, "default", "app=web", 3, 2)
	c.ok(t, kubectl, "rollout", "undo", "deployment/web")
	c.ok(t, kubectl, "rollout", "status", "deployment/web", "--timeout=90s")
	waitAppReady(t, ctx, cs, "default", "web", 3, "busybox:1")
	rw.check(t)
	rss, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 2 {
		t.Errorf("undo should reuse the first ReplicaSet: %d ReplicaSets", len(rss.Items))
	}
	out := c.ok(t, kubectl, "get", "deployment", "web")
	mustContain(t, "get deployment", out, "READY", "UP-TO-DATE", "AVAILABLE", "3/3")
	desc := c.ok(t, kubectl, "describe", "deployment", "web")
	mustContain(t, "describe deployment", desc, "ScalingReplicaSet")
}

func TestControlLoops_DeleteDeployment_EachCascadeMode(t *testing.T) {
	c := startCluster(t)
	cs := cgClientset(t, c.clientGoConfig(t))
	ctx := cgContext(t, 3*time.Minute)
	startFakeKubelets(t, ctx, cs, "node-a", "node-b")
	kubectl := kubectlVersions(t)["default"]

	for _, mode := range []string{"background", "foreground", "orphan"} {
		t.Run(mode, func(t *testing.T) {
			name := "d-" + mode
			c.ok(t, kubectl, "create", "deployment", name, "--image=busybox:1", "--replicas=2")
			waitAppReady(t, ctx, cs, "default", name, 2, "busybox:1")
			c.ok(t, kubectl, "delete", "deployment", name, "--cascade="+mode, "--wait=false")
			if mode == "foreground" {
				// The owner waits, marked, until its dependents are gone.
				d, err := cs.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
				if err == nil && (d.DeletionTimestamp == nil || !strings.Contains(strings.Join(d.Finalizers, ","), metav1.FinalizerDeleteDependents)) {
					t.Errorf("foreground deletion: deployment not marked: %v %v", d.DeletionTimestamp, d.Finalizers)
				}
			}
			cgEventually(t, "deployment gone", 60*time.Second, 200*time.Millisecond, func() (bool, error) {
				_, err := cs.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			rsCount := func() int {
				rss, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
				if err != nil {
					t.Fatal(err)
				}
				return len(rss.Items)
			}
			if mode == "orphan" {
				// Give the garbage collector time it would need to (wrongly)
				// act, then check the dependents are still there, ownerless.
				time.Sleep(2 * time.Second)
				rss, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
				if err != nil {
					t.Fatal(err)
				}
				if len(rss.Items) != 1 || len(rss.Items[0].OwnerReferences) != 0 {
					t.Fatalf("orphan: want 1 ownerless ReplicaSet, got %d (%v)", len(rss.Items), rss.Items)
				}
				if n := len(appPods(t, ctx, cs, "default", name)); n != 2 {
					t.Errorf("orphan: %d pods left, want 2", n)
				}
				return
			}
			cgEventually(t, "ReplicaSets and pods gone", 60*time.Second, 200*time.Millisecond, func() (bool, error) {
				return rsCount() == 0 && len(appPods(t, ctx, cs, "default", name)) == 0, nil
			})
		})
	}
}

func TestControlLoops_NodeLeaseStops_PodsMoveAndTaintLifts(t *testing.T) {
	c := startClusterWith(t, "--node-monitor-grace-period=3s", "--default-not-ready-toleration-seconds=3")
	cs := cgClientset(t, c.clientGoConfig(t))
	ctx := cgContext(t, 3*time.Minute)
	kubelets := startFakeKubelets(t, ctx, cs, "node-a", "node-b", "node-c")
	kubectl := kubectlVersions(t)["default"]

	c.ok(t, kubectl, "create", "deployment", "app", "--image=busybox:1", "--replicas=3")
	pods := waitAppReady(t, ctx, cs, "default", "app", 3, "busybox:1")
	victim := pods[0].Spec.NodeName
	kubelets.stop(victim)
	stoppedAt := time.Now()

	hasTaint := func(node, key string) bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == key && tn.Effect == corev1.TaintEffectNoExecute {
				return true
			}
		}
		return false
	}
	cgEventually(t, "unreachable taint on "+victim, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		return hasTaint(victim, corev1.TaintNodeUnreachable), nil
	})
	t.Logf("node %s tainted %v after its lease stopped", victim, time.Since(stoppedAt).Round(100*time.Millisecond))
	n, err := cs.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionUnknown {
			t.Errorf("Ready = %s on a silent node, want Unknown", cond.Status)
		}
	}

	// The pods tolerate the taint for 3 s, then move to the live nodes.
	cgEventually(t, "pods replaced on live nodes", 90*time.Second, 200*time.Millisecond, func() (bool, error) {
		live := appPods(t, ctx, cs, "default", "app")
		if len(live) != 3 {
			return false, nil
		}
		for _, p := range live {
			if p.Spec.NodeName == "" || p.Spec.NodeName == victim || !podIsReady(&p) {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("pods moved off %s %v after its lease stopped", victim, time.Since(stoppedAt).Round(100*time.Millisecond))

	kubelets.restart(ctx, victim)
	cgEventually(t, "taint lifted from "+victim, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		return !hasTaint(victim, corev1.TaintNodeUnreachable) && !hasTaint(victim, corev1.TaintNodeNotReady), nil
	})
	desc := c.ok(t, kubectl, "describe", "node", victim)
	mustContain(t, "describe node", desc, "NodeNotReady")
}

func TestControlLoops_EndpointSlices_FollowPodReadiness(t *testing.T) {
	c := startCluster(t)
	cs := cgClientset(t, c.clientGoConfig(t))
	ctx := cgContext(t, 3*time.Minute)
	kubelets := startFakeKubelets(t, ctx, cs, "node-a", "node-b")
	kubectl := kubectlVersions(t)["default"]

	c.ok(t, kubectl, "create", "deployment", "api", "--image=busybox:1", "--replicas=3", "--port=8080")
	c.ok(t, kubectl, "expose", "deployment", "api", "--port=80", "--target-port=8080")
	pods := waitAppReady(t, ctx, cs, "default", "api", 3, "busybox:1")

	readiness := func() (map[string]bool, error) {
		slices, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=api"})
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.TargetRef != nil {
					out[ep.TargetRef.Name] = ep.Conditions.Ready != nil && *ep.Conditions.Ready
				}
			}
			if len(s.Ports) != 1 || s.Ports[0].Port == nil || *s.Ports[0].Port != 8080 {
				return nil, fmt.Errorf("slice %s ports %v, want 8080", s.Name, s.Ports)
			}
		}
		return out, nil
	}
	cgEventually(t, "3 ready endpoints", 30*time.Second, 50*time.Millisecond, func() (bool, error) {
		r, err := readiness()
		return err == nil && len(r) == 3 && r[pods[0].Name] && r[pods[1].Name] && r[pods[2].Name], err
	})

	for _, ready := range []bool{false, true} {
		flipped := time.Now()
		kubelets.setReady(pods[1].Name, ready)
		cgEventually(t, fmt.Sprintf("endpoint of %s ready=%v", pods[1].Name, ready), 30*time.Second, 20*time.Millisecond, func() (bool, error) {
			r, err := readiness()
			return err == nil && len(r) == 3 && r[pods[1].Name] == ready, err
		})
		// A figure, not a pass/fail timing: this machine is shared.
		t.Logf("pod readiness %v -> EndpointSlice: %v (includes the fake kubelet's status write)", ready, time.Since(flipped).Round(time.Millisecond))
	}
	eps, err := cs.CoreV1().Endpoints("default").Get(ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(eps.Subsets) != 1 || len(eps.Subsets[0].Addresses) != 3 {
		t.Errorf("Endpoints: %+v, want one subset with 3 addresses", eps.Subsets)
	}

	// Scale to 1: the slice follows.
	c.ok(t, kubectl, "scale", "deployment/api", "--replicas=1")
	cgEventually(t, "1 endpoint after scaling down", 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		r, err := readiness()
		return err == nil && len(r) == 1, err
	})
	var d *appsv1.Deployment
	if d, err = cs.AppsV1().Deployments("default").Get(ctx, "api", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 1 {
		t.Fatalf("deployment after scale: %v", err)
	}
}

const workloadManifests = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "busybox:1"}]}
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 5432}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "busybox:1"}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`

func TestControlLoops_JobDaemonSetStatefulSet_WithKubectl(t *testing.T) {
	c := startCluster(t)
	cs := cgClientset(t, c.clientGoConfig(t))
	ctx := cgContext(t, 3*time.Minute)
	startFakeKubelets(t, ctx, cs, "node-a", "node-b", "node-c")
	kubectl := kubectlVersions(t)["default"]

	c.ok(t, kubectl, "create", "job", "hello", "--image=busybox:1")
	c.ok(t, kubectl, "wait", "--for=condition=complete", "job/hello", "--timeout=60s")
	out := c.ok(t, kubectl, "get", "job", "hello")
	mustContain(t, "get job", out, "Complete", "1/1")

	c.okIn(t, kubectl, workloadManifests, "apply", "-f", "-")
	// One daemon pod per node, bound by the scheduler through the pods'
	// node affinity.
	cgEventually(t, "a ready daemon pod on each node", 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		pods := appPods(t, ctx, cs, "default", "agent")
		nodes := map[string]bool{}
		for _, p := range pods {
			if podIsReady(&p) {
				nodes[p.Spec.NodeName] = true
			}
		}
		return len(pods) == 3 && len(nodes) == 3, nil
	})
	c.ok(t, kubectl, "rollout", "status", "daemonset/agent", "--timeout=60s")
	c.ok(t, kubectl, "rollout", "status", "statefulset/db", "--timeout=60s")
	pods := appPods(t, ctx, cs, "default", "db")
	if len(pods) != 2 || pods[0].Name != "db-0" || pods[1].Name != "db-1" || pods[0].Spec.Hostname != "db-0" || pods[0].Spec.Subdomain != "db" {
		t.Fatalf("statefulset pods: %v", pods)
	}
	pvcs, err := cs.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pvcs.Items) != 2 || pvcs.Items[0].Name != "data-db-0" {
		t.Errorf("claims: %d (%v), want data-db-0 and data-db-1", len(pvcs.Items), pvcs.Items)
	}
	// The headless service lists each member with its hostname.
	cgEventually(t, "db endpoints with hostnames", 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		slices, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=db"})
		if err != nil {
			return false, err
		}
		hosts := 0
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Hostname != nil {
					hosts++
				}
			}
		}
		return hosts == 2, nil
	})
	// Deployment rollout verbs kubectl users reach for.
	c.ok(t, kubectl, "create", "deployment", "web", "--image=busybox:1", "--replicas=2")
	c.ok(t, kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
	c.ok(t, kubectl, "rollout", "pause", "deployment/web")
	c.ok(t, kubectl, "set", "image", "deployment/web", "busybox=busybox:2")
	time.Sleep(time.Second)
	if pods := appPods(t, ctx, cs, "default", "web"); len(pods) != 2 || pods[0].Spec.Containers[0].Image != "busybox:1" || pods[1].Spec.Containers[0].Image != "busybox:1" {
		t.Errorf("a paused deployment rolled out")
	}
	c.ok(t, kubectl, "rollout", "resume", "deployment/web")
	c.ok(t, kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
	waitAppReady(t, ctx, cs, "default", "web", 2, "busybox:2")
	before := appPods(t, ctx, cs, "default", "web")
	c.ok(t, kubectl, "rollout", "restart", "deployment/web")
	c.ok(t, kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
	cgEventually(t, "restart replaced every pod", 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		after := appPods(t, ctx, cs, "default", "web")
		if len(after) != 2 {
			return false, nil
		}
		for _, p := range after {
			for _, b := range before {
				if p.Name == b.Name {
					return false, nil
				}
			}
		}
		return true, nil
	})
}
