package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"skiff/server/controller/controllertest"
)

// cluster is our API server over SQLite with the test playing every
// kubelet: it registers nodes, posts their status and renews their leases.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{metav1.NamespaceDefault, corev1.NamespaceNodeLease}, Timeout: 45 * time.Second})
	return &cluster{t: t, ctx: ce.Ctx, client: ce.Client}
}

// run starts the controller with short periods; it is stopped, and must
// return cleanly, when the test ends.
func (c *cluster) run(cfg Config) {
	c.t.Helper()
	cfg.Client = c.client
	cfg.Informers = controllertest.Informers(c.t, c.client)
	cfg.Recorder = controllertest.APIRecorder(c.t, c.client, "node-controller")
	cfg.Logger = controllertest.Logger(c.t, slog.LevelInfo)
	cfg.NodeMonitorPeriod = 200 * time.Millisecond
	cfg.NodeMonitorGracePeriod = 2 * time.Second
	cfg.NodeStartupGracePeriod = 2 * time.Second
	controllertest.Run(c.t, c.ctx, func(ctx context.Context) error { return Run(ctx, cfg) })
}

func (c *cluster) addNode(name string, mutate func(*corev1.Node)) {
	c.t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if mutate != nil {
		mutate(node)
	}
	_, err := c.client.CoreV1().Nodes().Create(c.ctx, node, metav1.CreateOptions{})
	must(c.t, err)
}

// postStatus is the kubelet reporting its conditions (Ready as given,
// pressures as in pressed, the rest False).
func (c *cluster) postStatus(name string, ready corev1.ConditionStatus, pressed ...corev1.NodeConditionType) {
	c.t.Helper()
	node, err := c.client.CoreV1().Nodes().Get(c.ctx, name, metav1.GetOptions{})
	must(c.t, err)
	now := metav1.Now()
	node.Status.Conditions = nil
	for _, t := range conditionsToJudge {
		s := corev1.ConditionFalse
		if t == corev1.NodeReady {
			s = ready
		}
		for _, p := range pressed {
			if p == t {
				s = corev1.ConditionTrue
			}
		}
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: t, Status: s, Reason: "Kubelet", LastHeartbeatTime: now, LastTransitionTime: now})
	}
	_, err = c.client.CoreV1().Nodes().UpdateStatus(c.ctx, node, metav1.UpdateOptions{})
	must(c.t, err)
}

// kubelet renews the node's lease until the returned stop is called.
func (c *cluster) kubelet(name string) (stop func()) {
	c.t.Helper()
	leases := c.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	_, err := leases.Create(c.ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordv1.LeaseSpec{HolderIdentity: &name, RenewTime: &now}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if l, err := leases.Get(ctx, name, metav1.GetOptions{}); err == nil {
				now := metav1.NewMicroTime(time.Now())
				l.Spec.RenewTime = &now
				_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	c.t.Cleanup(stop)
	return stop
}

func tolerateUnreachable(seconds *int64) corev1.Toleration {
	return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
}

// addPod binds a running, ready pod to node.
func (c *cluster) addPod(name, node string, tolerations ...corev1.Toleration) {
	c.t.Helper()
	pods := c.client.CoreV1().Pods(metav1.NamespaceDefault)
	pod, err := pods.Create(c.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Tolerations: tolerations, Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
	}, metav1.CreateOptions{})
	must(c.t, err)
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	_, err = pods.UpdateStatus(c.ctx, pod, metav1.UpdateOptions{})
	must(c.t, err)
}

func (c *cluster) node(name string) *corev1.Node {
	c.t.Helper()
	n, err := c.client.CoreV1().Nodes().Get(c.ctx, name, metav1.GetOptions{})
	must(c.t, err)
	return n
}

// podExists reports whether the pod is still there and not being deleted.
func (c *cluster) podExists(name string) bool {
	c.t.Helper()
	p, err := c.client.CoreV1().Pods(metav1.NamespaceDefault).Get(c.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	must(c.t, err)
	return p.DeletionTimestamp == nil
}

func (c *cluster) eventually(what string, ok func() bool) {
	c.t.Helper()
	controllertest.Eventually(c.t, c.ctx, 30*time.Second, func(context.Context) (bool, error) { return ok(), nil }, "%s", what)
}

// holds checks that ok stays true for the whole of d: absence of action
// can only be seen over a window.
func (c *cluster) holds(what string, d time.Duration, ok func() bool) {
	c.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if !ok() {
			c.t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// event finds a core/v1 event about the named object with this reason.
func (c *cluster) event(kind, name, reason string) *corev1.Event {
	c.t.Helper()
	evs, err := c.client.CoreV1().Events(metav1.NamespaceDefault).List(c.ctx, metav1.ListOptions{})
	must(c.t, err)
	for i, e := range evs.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason {
			return &evs.Items[i]
		}
	}
	return nil
}

// expectEvent waits for the event kubectl describe would show.
func (c *cluster) expectEvent(kind, name, eventType, reason, message string) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("%s event on %s %s", reason, kind, name), func() bool { return c.event(kind, name, reason) != nil })
	if e := c.event(kind, name, reason); e.Type != eventType || e.Message != message {
		c.t.Errorf("%s event on %s %s = %s %q, want %s %q", reason, kind, name, e.Type, e.Message, eventType, message)
	}
}

func ourTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range n.Spec.Taints {
		if owned(t) {
			out = append(out, t)
		}
	}
	return out
}

func hasTaints(n *corev1.Node, effect corev1.TaintEffect, keys ...string) bool {
	for _, k := range keys {
		if !hasTaint(n.Spec.Taints, k, effect) {
			return false
		}
	}
	return true
}

func TestNodeLifecycle_LeaseStops_NodeTaintedUnreachable_PodsEvictedPerToleration(t *testing.T) {
	c := startCluster(t)
	dedicated := corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	c.addNode("a", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{dedicated} })
	c.addNode("b", nil)
	stopA := c.kubelet("a")
	c.kubelet("b")
	c.postStatus("a", corev1.ConditionTrue)
	c.postStatus("b", corev1.ConditionTrue)
	c.addPod("impatient", "a")
	c.addPod("patient", "a", tolerateUnreachable(secs(3)))
	c.addPod("loyal", "a", tolerateUnreachable(nil))
	c.addPod("elsewhere", "b")
	c.run(Config{})
	c.expectEvent("Node", "a", corev1.EventTypeNormal, "RegisteredNode", "Node a event: Registered Node a in Controller")
	c.expectEvent("Node", "b", corev1.EventTypeNormal, "RegisteredNode", "Node b event: Registered Node b in Controller")

	stopA()
	c.eventually("a Unknown", func() bool { return readyStatus(c.node("a")) == corev1.ConditionUnknown })
	for _, ct := range conditionsToJudge {
		cond := condition(&c.node("a").Status, ct)
		if cond.Status != corev1.ConditionUnknown || cond.Reason != "NodeStatusUnknown" || cond.Message != "Kubelet stopped posting node status." {
			t.Errorf("a's %s = %s %s %q", ct, cond.Status, cond.Reason, cond.Message)
		}
	}
	c.expectEvent("Node", "a", corev1.EventTypeNormal, "NodeNotReady", "Node a status is now: NodeNotReady")

	// The impatient pod goes as soon as the taint is there, the patient
	// one once its three seconds have run out from the taint's timeAdded.
	var impatientGone, patientGone time.Time
	c.eventually("both intolerant pods evicted", func() bool {
		now := time.Now()
		if impatientGone.IsZero() && !c.podExists("impatient") {
			impatientGone = now
		}
		if patientGone.IsZero() && !c.podExists("patient") {
			patientGone = now
		}
		return !impatientGone.IsZero() && !patientGone.IsZero()
	})
	a := c.node("a")
	if !hasTaints(a, corev1.TaintEffectNoExecute, corev1.TaintNodeUnreachable) || !hasTaints(a, corev1.TaintEffectNoSchedule, corev1.TaintNodeUnreachable, dedicated.Key) {
		t.Fatalf("a's taints = %v, want unreachable NoExecute and NoSchedule beside the dedicated one", a.Spec.Taints)
	}
	var added time.Time
	for _, tn := range a.Spec.Taints {
		if tn.Effect == corev1.TaintEffectNoExecute {
			added = tn.TimeAdded.Time
		}
	}
	if !impatientGone.Before(patientGone) {
		t.Errorf("patient pod went (%v) no later than the impatient one (%v)", patientGone, impatientGone)
	}
	if patientGone.Before(added.Add(3 * time.Second)) {
		t.Errorf("patient pod gone at %v, before its 3 s from the taint added at %v", patientGone, added)
	}
	if !c.podExists("loyal") || !c.podExists("elsewhere") {
		t.Fatal("a tolerating pod or a pod on the healthy node was evicted")
	}
	loyal, err := c.client.CoreV1().Pods(metav1.NamespaceDefault).Get(c.ctx, "loyal", metav1.GetOptions{})
	must(t, err)
	if cond := loyal.Status.Conditions[0]; cond.Type != corev1.PodReady || cond.Status != corev1.ConditionFalse {
		t.Errorf("loyal's conditions = %+v, want Ready False", loyal.Status.Conditions)
	}
	if got := ourTaints(c.node("b")); len(got) != 0 {
		t.Errorf("healthy b got taints %v", got)
	}
	c.expectEvent("Pod", "impatient", corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/impatient")
	c.expectEvent("Pod", "patient", corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/patient")
	c.expectEvent("Pod", "loyal", corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")

	// The kubelet is back: renewals resume and it reports Ready.
	c.kubelet("a")
	c.postStatus("a", corev1.ConditionTrue)
	c.eventually("a's taints lifted", func() bool { return len(ourTaints(c.node("a"))) == 0 })
	if a := c.node("a"); !hasTaint(a.Spec.Taints, dedicated.Key, dedicated.Effect) || readyStatus(a) != corev1.ConditionTrue {
		t.Errorf("a after recovery: taints %v, Ready %s", a.Spec.Taints, readyStatus(a))
	}
	if !c.podExists("loyal") {
		t.Error("loyal pod evicted")
	}
}

func TestNodeLifecycle_AllNodesStale_FullDisruptionEvictsNothingUntilANodeIsBack(t *testing.T) {
	c := startCluster(t)
	var stops []func()
	for _, n := range []string{"a", "b"} {
		c.addNode(n, nil)
		stops = append(stops, c.kubelet(n))
		c.postStatus(n, corev1.ConditionTrue)
	}
	// The admission default (300 s) in miniature: a node tainted just
	// before the disruption is seen must not cost this pod.
	c.addPod("patient", "a", tolerateUnreachable(secs(2)))
	c.run(Config{EvictionLimiterQPS: -1})
	c.expectEvent("Node", "b", corev1.EventTypeNormal, "RegisteredNode", "Node b event: Registered Node b in Controller")

	// This host's network goes: every kubelet falls silent at once.
	for _, stop := range stops {
		stop()
	}
	disrupted := func() bool {
		for _, n := range []string{"a", "b"} {
			node := c.node(n)
			if readyStatus(node) != corev1.ConditionUnknown || !hasTaint(node.Spec.Taints, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) ||
				len(noExecuteTaints(node.Spec.Taints)) != 0 {
				return false
			}
		}
		return true
	}
	c.eventually("both nodes Unknown, NoSchedule only", disrupted)
	c.addPod("impatient-a", "a")
	c.addPod("impatient-b", "b")
	c.holds("no NoExecute taint and no eviction", 3*time.Second, func() bool {
		return disrupted() && c.podExists("patient") && c.podExists("impatient-a") && c.podExists("impatient-b")
	})

	// b is back; a, still silent, is now judged on its own.
	c.kubelet("b")
	c.postStatus("b", corev1.ConditionTrue)
	c.eventually("a tainted NoExecute", func() bool {
		return hasTaint(c.node("a").Spec.Taints, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	})
	c.eventually("a's pods evicted", func() bool { return !c.podExists("impatient-a") && !c.podExists("patient") })
	if !c.podExists("impatient-b") {
		t.Error("the pod on b, Ready again, was evicted")
	}
	if got := noExecuteTaints(c.node("b").Spec.Taints); len(got) != 0 {
		t.Errorf("b, Ready again, has NoExecute taints %v", got)
	}
}

func TestNodeLifecycle_ConditionTaints_FollowReportsAndSilence(t *testing.T) {
	c := startCluster(t)
	c.addNode("healthy", nil)
	c.kubelet("healthy")
	c.postStatus("healthy", corev1.ConditionTrue)
	c.addNode("sick", func(n *corev1.Node) { n.Spec.Unschedulable = true })
	stopSick := c.kubelet("sick")
	c.postStatus("sick", corev1.ConditionFalse, corev1.NodeMemoryPressure, corev1.NodeDiskPressure)
	// Admission taints a new node not-ready until it reports; this one
	// never does, nor does it hold a lease.
	c.addNode("bare", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
	})
	c.run(Config{EvictionLimiterQPS: -1})

	sickTaints := func(ready string) func() bool {
		return func() bool {
			n := c.node("sick")
			return hasTaints(n, corev1.TaintEffectNoSchedule, ready, corev1.TaintNodeMemoryPressure, corev1.TaintNodeDiskPressure, corev1.TaintNodeUnschedulable) &&
				hasTaints(n, corev1.TaintEffectNoExecute, ready) && len(ourTaints(n)) == 5
		}
	}
	c.eventually("sick tainted not-ready, pressured and unschedulable", sickTaints(corev1.TaintNodeNotReady))
	if readyStatus(c.node("sick")) != corev1.ConditionFalse {
		t.Error("sick, renewing its lease, was judged Unknown")
	}
	c.eventually("bare judged after its startup grace", func() bool {
		n := c.node("bare")
		return readyStatus(n) == corev1.ConditionUnknown && hasTaints(n, corev1.TaintEffectNoSchedule, corev1.TaintNodeUnreachable) &&
			hasTaints(n, corev1.TaintEffectNoExecute, corev1.TaintNodeUnreachable) && len(ourTaints(n)) == 2
	})
	for _, ct := range conditionsToJudge {
		cond := condition(&c.node("bare").Status, ct)
		if cond == nil || cond.Reason != "NodeStatusNeverUpdated" || cond.Message != "Kubelet never posted node status." {
			t.Errorf("bare's %s = %+v", ct, cond)
		}
	}

	// Silence turns not-ready into unreachable, and the pressures Unknown.
	stopSick()
	c.eventually("sick swapped to unreachable", func() bool {
		n := c.node("sick")
		return hasTaints(n, corev1.TaintEffectNoSchedule, corev1.TaintNodeUnreachable, corev1.TaintNodeUnschedulable) &&
			hasTaints(n, corev1.TaintEffectNoExecute, corev1.TaintNodeUnreachable) && len(ourTaints(n)) == 3
	})
	sick := c.node("sick")
	sick.Spec.Unschedulable = false
	_, err := c.client.CoreV1().Nodes().Update(c.ctx, sick, metav1.UpdateOptions{})
	must(t, err)
	c.eventually("unschedulable taint gone", func() bool {
		return !hasTaint(c.node("sick").Spec.Taints, corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)
	})
	if got := ourTaints(c.node("healthy")); len(got) != 0 {
		t.Errorf("healthy node got taints %v", got)
	}
}
