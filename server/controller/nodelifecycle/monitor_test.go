package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// harness drives the controller's passes by hand over a fake clientset
// and a fake clock: the informers are not run, the test fills their
// stores, so every step is deterministic.
type harness struct {
	t       *testing.T
	c       *controller
	client  *fake.Clientset
	clock   *clocktesting.FakeClock
	rec     *record.FakeRecorder
	factory informers.SharedInformerFactory
}

func newHarness(t *testing.T, cfg Config, objs ...runtime.Object) *harness {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	client := fake.NewClientset(objs...)
	rec := record.NewFakeRecorder(1000)
	cfg.Client, cfg.Clock, cfg.Recorder = client, clk, rec
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c := newController(cfg, factory)
	podInf := factory.Core().V1().Pods().Informer()
	if err := podInf.AddIndexers(cache.Indexers{podsByNode: indexPodByNode}); err != nil {
		t.Fatal(err)
	}
	c.podIdx = podInf.GetIndexer()
	t.Cleanup(func() {
		c.taintQ.ShutDown()
		c.evictQ.ShutDown()
	})
	h := &harness{t: t, c: c, client: client, clock: clk, rec: rec, factory: factory}
	h.refresh()
	return h
}

// refresh copies what the fake API holds into the listers, as the
// informers would.
func (h *harness) refresh() {
	h.t.Helper()
	ctx := context.Background()
	nodes, err := h.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	must(h.t, err)
	store := h.factory.Core().V1().Nodes().Informer().GetStore()
	must(h.t, store.Replace(toAny(nodes.Items), ""))
	pods, err := h.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	must(h.t, err)
	must(h.t, h.factory.Core().V1().Pods().Informer().GetStore().Replace(toAny(pods.Items), ""))
	leases, err := h.client.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
	must(h.t, err)
	must(h.t, h.factory.Coordination().V1().Leases().Informer().GetStore().Replace(toAny(leases.Items), ""))
}

func toAny[T any](items []T) []any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// renew plays the kubelets of the named nodes renewing their leases.
func (h *harness) renew(names ...string) {
	h.t.Helper()
	for _, name := range names {
		l, err := h.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), name, metav1.GetOptions{})
		must(h.t, err)
		now := metav1.NewMicroTime(h.clock.Now())
		l.Spec.RenewTime = &now
		_, err = h.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(context.Background(), l, metav1.UpdateOptions{})
		must(h.t, err)
	}
}

// pass steps the clock, lets the named kubelets renew, and runs a monitor
// pass on what the listers then show.
func (h *harness) pass(step time.Duration, renewing ...string) {
	h.t.Helper()
	h.clock.Step(step)
	h.renew(renewing...)
	h.refresh()
	h.c.monitorOnce(context.Background())
	h.refresh()
}

func (h *harness) node(name string) *corev1.Node {
	h.t.Helper()
	n, err := h.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	must(h.t, err)
	return n
}

func (h *harness) verdict(name string) (string, bool) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	v, ok := h.c.noExecute[name]
	return v, ok
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func readyNode(name string, labels map[string]string) *corev1.Node {
	hb := metav1.NewTime(t0.Add(-48 * time.Hour)) // remote clocks are not trusted
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: hb, LastTransitionTime: hb},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: hb, LastTransitionTime: hb},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: hb, LastTransitionTime: hb},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: hb, LastTransitionTime: hb},
		}},
	}
}

func lease(name string) *coordv1.Lease {
	renew := metav1.NewMicroTime(t0.Add(-48 * time.Hour))
	return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease}, Spec: coordv1.LeaseSpec{HolderIdentity: &name, RenewTime: &renew}}
}

func nodesWithLeases(names ...string) []runtime.Object {
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, readyNode(n, nil), lease(n))
	}
	return objs
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMonitor_SilentNodeJudgedOnControllerClock_ConditionsUnknownAndVerdictUnreachable(t *testing.T) {
	h := newHarness(t, Config{}, nodesWithLeases("quiet", "busy")...)
	h.pass(0, "quiet", "busy")
	h.pass(30*time.Second, "quiet", "busy")
	h.pass(39*time.Second, "busy")
	if got := readyStatus(h.node("quiet")); got != corev1.ConditionTrue {
		t.Fatalf("quiet judged %s after 39 s of silence, within the 40 s grace", got)
	}
	h.pass(2*time.Second, "busy")
	quiet := h.node("quiet")
	for _, ct := range conditionsToJudge {
		c := condition(&quiet.Status, ct)
		if c == nil || c.Status != corev1.ConditionUnknown || c.Reason != "NodeStatusUnknown" || c.Message != "Kubelet stopped posting node status." {
			t.Errorf("condition %s = %+v, want Unknown/NodeStatusUnknown", ct, c)
		}
	}
	if got := readyStatus(h.node("busy")); got != corev1.ConditionTrue {
		t.Errorf("busy node is %s", got)
	}
	if v, ok := h.verdict("quiet"); !ok || v != corev1.TaintNodeUnreachable {
		t.Errorf("verdict for quiet = %q, %v; want unreachable", v, ok)
	}
	if v, ok := h.verdict("busy"); !ok || v != "" {
		t.Errorf("verdict for busy = %q, %v; want none", v, ok)
	}
	evs := strings.Join(h.events(), "\n")
	for _, want := range []string{
		"Normal RegisteredNode Node quiet event: Registered Node quiet in Controller",
		"Normal NodeNotReady Node quiet status is now: NodeNotReady",
	} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}
	// The verdict is carried out by the taint worker.
	must(t, h.c.syncTaints(context.Background(), "quiet"))
	got := h.node("quiet").Spec.Taints
	if !hasTaint(got, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) || !hasTaint(got, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) {
		t.Errorf("taints = %v, want both unreachable", got)
	}
	for _, tn := range got {
		if tn.Effect == corev1.TaintEffectNoExecute && (tn.TimeAdded == nil || !tn.TimeAdded.Time.Equal(h.clock.Now().Truncate(time.Second))) {
			t.Errorf("NoExecute taint stamped %v, want the controller's now %v", tn.TimeAdded, h.clock.Now())
		}
	}
}

func TestMonitor_NeverPostedNode_GetsStartupGraceThenNeverUpdated(t *testing.T) {
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))}}
	objs := append(nodesWithLeases("busy"), bare)
	h := newHarness(t, Config{}, objs...)
	h.pass(0, "busy")
	h.pass(50*time.Second, "busy") // past the monitor grace, within the startup one
	if c := condition(&h.node("bare").Status, corev1.NodeReady); c != nil {
		t.Fatalf("bare judged within its startup grace: %+v", c)
	}
	h.pass(11*time.Second, "busy")
	got := h.node("bare")
	for _, ct := range conditionsToJudge {
		c := condition(&got.Status, ct)
		if c == nil || c.Status != corev1.ConditionUnknown || c.Reason != "NodeStatusNeverUpdated" || c.Message != "Kubelet never posted node status." {
			t.Errorf("condition %s = %+v", ct, c)
		}
	}
}

func TestMonitor_ZoneLimiter_TaintsOneNodePerTenSeconds(t *testing.T) {
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	h := newHarness(t, Config{}, nodesWithLeases(names...)...)
	healthy := names[2:]
	h.pass(0, names...)
	h.pass(41*time.Second, healthy...)
	tainted := func() int {
		n := 0
		for _, name := range names[:2] {
			if v, _ := h.verdict(name); v == corev1.TaintNodeUnreachable {
				n++
			}
		}
		return n
	}
	if got := tainted(); got != 1 {
		t.Fatalf("%d nodes tainted in the first pass, want 1", got)
	}
	h.pass(5*time.Second, healthy...)
	if got := tainted(); got != 1 {
		t.Fatalf("%d nodes tainted 5 s later, want still 1", got)
	}
	h.pass(5*time.Second, healthy...)
	if got := tainted(); got != 2 {
		t.Fatalf("%d nodes tainted 10 s later, want 2", got)
	}
}

func TestMonitor_PartialDisruptionInSmallZone_StopsNewTaints(t *testing.T) {
	zoned := func(name, zone string) *corev1.Node {
		return readyNode(name, map[string]string{corev1.LabelTopologyZone: zone})
	}
	objs := []runtime.Object{zoned("a1", "a"), zoned("a2", "a"), zoned("a3", "a"), zoned("a4", "a"), zoned("b1", "b"),
		lease("a1"), lease("a2"), lease("a3"), lease("a4"), lease("b1")}
	h := newHarness(t, Config{EvictionLimiterQPS: -1}, objs...)
	h.pass(0, "a1", "a2", "a3", "a4", "b1")
	h.pass(41*time.Second, "a4", "b1") // three of four in zone a go quiet
	for _, name := range []string{"a1", "a2", "a3"} {
		if v, _ := h.verdict(name); v != "" {
			t.Errorf("%s tainted %q in a partially disrupted small zone", name, v)
		}
		if got := readyStatus(h.node(name)); got != corev1.ConditionUnknown {
			t.Errorf("%s is %s, want Unknown all the same", name, got)
		}
	}
	if got := h.c.monitor.states[zoneOf(h.node("a1"))]; got != statePartial {
		t.Errorf("zone a is %s", got)
	}
}

func TestMonitor_FullDisruption_LiftsTaintsAndResumesWhenANodeIsBack(t *testing.T) {
	h := newHarness(t, Config{EvictionLimiterQPS: -1}, nodesWithLeases("a", "b")...)
	h.pass(0, "a", "b")
	h.pass(20*time.Second, "b")
	h.pass(21*time.Second, "b") // a is 41 s quiet, b not
	if v, _ := h.verdict("a"); v != corev1.TaintNodeUnreachable {
		t.Fatalf("verdict for a = %q before the disruption", v)
	}
	h.pass(41 * time.Second) // now b too
	for _, name := range []string{"a", "b"} {
		if v, ok := h.verdict(name); !ok || v != "" {
			t.Errorf("verdict for %s = %q in full disruption, want none", name, v)
		}
	}
	if !h.c.monitor.disrupted {
		t.Fatal("not in full disruption with every node Unknown")
	}
	// b's kubelet is back and posts Ready.
	b := h.node("b")
	for i := range b.Status.Conditions {
		b.Status.Conditions[i].Status = corev1.ConditionFalse
		if b.Status.Conditions[i].Type == corev1.NodeReady {
			b.Status.Conditions[i].Status = corev1.ConditionTrue
		}
		b.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(h.clock.Now())
	}
	_, err := h.client.CoreV1().Nodes().UpdateStatus(context.Background(), b, metav1.UpdateOptions{})
	must(t, err)
	h.pass(time.Second, "b")
	if h.c.monitor.disrupted {
		t.Fatal("still in full disruption with b Ready")
	}
	if v, _ := h.verdict("a"); v != corev1.TaintNodeUnreachable {
		t.Errorf("verdict for a = %q after the disruption, want unreachable", v)
	}
	if got := h.c.monitor.health["a"].probe; !got.Equal(h.clock.Now()) {
		t.Errorf("a's probe = %v, want reset to %v on leaving the disruption", got, h.clock.Now())
	}
}

func TestMonitor_NodeGoesUnknown_PodsMarkedNotReadyOnce(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "a"},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	objs := append(nodesWithLeases("a", "b"), pod)
	h := newHarness(t, Config{}, objs...)
	h.pass(0, "a", "b")
	h.pass(41*time.Second, "b")
	got, err := h.client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	must(t, err)
	if c := got.Status.Conditions[0]; c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Time.Equal(h.clock.Now().Truncate(time.Second)) {
		t.Errorf("pod Ready = %+v, want False now", c)
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, "Warning NodeNotReady Node is not ready") {
		t.Errorf("no NodeNotReady event for the pod:\n%s", evs)
	}
	// A later readiness report is the kubelet's to make; we do not fight it.
	got.Status.Conditions[0].Status = corev1.ConditionTrue
	_, err = h.client.CoreV1().Pods("default").UpdateStatus(context.Background(), got, metav1.UpdateOptions{})
	must(t, err)
	h.pass(5*time.Second, "b")
	got, err = h.client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	must(t, err)
	if got.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Error("pod marked not ready again on a later pass")
	}
}

func TestJudgePod_WaitsOutTolerationThenEvicts_CancelsWhenTaintGoes(t *testing.T) {
	node := readyNode("a", nil)
	node.Spec.Taints = []corev1.Taint{stamped(corev1.TaintNodeUnreachable, t0)}
	mk := func(name string, seconds int64) *corev1.Pod {
		tol := []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(seconds)}}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)}, Spec: corev1.PodSpec{NodeName: "a", Tolerations: tol}}
	}
	h := newHarness(t, Config{}, node, mk("patient", 300))
	ctx := context.Background()
	h.clock.Step(10 * time.Second)
	must(t, h.c.judgePod(ctx, "default/patient"))
	if at, ok := h.c.scheduled["default/patient"]; !ok || !at.Equal(t0.Add(300*time.Second)) {
		t.Fatalf("scheduled = %v, %v; want t0+300s", at, ok)
	}
	h.clock.Step(289 * time.Second)
	must(t, h.c.judgePod(ctx, "default/patient"))
	if _, err := h.client.CoreV1().Pods("default").Get(ctx, "patient", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod gone before its toleration ran out: %v", err)
	}
	h.clock.Step(time.Second)
	must(t, h.c.judgePod(ctx, "default/patient"))
	if _, err := h.client.CoreV1().Pods("default").Get(ctx, "patient", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod still there after its toleration ran out: %v", err)
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, "Normal TaintManagerEviction Marking for deletion Pod default/patient") {
		t.Errorf("events:\n%s", evs)
	}

	// A second pod waits; the taint goes; the eviction is called off.
	_, err := h.client.CoreV1().Pods("default").Create(ctx, mk("lucky", 600), metav1.CreateOptions{})
	must(t, err)
	h.refresh()
	must(t, h.c.judgePod(ctx, "default/lucky"))
	if _, ok := h.c.scheduled["default/lucky"]; !ok {
		t.Fatal("lucky not scheduled")
	}
	n := h.node("a")
	n.Spec.Taints = nil
	_, err = h.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	must(t, err)
	h.refresh()
	must(t, h.c.judgePod(ctx, "default/lucky"))
	if _, ok := h.c.scheduled["default/lucky"]; ok {
		t.Error("lucky still scheduled after the taint went")
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, "Normal TaintManagerEviction Cancelling deletion of Pod default/lucky") {
		t.Errorf("events:\n%s", evs)
	}
}

func TestMonitor_DeletedNode_ForgottenWithEvent(t *testing.T) {
	h := newHarness(t, Config{}, nodesWithLeases("a", "b")...)
	h.pass(0, "a", "b")
	must(t, h.client.CoreV1().Nodes().Delete(context.Background(), "b", metav1.DeleteOptions{}))
	h.pass(time.Second, "a")
	if _, ok := h.c.monitor.health["b"]; ok {
		t.Error("b's health still tracked")
	}
	if _, ok := h.verdict("b"); ok {
		t.Error("b's verdict still held")
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, "Normal RemovingNode Node b event: Removing Node b from Controller") {
		t.Errorf("events:\n%s", evs)
	}
}
