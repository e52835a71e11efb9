package daemonset

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// mkPod builds a daemon pod; spec is e.g. "new ready", "old", "old ready
// deleting failed", in any order.
func mkPod(name, node, spec string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hashLabel: "old"}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	for _, w := range strings.Fields(spec) {
		switch w {
		case "new":
			p.Labels[hashLabel] = "new"
		case "ready":
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
		case "deleting":
			p.DeletionTimestamp = &metav1.Time{Time: now}
		case "failed":
			p.Status.Phase = corev1.PodFailed
		case "succeeded":
			p.Status.Phase = corev1.PodSucceeded
		case "young":
			p.CreationTimestamp = metav1.NewTime(now)
		}
	}
	return p
}

func rollingDS(surge, unavailable intstr.IntOrString) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
		Type:          appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: &surge, MaxUnavailable: &unavailable},
	}}}
}

func TestPlanRollingUpdate(t *testing.T) {
	zero, one, two := intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromInt32(2)
	tests := []struct {
		name          string
		ds            *appsv1.DaemonSet
		nodes         map[string][]*corev1.Pod
		leaving       []string // nodes the set no longer runs on
		deletes, adds []string
	}{
		{
			name:    "one old pod at a time, in node order",
			ds:      rollingDS(zero, one),
			nodes:   map[string][]*corev1.Pod{"c": {mkPod("pc", "c", "ready")}, "a": {mkPod("pa", "a", "ready")}, "b": {mkPod("pb", "b", "ready")}},
			deletes: []string{"pa"},
		},
		{
			name:    "an unavailable new pod uses up the budget",
			ds:      rollingDS(zero, one),
			nodes:   map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "new")}, "b": {mkPod("pb", "b", "ready")}},
			deletes: nil,
		},
		{
			name:  "a node without a pod counts as unavailable",
			ds:    rollingDS(zero, one),
			nodes: map[string][]*corev1.Pod{"a": nil, "b": {mkPod("pb", "b", "ready")}},
		},
		{
			name:    "unavailable old pods are replaced regardless of the budget",
			ds:      rollingDS(zero, one),
			nodes:   map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "")}, "b": {mkPod("pb", "b", "")}, "c": {mkPod("pc", "c", "ready")}},
			deletes: []string{"pa", "pb"},
		},
		{
			name:    "maxUnavailable 2",
			ds:      rollingDS(zero, two),
			nodes:   map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "ready")}, "b": {mkPod("pb", "b", "ready")}, "c": {mkPod("pc", "c", "ready")}},
			deletes: []string{"pa", "pb"},
		},
		{
			name:    "maxUnavailable 50% of 3 rounds up to 2",
			ds:      rollingDS(zero, intstr.FromString("50%")),
			nodes:   map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "ready")}, "b": {mkPod("pb", "b", "ready")}, "c": {mkPod("pc", "c", "ready")}},
			deletes: []string{"pa", "pb"},
		},
		{
			name:    "updated available pods leave room",
			ds:      rollingDS(zero, one),
			nodes:   map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "new ready")}, "b": {mkPod("pb", "b", "ready")}},
			deletes: []string{"pb"},
		},
		{
			name:  "a node with extra pods is left to the manage step",
			ds:    rollingDS(zero, one),
			nodes: map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "ready"), mkPod("pa2", "a", "ready")}, "b": {mkPod("pb", "b", "ready")}},
		},
		{
			name:  "surge starts one new pod beside an old one",
			ds:    rollingDS(one, zero),
			nodes: map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "ready")}, "b": {mkPod("pb", "b", "ready")}},
			adds:  []string{"a"},
		},
		{
			name:    "surge deletes the old pod once the new one is available",
			ds:      rollingDS(one, zero),
			nodes:   map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "ready"), mkPod("pa2", "a", "new ready young")}, "b": {mkPod("pb", "b", "ready")}},
			deletes: []string{"pa"},
			adds:    []string{"b"},
		},
		{
			name:  "surge waits for an unavailable new pod",
			ds:    rollingDS(one, zero),
			nodes: map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "ready"), mkPod("pa2", "a", "new young")}, "b": {mkPod("pb", "b", "ready")}},
		},
		{
			name:  "surge replaces unavailable old pods at once",
			ds:    rollingDS(one, zero),
			nodes: map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "")}, "b": {mkPod("pb", "b", "")}, "c": {mkPod("pc", "c", "ready")}},
			adds:  []string{"a", "b", "c"},
		},
		{
			name:    "surge removes an available pod from a left node only beyond the desired count",
			ds:      rollingDS(one, zero),
			nodes:   map[string][]*corev1.Pod{"a": {mkPod("pa", "a", "new ready")}, "gone": {mkPod("pg", "gone", "ready")}},
			leaving: []string{"gone"},
			deletes: []string{"pg"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := len(tt.nodes) - len(tt.leaving)
			surge, unavail, err := rolloutLimits(tt.ds, desired)
			if err != nil {
				t.Fatal(err)
			}
			deletes, adds := planRollingUpdate(rollout{
				ds: tt.ds, hash: "new", now: now, nodes: tt.nodes, desired: desired, surge: surge, unavail: unavail,
				shouldRun: func(n string) bool { return !slices.Contains(tt.leaving, n) },
			})
			if !slices.Equal(deletes, tt.deletes) || !slices.Equal(adds, tt.adds) {
				t.Errorf("deletes %v, adds %v; want %v, %v", deletes, adds, tt.deletes, tt.adds)
			}
		})
	}
}

func TestRolloutLimits(t *testing.T) {
	zero := intstr.FromInt32(0)
	tests := []struct {
		name           string
		ds             *appsv1.DaemonSet
		desired        int
		surge, unavail int
	}{
		{"absolute", rollingDS(zero, intstr.FromInt32(3)), 10, 0, 3},
		{"percent rounds up", rollingDS(intstr.FromString("10%"), intstr.FromString("15%")), 10, 1, 2},
		{"neither allows one unavailable", rollingDS(zero, zero), 4, 0, 1},
		{"nothing desired", rollingDS(zero, zero), 0, 0, 0},
		{"no rolling parameters", &appsv1.DaemonSet{}, 5, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			surge, unavail, err := rolloutLimits(tt.ds, tt.desired)
			if err != nil || surge != tt.surge || unavail != tt.unavail {
				t.Errorf("= %d, %d, %v; want %d, %d", surge, unavail, err, tt.surge, tt.unavail)
			}
		})
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPlanNode(t *testing.T) {
	plain := &appsv1.DaemonSet{}
	surging := rollingDS(intstr.FromInt32(1), intstr.FromInt32(0))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	evicting := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoExecute}}}}
	tests := []struct {
		name           string
		ds             *appsv1.DaemonSet
		node           *corev1.Node
		pods           []*corev1.Pod
		create         bool
		delete, failed []string
	}{
		{name: "no pod yet", ds: plain, node: node, create: true},
		{name: "one pod", ds: plain, node: node, pods: []*corev1.Pod{mkPod("a", "n", "ready")}},
		{name: "duplicates keep the oldest", ds: plain, node: node, pods: []*corev1.Pod{mkPod("young", "n", "young"), mkPod("old", "n", "")}, delete: []string{"young"}},
		{name: "failed pod", ds: plain, node: node, pods: []*corev1.Pod{mkPod("f", "n", "failed")}, failed: []string{"f"}},
		{name: "succeeded pod", ds: plain, node: node, pods: []*corev1.Pod{mkPod("s", "n", "succeeded")}, delete: []string{"s"}},
		{name: "terminating pod is waited for", ds: plain, node: node, pods: []*corev1.Pod{mkPod("d", "n", "deleting")}},
		{name: "node the set must leave", ds: plain, node: evicting, pods: []*corev1.Pod{mkPod("a", "n", "ready"), mkPod("d", "n", "deleting")}, delete: []string{"a"}},
		{name: "surge: a dying pod is replaced at once", ds: surging, node: node, pods: []*corev1.Pod{mkPod("d", "n", "deleting")}, create: true},
		{name: "surge: old and new coexist until the new is available", ds: surging, node: node, pods: []*corev1.Pod{mkPod("o", "n", "ready"), mkPod("n", "n", "new young")}},
		{name: "surge: the old goes when the new is available", ds: surging, node: node, pods: []*corev1.Pod{mkPod("o", "n", "ready"), mkPod("n", "n", "new ready young")}, delete: []string{"o"}},
		{name: "surge: an unready old pod goes at once", ds: surging, node: node, pods: []*corev1.Pod{mkPod("o", "n", ""), mkPod("n", "n", "new young")}, delete: []string{"o"}},
		{name: "surge: extra new pods go", ds: surging, node: node, pods: []*corev1.Pod{mkPod("n1", "n", "new"), mkPod("n2", "n", "new young")}, delete: []string{"n2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planNode(tt.ds, tt.node, tt.pods, "new", now)
			if p.create != tt.create || !slices.Equal(names(p.delete), tt.delete) || !slices.Equal(names(p.failed), tt.failed) {
				t.Errorf("create %v, delete %v, failed %v; want %v, %v, %v", p.create, names(p.delete), names(p.failed), tt.create, tt.delete, tt.failed)
			}
		})
	}
}

func TestComputeStatus(t *testing.T) {
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{MinReadySeconds: 120}}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"run": "yes"}
	mkNode := func(name string, run bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if run {
			n.Labels["run"] = "yes"
		}
		return n
	}
	nodes := []*corev1.Node{mkNode("a", true), mkNode("b", true), mkNode("c", true), mkNode("d", false), mkNode("e", true)}
	byNode := map[string][]*corev1.Pod{
		"a": {mkPod("pa", "a", "new ready")}, // ready for a minute: not yet available
		"b": {mkPod("pb", "b", "ready")},
		"c": {mkPod("pc", "c", "new")},
		"d": {mkPod("pd", "d", "ready")},
	}
	byNode["b"][0].Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Hour))
	got := computeStatus(ds, nodes, byNode, "new", now)
	want := appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, CurrentNumberScheduled: 3, NumberMisscheduled: 1, NumberReady: 2, NumberAvailable: 1, NumberUnavailable: 3, UpdatedNumberScheduled: 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status = %+v\nwant %+v", got, want)
	}
}

func TestTemplateHash(t *testing.T) {
	a := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "v1"}}}}
	b := *a.DeepCopy()
	b.Spec.Containers[0].Image = "v2"
	one := int32(1)
	tests := []struct {
		name  string
		x, y  string
		equal bool
	}{
		{"same template, same hash", templateHash(&a, nil), templateHash(a.DeepCopy(), nil), true},
		{"different image", templateHash(&a, nil), templateHash(&b, nil), false},
		{"collision count changes it", templateHash(&a, nil), templateHash(&a, &one), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.x == tt.y) != tt.equal {
				t.Errorf("%q vs %q", tt.x, tt.y)
			}
			if strings.ContainsAny(tt.x, "aeiou013") {
				t.Errorf("hash %q is not in the safe alphabet", tt.x)
			}
		})
	}
	if n := revisionName(strings.Repeat("x", 300), "h"); len(n) != 225 {
		t.Errorf("long name = %d chars", len(n))
	}
}

// TestRevisionPatch_RestoresTemplate checks the revision data does what
// kubectl rollout undo uses it for.
func TestRevisionPatch_RestoresTemplate(t *testing.T) {
	old := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", "old": "label"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "v1"}, {Name: "side", Image: "s"}}},
	}}}
	patch, err := revisionPatch(old)
	if err != nil {
		t.Fatal(err)
	}
	var shape map[string]map[string]map[string]any
	if err := json.Unmarshal(patch, &shape); err != nil || shape["spec"]["template"]["$patch"] != "replace" || len(shape["spec"]) != 1 {
		t.Fatalf("patch %s", patch)
	}
	cur := old.DeepCopy()
	cur.Spec.MinReadySeconds = 5
	cur.Spec.Template.Labels = map[string]string{"app": "x"}
	cur.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "v2"}}
	curJSON, _ := json.Marshal(cur)
	out, err := strategicpatch.StrategicMergePatch(curJSON, patch, &appsv1.DaemonSet{})
	if err != nil {
		t.Fatal(err)
	}
	var restored appsv1.DaemonSet
	if err := json.Unmarshal(out, &restored); err != nil {
		t.Fatal(err)
	}
	again, _ := revisionPatch(&restored)
	if string(again) != string(patch) || restored.Spec.MinReadySeconds != 5 {
		t.Errorf("restored %s\nwant template of %s", again, patch)
	}
}

func TestRevisionsToDelete_OldestNotLiveFirst(t *testing.T) {
	rev := func(n int64, hash string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: hash, Labels: map[string]string{hashLabel: hash}}, Revision: n}
	}
	old := []*appsv1.ControllerRevision{rev(3, "c"), rev(1, "a"), rev(2, "b"), rev(4, "d")}
	tests := []struct {
		live map[string]bool
		n    int
		want []string
	}{
		{nil, 2, []string{"a", "b"}},
		{map[string]bool{"a": true}, 2, []string{"b", "c"}},
		{map[string]bool{"a": true, "b": true, "c": true, "d": true}, 2, nil},
		{nil, 0, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, r := range revisionsToDelete(old, tt.live, tt.n) {
			got = append(got, r.Name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("live %v, n %d: %v, want %v", tt.live, tt.n, got, tt.want)
		}
	}
}

func TestExpectations(t *testing.T) {
	e := newExpectations()
	clock := now
	e.now = func() time.Time { return clock }
	if !e.satisfied("k") {
		t.Error("unknown key not satisfied")
	}
	e.expect("k", 2, 1)
	e.observe("k", 1, 0)
	if e.satisfied("k") {
		t.Error("satisfied with one creation outstanding")
	}
	e.observe("k", 1, 1)
	if !e.satisfied("k") {
		t.Error("not satisfied once all were seen")
	}
	e.expect("k", 1, 0)
	clock = clock.Add(expectationsTTL + time.Second)
	if !e.satisfied("k") {
		t.Error("expectations never expire")
	}
}
