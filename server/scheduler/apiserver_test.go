package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"skiff/server/apiserver/apitest"
)

// eventLog is a record.EventRecorder keeping events as
// "Type Reason namespace/name: message".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Event(obj runtime.Object, typ, reason, msg string) {
	name := "?"
	if p, ok := obj.(*v1.Pod); ok {
		name = p.Namespace + "/" + p.Name
	}
	l.mu.Lock()
	l.events = append(l.events, fmt.Sprintf("%s %s %s: %s", typ, reason, name, msg))
	l.mu.Unlock()
}

func (l *eventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	l.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	l.Eventf(obj, typ, reason, format, args...)
}

// find returns the events with this prefix ("Normal Scheduled default/p").
func (l *eventLog) find(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

type cluster struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	events *eventLog
}

// startCluster runs a real API server and the scheduler against it.
func startCluster(t *testing.T, settings Settings) *cluster {
	t.Helper()
	srv := apitest.Start(t, apitest.Options{})
	client := kubernetes.NewForConfigOrDie(srv.Config(nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c := &cluster{t: t, ctx: ctx, client: client, events: &eventLog{}}
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() {
		done <- Run(runCtx, Config{Client: client, Informers: factory, Recorder: c.events, Settings: settings,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		factory.Shutdown()
		cancel()
	})
	return c
}

type nodeOpt func(*v1.Node)

func withTaint(key string) nodeOpt {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
	}
}

// node creates a Ready node with this much cpu and memory.
func (c *cluster) node(name, cpu, mem string, opts ...nodeOpt) *v1.Node {
	c.t.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}}}
	for _, o := range opts {
		o(n)
	}
	created, err := c.client.CoreV1().Nodes().Create(c.ctx, n, metav1.CreateOptions{})
	must(c.t, err)
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem), v1.ResourcePods: resource.MustParse("110")}
	created.Status = v1.NodeStatus{Capacity: rl, Allocatable: rl, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}}
	updated, err := c.client.CoreV1().Nodes().UpdateStatus(c.ctx, created, metav1.UpdateOptions{})
	must(c.t, err)
	return updated
}

type podOpt func(*v1.Pod)

func prio(p int32) podOpt { return func(pod *v1.Pod) { pod.Spec.Priority = &p } }

func schedulerName(n string) podOpt { return func(pod *v1.Pod) { pod.Spec.SchedulerName = n } }

// pod creates a pending pod requesting cpu.
func (c *cluster) pod(name, cpu string, opts ...podOpt) *v1.Pod {
	c.t.Helper()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "app", Image: "registry.example/app:v1",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("64Mi")}},
	}}}}
	for _, o := range opts {
		o(p)
	}
	created, err := c.client.CoreV1().Pods("default").Create(c.ctx, p, metav1.CreateOptions{})
	must(c.t, err)
	return created
}

func (c *cluster) get(name string) *v1.Pod {
	c.t.Helper()
	p, err := c.client.CoreV1().Pods("default").Get(c.ctx, name, metav1.GetOptions{})
	must(c.t, err)
	return p
}

func (c *cluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(c.ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		c.t.Fatalf("timed out waiting for %s", what)
	}
}

func (c *cluster) boundTo(name string) string {
	c.t.Helper()
	var node string
	c.eventually(name+" to be bound", func() bool {
		node = c.get(name).Spec.NodeName
		return node != ""
	})
	return node
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestScheduler_BindsPodsSpreadingThemEvenlyOverNodes(t *testing.T) {
	c := startCluster(t, Settings{})
	for i := range 3 {
		c.node(fmt.Sprintf("node-%d", i), "4", "8Gi")
	}
	for i := range 12 {
		c.pod(fmt.Sprintf("web-%d", i), "500m")
	}
	perNode := map[string]int{}
	for i := range 12 {
		perNode[c.boundTo(fmt.Sprintf("web-%d", i))]++
	}
	for i := range 3 {
		if n := perNode[fmt.Sprintf("node-%d", i)]; n != 4 {
			t.Errorf("pods per node %v, want 4 each", perNode)
			break
		}
	}
	if cond := c.get("web-0").Status.Conditions; !slices.ContainsFunc(cond, func(x v1.PodCondition) bool { return x.Type == v1.PodScheduled && x.Status == v1.ConditionTrue }) {
		t.Errorf("web-0 conditions %v, want PodScheduled=True", cond)
	}
	c.eventually("the Scheduled events", func() bool { return len(c.events.find("Normal Scheduled default/web-")) == 12 })
	ev := c.events.find("Normal Scheduled default/web-11:")[0]
	if !strings.Contains(ev, "Successfully assigned default/web-11 to node-") || !strings.Contains(ev, "(score ") || !strings.Contains(ev, "NodeResourcesFit ") || !strings.Contains(ev, "; runner-up node-") {
		t.Errorf("Scheduled event %q lacks the scores", ev)
	}
}

func TestScheduler_DaemonSetStylePinnedPodGoesToItsNode(t *testing.T) {
	c := startCluster(t, Settings{})
	for i := range 3 {
		c.node(fmt.Sprintf("node-%d", i), "4", "8Gi")
	}
	c.pod("ds-pod", "100m", func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{"node-2"}}},
		}}}}}
	})
	if got := c.boundTo("ds-pod"); got != "node-2" {
		t.Errorf("bound to %s, want node-2", got)
	}
}

const taintedMsg = "0/1 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."

func unschedulableMessage(p *v1.Pod) string {
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse && cond.Reason == v1.PodReasonUnschedulable {
			return cond.Message
		}
	}
	return ""
}

func TestScheduler_UnschedulablePodReportsWhyAndBindsOnceANodeFits(t *testing.T) {
	c := startCluster(t, Settings{})
	c.node("control-plane", "8", "8Gi", withTaint("node-role.kubernetes.io/control-plane"))
	c.pod("waiting", "1")
	c.eventually("the Unschedulable condition", func() bool { return unschedulableMessage(c.get("waiting")) == taintedMsg })
	if evs := c.events.find("Warning FailedScheduling default/waiting: " + taintedMsg); len(evs) == 0 {
		t.Errorf("no FailedScheduling event with the condition's message; events: %v", c.events.find(""))
	}
	c.node("worker", "2", "4Gi")
	if got := c.boundTo("waiting"); got != "worker" {
		t.Errorf("bound to %s, want worker", got)
	}
}

func TestScheduler_RetryWithTheSameReasonDoesNotRewriteTheCondition(t *testing.T) {
	c := startCluster(t, Settings{})
	cp := c.node("control-plane", "8", "8Gi", withTaint("node-role.kubernetes.io/control-plane"))
	c.pod("waiting", "1")
	c.eventually("the Unschedulable condition", func() bool { return unschedulableMessage(c.get("waiting")) == taintedMsg })
	w, err := c.client.CoreV1().Pods("default").Watch(c.ctx, metav1.ListOptions{ResourceVersion: c.get("waiting").ResourceVersion})
	must(t, err)
	defer w.Stop()
	// A label change is a node update the pod is retried on; it still
	// does not fit, for the same reason.
	cp.Labels["touched"] = "yes"
	_, err = c.client.CoreV1().Nodes().Update(c.ctx, cp, metav1.UpdateOptions{})
	must(t, err)
	c.eventually("a second attempt", func() bool { return len(c.events.find("Warning FailedScheduling default/waiting")) >= 2 })
	// The second attempt's status wish was made before the pod can be
	// bound, and is dropped once it is: a rewrite would show up as a
	// change before the binding.
	c.node("worker", "2", "4Gi")
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*v1.Pod)
		if !ok || p.Name != "waiting" {
			continue
		}
		if p.Spec.NodeName == "" {
			t.Errorf("pod rewritten while still pending (%s): conditions %v", ev.Type, p.Status.Conditions)
		}
		return
	}
	t.Fatal("watch ended before the pod was bound")
}

// playKubelet deletes terminating pods for good once release says so, as a
// kubelet would after the containers stop.
func (c *cluster) playKubelet(release func(*v1.Pod) bool) {
	go func() {
		for c.ctx.Err() == nil {
			pods, err := c.client.CoreV1().Pods("default").List(c.ctx, metav1.ListOptions{})
			if err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					if p.DeletionTimestamp != nil && release(p) {
						_ = c.client.CoreV1().Pods("default").Delete(c.ctx, p.Name, *metav1.NewDeleteOptions(0))
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

func TestScheduler_PreemptsALowerPriorityPodAndKeepsTheRoomForThePreemptor(t *testing.T) {
	c := startCluster(t, Settings{})
	c.node("n1", "2", "4Gi")
	victim := c.pod("victim", "2", prio(1))
	c.boundTo("victim")
	var released sync.Once
	release := make(chan struct{})
	c.playKubelet(func(p *v1.Pod) bool {
		select {
		case <-release:
			return true
		default:
			return false
		}
	})
	high := c.pod("high", "1", prio(100))
	c.eventually("high to be nominated to n1", func() bool { return c.get("high").Status.NominatedNodeName == "n1" })
	c.eventually("the victim to be terminating", func() bool { return c.get("victim").DeletionTimestamp != nil })
	if cond := c.get("victim").Status.Conditions; !slices.ContainsFunc(cond, func(x v1.PodCondition) bool {
		return x.Type == v1.DisruptionTarget && x.Reason == v1.PodReasonPreemptionByScheduler
	}) {
		t.Errorf("victim conditions %v, want DisruptionTarget/PreemptionByScheduler", cond)
	}
	want := fmt.Sprintf("Normal Preempted default/victim: Preempted by pod %s on node n1", high.UID)
	c.eventually("the Preempted event", func() bool { return len(c.events.find(want)) == 1 })
	// A pod more important than the victim but less than the preemptor
	// must not take the room preemption made.
	c.pod("sneaky", "2", prio(50))
	c.eventually("sneaky to fail once", func() bool { return len(c.events.find("Warning FailedScheduling default/sneaky")) > 0 })
	released.Do(func() { close(release) })
	c.eventually("the victim to be gone", func() bool {
		_, err := c.client.CoreV1().Pods("default").Get(c.ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if got := c.boundTo("high"); got != "n1" {
		t.Errorf("high bound to %s, want n1", got)
	}
	c.eventually("sneaky to be told why", func() bool {
		return strings.HasPrefix(unschedulableMessage(c.get("sneaky")), "0/1 nodes are available: 1 Insufficient cpu.")
	})
	if n := c.get("sneaky").Spec.NodeName; n != "" {
		t.Errorf("sneaky took the preemptor's room on %s", n)
	}
}

func TestScheduler_ConfigFileProfilesServeTheirSchedulerNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	must(t, os.WriteFile(path, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packer
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy: {type: MostAllocated}
`), 0o600))
	settings, err := LoadConfig(path)
	must(t, err)
	c := startCluster(t, settings)
	c.pod("foreign", "100m", schedulerName("someone-else"))
	for i := range 3 {
		c.node(fmt.Sprintf("node-%d", i), "4", "8Gi")
	}
	nodes := map[string]bool{}
	for i := range 4 {
		name := fmt.Sprintf("packed-%d", i)
		c.pod(name, "500m", schedulerName("bin-packer"))
		nodes[c.boundTo(name)] = true
	}
	if len(nodes) != 1 {
		t.Errorf("bin-packer spread pods over %v, want one node", nodes)
	}
	c.pod("spread", "500m")
	if n := c.boundTo("spread"); nodes[n] {
		t.Errorf("default-scheduler put a pod on the packed node %s", n)
	}
	if n := c.get("foreign").Spec.NodeName; n != "" {
		t.Errorf("a pod for another scheduler was bound to %s", n)
	}
}
