package daemonset

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"skiff/server/controller/controllertest"
)

const ns = metav1.NamespaceDefault

// env is a real API server with the controller running against it.
type env struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	events *controllertest.Recorder
}

func start(t *testing.T) *env {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{ns}, Timeout: 45 * time.Second})
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: ce.Client, Informers: ce.Informers, Recorder: ce.Events, Logger: controllertest.Logger(t, slog.LevelInfo), FailedPodBackoff: 100 * time.Millisecond})
	})
	return &env{t: t, ctx: ce.Ctx, client: ce.Client, events: ce.Events}
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	controllertest.Eventually(e.t, e.ctx, 30*time.Second, func(context.Context) (bool, error) { return cond(), nil }, "%s", what)
}

func (e *env) node(name string, lbls map[string]string, taints ...corev1.Taint) {
	e.t.Helper()
	_, err := e.client.CoreV1().Nodes().Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, Spec: corev1.NodeSpec{Taints: taints}}, metav1.CreateOptions{})
	e.must(err)
}

func (e *env) patchNode(name, patch string) {
	e.t.Helper()
	_, err := e.client.CoreV1().Nodes().Patch(e.ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	e.must(err)
}

// kubelet plays the scheduler and the kubelets: it binds each pending pod
// to the node its affinity names, reports it running and, readyAfter after
// first seeing it, ready; and it finishes graceful deletions.
func (e *env) kubelet(readyAfter time.Duration) {
	seen := map[types.UID]time.Time{}
	go func() {
		for e.ctx.Err() == nil {
			pods, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				e.tend(&pods.Items[i], seen, readyAfter)
			}
			time.Sleep(20 * time.Millisecond) // a kubelet's sync period, not an assertion
		}
	}()
}

func (e *env) tend(pod *corev1.Pod, seen map[types.UID]time.Time, readyAfter time.Duration) {
	pods := e.client.CoreV1().Pods(ns)
	switch {
	case pod.DeletionTimestamp != nil:
		_ = pods.Delete(e.ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	case pod.Spec.NodeName == "":
		if node, ok := targetNode(pod); ok {
			_ = pods.Bind(e.ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
		}
	case pod.Status.Phase == corev1.PodPending:
		if _, ok := seen[pod.UID]; !ok {
			seen[pod.UID] = time.Now()
		}
		if time.Since(seen[pod.UID]) < readyAfter {
			return
		}
		pod.Status.Phase = corev1.PodRunning
		now := metav1.Now()
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		_, _ = pods.UpdateStatus(e.ctx, pod, metav1.UpdateOptions{})
	}
}

func daemonSet(name, image string, nodeSelector map[string]string) *appsv1.DaemonSet {
	lbls := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{NodeSelector: nodeSelector, Containers: []corev1.Container{{Name: "c", Image: image}}},
			},
		},
	}
}

// daemonPods returns ds's live pods, by the node they are pinned to.
func (e *env) daemonPods(ds string) map[string][]corev1.Pod {
	e.t.Helper()
	pods, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + ds})
	e.must(err)
	out := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		node, ok := targetNode(&p)
		if !ok {
			e.t.Fatalf("pod %s has no node affinity term: %+v", p.Name, p.Spec.Affinity)
		}
		out[node] = append(out[node], p)
	}
	return out
}

// placedOn reports whether ds runs exactly one ready pod on each of nodes
// and none elsewhere.
func (e *env) placedOn(ds string, nodes ...string) bool {
	byNode := e.daemonPods(ds)
	if len(byNode) != len(nodes) {
		return false
	}
	for _, n := range nodes {
		if len(byNode[n]) != 1 || !podReady(&byNode[n][0]) {
			return false
		}
	}
	return true
}

func (e *env) daemonSet(name string) *appsv1.DaemonSet {
	e.t.Helper()
	ds, err := e.client.AppsV1().DaemonSets(ns).Get(e.ctx, name, metav1.GetOptions{})
	e.must(err)
	return ds
}

// rolledOut reports a status that has seen the current spec and counts
// every desired pod as updated and available.
func (e *env) rolledOut(name string, desired int32) bool {
	ds := e.daemonSet(name)
	s := ds.Status
	return s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled == desired && s.CurrentNumberScheduled == desired &&
		s.UpdatedNumberScheduled == desired && s.NumberReady == desired && s.NumberAvailable == desired && s.NumberUnavailable == 0 && s.NumberMisscheduled == 0
}

func TestDaemonSet_RunsOnEligibleNodesAndFollowsNodeChanges(t *testing.T) {
	e := start(t)
	web := map[string]string{"role": "web"}
	for _, n := range []string{"n1", "n2", "n3"} {
		e.node(n, web)
	}
	e.node("tainted", web, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})
	e.node("other", map[string]string{"role": "db"})
	// The lifecycle controller's taints must not keep daemons off a node.
	e.node("notready", web, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute})
	e.kubelet(0)
	_, err := e.client.AppsV1().DaemonSets(ns).Create(e.ctx, daemonSet("agent", "agent:v1", web), metav1.CreateOptions{})
	e.must(err)

	e.waitFor("a ready pod on each eligible node", func() bool { return e.placedOn("agent", "n1", "n2", "n3", "notready") })
	e.waitFor("status counting four nodes", func() bool { return e.rolledOut("agent", 4) })
	ds := e.daemonSet("agent")
	for node, pods := range e.daemonPods("agent") {
		pod := pods[0]
		terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		want := []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}
		if fmt.Sprint(terms) != fmt.Sprint(want) || pod.Spec.NodeName != node {
			t.Errorf("pod %s: terms %v, bound to %q; want the term for %s", pod.Name, terms, pod.Spec.NodeName, node)
		}
		if ref := metav1.GetControllerOf(&pod); ref == nil || ref.UID != ds.UID {
			t.Errorf("pod %s controller = %v", pod.Name, ref)
		}
		if pod.Labels[hashLabel] == "" || !strings.HasPrefix(pod.Name, "agent-") {
			t.Errorf("pod %s labels %v", pod.Name, pod.Labels)
		}
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Key == corev1.TaintNodeUnreachable && tl.Effect == corev1.TaintEffectNoExecute && tl.TolerationSeconds == nil
		}) {
			t.Errorf("pod %s lacks the unreachable toleration: %v", pod.Name, pod.Spec.Tolerations)
		}
	}

	e.patchNode("other", `{"metadata":{"labels":{"role":"web"}}}`)
	e.waitFor("a pod on the relabelled node", func() bool { return e.placedOn("agent", "n1", "n2", "n3", "notready", "other") })
	e.node("n4", web)
	e.waitFor("a pod on the new node", func() bool { return e.placedOn("agent", "n1", "n2", "n3", "notready", "other", "n4") })
	e.patchNode("other", `{"metadata":{"labels":{"role":"db"}}}`)
	e.patchNode("n4", `{"spec":{"taints":[{"key":"dedicated","value":"db","effect":"NoExecute"}]}}`)
	e.waitFor("pods gone from nodes the set left", func() bool { return e.placedOn("agent", "n1", "n2", "n3", "notready") })
	e.waitFor("status back to four nodes", func() bool { return e.rolledOut("agent", 4) })
	if !e.events.Has("Normal SuccessfulCreate Created pod: agent-") || !e.events.Has("Normal SuccessfulDelete Deleted pod: agent-") {
		t.Errorf("events = %v", e.events)
	}
}

func TestDaemonSet_FailedPodIsReplaced(t *testing.T) {
	e := start(t)
	e.node("n1", nil)
	e.kubelet(0)
	_, err := e.client.AppsV1().DaemonSets(ns).Create(e.ctx, daemonSet("agent", "agent:v1", nil), metav1.CreateOptions{})
	e.must(err)
	e.waitFor("a ready pod", func() bool { return e.placedOn("agent", "n1") })
	failed := e.daemonPods("agent")["n1"][0]
	failed.Status.Phase = corev1.PodFailed
	_, err = e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, &failed, metav1.UpdateOptions{})
	e.must(err)
	e.waitFor("a replacement pod", func() bool {
		pods := e.daemonPods("agent")["n1"]
		return len(pods) == 1 && pods[0].UID != failed.UID && podReady(&pods[0])
	})
	if !e.events.Has("Warning FailedDaemonPod Found failed daemon pod default/" + failed.Name + " on node n1, will try to kill it") {
		t.Errorf("events = %v", e.events)
	}
}

func TestDaemonSet_RollingUpdate_ReplacesOneNodeAtATime(t *testing.T) {
	e := start(t)
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		e.node(n, nil)
	}
	// Pods take a while to become ready, so a controller that replaced
	// more than one node at a time would be seen doing it.
	e.kubelet(300 * time.Millisecond)
	_, err := e.client.AppsV1().DaemonSets(ns).Create(e.ctx, daemonSet("agent", "agent:v1", nil), metav1.CreateOptions{})
	e.must(err)
	e.waitFor("v1 on every node", func() bool { return e.placedOn("agent", nodes...) && e.rolledOut("agent", 3) })

	watcher := e.watchAvailability(nodes)
	ds := e.daemonSet("agent")
	ds.Spec.Template.Spec.Containers[0].Image = "agent:v2"
	_, err = e.client.AppsV1().DaemonSets(ns).Update(e.ctx, ds, metav1.UpdateOptions{})
	e.must(err)
	e.waitFor("v2 on every node", func() bool {
		for _, pods := range e.daemonPods("agent") {
			if pods[0].Spec.Containers[0].Image != "agent:v2" {
				return false
			}
		}
		return e.placedOn("agent", nodes...) && e.rolledOut("agent", 3)
	})
	if worst := watcher.stop(); worst != 1 {
		t.Errorf("at worst %d nodes were without an available pod during the update; maxUnavailable is 1", worst)
	}
}

func TestDaemonSet_RollingUpdateWithSurge_KeepsEveryNodeAvailable(t *testing.T) {
	e := start(t)
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		e.node(n, nil)
	}
	e.kubelet(300 * time.Millisecond)
	ds := daemonSet("agent", "agent:v1", nil)
	surge, none := intstr.FromInt32(1), intstr.FromInt32(0)
	ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxSurge: &surge, MaxUnavailable: &none}
	_, err := e.client.AppsV1().DaemonSets(ns).Create(e.ctx, ds, metav1.CreateOptions{})
	e.must(err)
	e.waitFor("v1 on every node", func() bool { return e.runs("agent", "agent:v1", nodes...) })

	watcher := e.watchAvailability(nodes)
	e.rollTo("agent", "agent:v2", nodes...)
	if worst := watcher.stop(); worst != 0 {
		t.Errorf("%d nodes were without an available pod during a surge update", worst)
	}
}

// availability follows pod events and records the most nodes ever
// without a ready, non-terminating pod at once.
type availability struct {
	mu     sync.Mutex
	worst  int
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *env) watchAvailability(nodes []string) *availability {
	e.t.Helper()
	list, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
	e.must(err)
	ctx, cancel := context.WithCancel(e.ctx)
	w, err := e.client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	e.must(err)
	a := &availability{cancel: cancel, done: make(chan struct{})}
	pods := map[string]*corev1.Pod{}
	for i := range list.Items {
		pods[list.Items[i].Name] = &list.Items[i]
	}
	go func() {
		defer close(a.done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(pods, pod.Name)
			} else {
				pods[pod.Name] = pod
			}
			up := map[string]bool{}
			for _, p := range pods {
				if p.DeletionTimestamp == nil && podReady(p) {
					up[p.Spec.NodeName] = true
				}
			}
			down := 0
			for _, n := range nodes {
				if !up[n] {
					down++
				}
			}
			a.mu.Lock()
			a.worst = max(a.worst, down)
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *availability) stop() int {
	a.cancel()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.worst
}

func (e *env) revisions(ds string) []appsv1.ControllerRevision {
	e.t.Helper()
	list, err := e.client.AppsV1().ControllerRevisions(ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + ds})
	e.must(err)
	out := list.Items
	slices.SortFunc(out, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	return out
}

func (e *env) rollTo(name, image string, nodes ...string) {
	e.t.Helper()
	ds := e.daemonSet(name)
	ds.Spec.Template.Spec.Containers[0].Image = image
	_, err := e.client.AppsV1().DaemonSets(ns).Update(e.ctx, ds, metav1.UpdateOptions{})
	e.must(err)
	e.waitFor(image+" everywhere", func() bool { return e.runs(name, image, nodes...) })
}

func (e *env) runs(name, image string, nodes ...string) bool {
	for _, pods := range e.daemonPods(name) {
		if pods[0].Spec.Containers[0].Image != image {
			return false
		}
	}
	return e.placedOn(name, nodes...) && e.rolledOut(name, int32(len(nodes)))
}

func TestDaemonSet_HistoryAndUndoThroughControllerRevisions(t *testing.T) {
	e := start(t)
	e.node("n1", nil)
	e.node("n2", nil)
	e.kubelet(0)
	ds := daemonSet("agent", "agent:v1", nil)
	ds.Spec.RevisionHistoryLimit = new(int32(1))
	_, err := e.client.AppsV1().DaemonSets(ns).Create(e.ctx, ds, metav1.CreateOptions{})
	e.must(err)
	e.waitFor("v1 everywhere", func() bool { return e.runs("agent", "agent:v1", "n1", "n2") })
	e.rollTo("agent", "agent:v2", "n1", "n2")
	e.rollTo("agent", "agent:v3", "n1", "n2")

	// v1 went past the history limit; v2 stays as the one old revision.
	var revs []appsv1.ControllerRevision
	e.waitFor("history trimmed to the limit", func() bool { revs = e.revisions("agent"); return len(revs) == 2 })
	if revs[0].Revision != 2 || revs[1].Revision != 3 {
		t.Fatalf("revisions %d and %d, want 2 and 3", revs[0].Revision, revs[1].Revision)
	}
	cur := e.daemonSet("agent")
	for _, r := range revs {
		if ref := metav1.GetControllerOf(&r); ref == nil || ref.UID != cur.UID || !strings.HasPrefix(r.Name, "agent-") || r.Name != "agent-"+r.Labels[hashLabel] {
			t.Errorf("revision %s: owner %v, labels %v", r.Name, ref, r.Labels)
		}
	}
	for _, pods := range e.daemonPods("agent") {
		if pods[0].Labels[hashLabel] != revs[1].Labels[hashLabel] {
			t.Errorf("pod %s hash %q, want the current revision's %q", pods[0].Name, pods[0].Labels[hashLabel], revs[1].Labels[hashLabel])
		}
	}

	// kubectl rollout undo: the revision's data as a strategic merge patch.
	_, err = e.client.AppsV1().DaemonSets(ns).Patch(e.ctx, "agent", types.StrategicMergePatchType, revs[0].Data.Raw, metav1.PatchOptions{})
	e.must(err)
	e.waitFor("v2 back everywhere", func() bool { return e.runs("agent", "agent:v2", "n1", "n2") })
	e.waitFor("the v2 revision renumbered as the newest", func() bool {
		r, err := e.client.AppsV1().ControllerRevisions(ns).Get(e.ctx, revs[0].Name, metav1.GetOptions{})
		return err == nil && r.Revision == 4
	})
	for _, pods := range e.daemonPods("agent") {
		if pods[0].Labels[hashLabel] != revs[0].Labels[hashLabel] {
			t.Errorf("pod %s hash %q, want the restored revision's %q", pods[0].Name, pods[0].Labels[hashLabel], revs[0].Labels[hashLabel])
		}
	}
	got := e.daemonSet("agent")
	if img := got.Spec.Template.Spec.Containers[0].Image; img != "agent:v2" {
		t.Errorf("template image after undo = %s", img)
	}
	patch, err := revisionPatch(got)
	e.must(err)
	if string(patch) != string(revs[0].Data.Raw) {
		t.Errorf("the restored template does not match its revision:\n%s\n%s", patch, revs[0].Data.Raw)
	}
}

// The conformance "rollback without unnecessary restarts" case: an update
// to an image that never starts is stuck on its first node; rolling back
// before it completes replaces only that node's pod and keeps the old
// pods everywhere else.
func TestDaemonSet_RollbackMidRollout_KeepsUntouchedOldPods(t *testing.T) {
	e := start(t)
	nodes := []string{"n1", "n2"}
	for _, n := range nodes {
		e.node(n, nil)
	}
	const broken = "foo:non-existent"
	seen := map[types.UID]time.Time{}
	go func() {
		for e.ctx.Err() == nil {
			pods, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
			if err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					// A pod whose image cannot be pulled stays Pending.
					if p.Spec.Containers[0].Image == broken && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
						continue
					}
					e.tend(p, seen, 0)
				}
			}
			time.Sleep(20 * time.Millisecond) // a kubelet's sync period, not an assertion
		}
	}()
	ds := daemonSet("agent", "agent:v1", nil)
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}
	_, err := e.client.AppsV1().DaemonSets(ns).Create(e.ctx, ds, metav1.CreateOptions{})
	e.must(err)
	e.waitFor("v1 on every node", func() bool { return e.placedOn("agent", nodes...) && e.rolledOut("agent", 2) })

	setImage := func(image string) {
		e.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := e.daemonSet("agent")
			cur.Spec.Template.Spec.Containers[0].Image = image
			_, err := e.client.AppsV1().DaemonSets(ns).Update(e.ctx, cur, metav1.UpdateOptions{})
			return err
		}))
	}
	setImage(broken)
	var oldNode string
	var oldUID types.UID
	e.waitFor("one node on the broken image, the other still on v1", func() bool {
		byNode := e.daemonPods("agent")
		images := map[string]string{}
		for n, pods := range byNode {
			if len(pods) == 1 {
				images[n] = pods[0].Spec.Containers[0].Image
			}
		}
		for _, n := range nodes {
			other := nodes[0]
			if other == n {
				other = nodes[1]
			}
			if images[n] == broken && images[other] == "agent:v1" {
				oldNode, oldUID = other, byNode[other][0].UID
				return true
			}
		}
		return false
	})

	setImage("agent:v1")
	e.waitFor("v1 on every node again", func() bool { return e.runs("agent", "agent:v1", nodes...) && e.rolledOut("agent", 2) })
	if pods := e.daemonPods("agent")[oldNode]; len(pods) != 1 || pods[0].UID != oldUID {
		t.Errorf("the v1 pod on %s was restarted by the rollback", oldNode)
	}
}
