package deployment

import (
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestFenceposts_SurgeRoundsUpUnavailableDown(t *testing.T) {
	pct, num := intstr.FromString, intstr.FromInt32
	cases := []struct {
		name                string
		surge, unavailable  intstr.IntOrString
		replicas            int32
		wantSurge, wantUnav int32
	}{
		{"25% of 10", pct("25%"), pct("25%"), 10, 3, 2},
		{"25% of 3", pct("25%"), pct("25%"), 3, 1, 0},
		{"25% of 1", pct("25%"), pct("25%"), 1, 1, 0},
		{"absolute", num(2), num(1), 10, 2, 1},
		{"both zero: unavailable becomes 1", num(0), num(0), 5, 0, 1},
		{"0% and 0% of 10", pct("0%"), pct("0%"), 10, 0, 1},
		{"100% surge", pct("100%"), num(0), 4, 4, 0},
		{"zero replicas: both zero, unavailable 1", pct("25%"), pct("25%"), 0, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, u, err := fenceposts(&tc.surge, &tc.unavailable, tc.replicas)
			if err != nil || s != tc.wantSurge || u != tc.wantUnav {
				t.Errorf("fenceposts = %d, %d, %v; want %d, %d", s, u, err, tc.wantSurge, tc.wantUnav)
			}
		})
	}
}

func TestMaxUnavailable_CappedAtReplicasAndZeroForRecreate(t *testing.T) {
	d := rollingDeployment(2, intstr.FromInt32(0), intstr.FromInt32(5))
	if got := maxUnavailable(d); got != 2 {
		t.Errorf("maxUnavailable = %d, want the 2 replicas", got)
	}
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if maxUnavailable(d) != 0 || maxSurge(d) != 0 {
		t.Errorf("Recreate: surge %d, unavailable %d; want 0, 0", maxSurge(d), maxUnavailable(d))
	}
}

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

func TestTemplateHash(t *testing.T) {
	a, b := template("nginx:1"), template("nginx:2")
	h := templateHash(&a, nil)
	// Pinned: a change renames every Deployment's ReplicaSet on upgrade,
	// starting a rollout of each.
	if h != "59d9f85d8b" {
		t.Errorf("hash of the reference template = %q; it must not change", h)
	}
	if again := a.DeepCopy(); templateHash(again, nil) != h {
		t.Error("hash not stable over copies")
	}
	if templateHash(&b, nil) == h {
		t.Error("different templates, same hash")
	}
	one, two := int32(1), int32(2)
	if templateHash(&a, &one) == h || templateHash(&a, &one) == templateHash(&a, &two) {
		t.Error("collision count does not move the hash")
	}
	if strings.ContainsAny(h, "aeiou") {
		t.Errorf("hash %q has vowels; the safe alphabet has none", h)
	}
}

func TestEqualIgnoringHash(t *testing.T) {
	a := template("nginx:1")
	withHash := a.DeepCopy()
	withHash.Labels[hashLabel] = "abc"
	if !equalIgnoringHash(&a, withHash) {
		t.Error("templates differing only by the hash label are unequal")
	}
	b := template("nginx:2")
	if equalIgnoringHash(&a, &b) {
		t.Error("templates with different images are equal")
	}
	onlyHash := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{hashLabel: "x"}}}
	if !equalIgnoringHash(&corev1.PodTemplateSpec{}, &onlyHash) {
		t.Error("nil labels and only a hash label are unequal")
	}
}

func rollingDeployment(n int32, surge, unavailable intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &n, Strategy: appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}}}
}

func rsOf(name string, replicas int32, maxReplicas string, age time.Duration) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name),
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}}
	if maxReplicas != "" {
		rs.Annotations = map[string]string{maxReplicasAnnotation: maxReplicas}
	}
	return rs
}

func TestProportionalSizes(t *testing.T) {
	pct := intstr.FromString("25%")
	cases := []struct {
		name     string
		replicas int32
		rss      []*appsv1.ReplicaSet
		want     map[string]int32
	}{
		{"10 to 30 mid-rollout: 25 more shared 8:5", 30,
			[]*appsv1.ReplicaSet{rsOf("old", 8, "13", time.Hour), rsOf("new", 5, "13", 0)}, map[string]int32{"old": 23, "new": 15}},
		{"10 to 5: shrinks by the same shares", 5,
			[]*appsv1.ReplicaSet{rsOf("old", 8, "13", time.Hour), rsOf("new", 5, "13", 0)}, map[string]int32{"old": 4, "new": 3}},
		{"to zero: everything goes", 0,
			[]*appsv1.ReplicaSet{rsOf("old", 8, "13", time.Hour), rsOf("new", 5, "13", 0)}, map[string]int32{"old": 0, "new": 0}},
		{"equal sizes growing: the newer takes the leftover", 12,
			[]*appsv1.ReplicaSet{rsOf("old", 5, "10", time.Hour), rsOf("new", 5, "10", 0)}, map[string]int32{"old": 7, "new": 8}},
		{"equal sizes shrinking: the older gives the leftover", 5,
			[]*appsv1.ReplicaSet{rsOf("old", 5, "10", time.Hour), rsOf("new", 5, "10", 0)}, map[string]int32{"old": 3, "new": 4}},
		{"no max-replicas annotation: the status replicas are the base", 20,
			[]*appsv1.ReplicaSet{rsOf("old", 6, "", time.Hour), rsOf("new", 6, "", 0)}, map[string]int32{"old": 12, "new": 13}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := rollingDeployment(tc.replicas, pct, pct)
			d.Status.Replicas = 12
			rss, sizes := proportionalSizes(d, tc.rss)
			got := map[string]int32{}
			for i, rs := range rss {
				got[rs.Name] = sizes[i]
			}
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("sizes = %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
}

func TestNewRSReplicas_GrowsWithinSurge(t *testing.T) {
	d := rollingDeployment(10, intstr.FromInt32(3), intstr.FromInt32(2))
	old, fresh := rsOf("old", 10, "", time.Hour), rsOf("new", 0, "", 0)
	if got := newRSReplicas(d, []*appsv1.ReplicaSet{old, fresh}, fresh); got != 3 {
		t.Errorf("new replica set may grow to %d, want 3", got)
	}
	// The old one was scaled to 8 but still reports 10 pods: no room yet.
	*old.Spec.Replicas, old.Status.Replicas, *fresh.Spec.Replicas = 8, 10, 3
	if got := newRSReplicas(d, []*appsv1.ReplicaSet{old, fresh}, fresh); got != 3 {
		t.Errorf("new replica set may grow to %d while old pods linger, want 3", got)
	}
	old.Status.Replicas = 8
	if got := newRSReplicas(d, []*appsv1.ReplicaSet{old, fresh}, fresh); got != 5 {
		t.Errorf("new replica set may grow to %d, want 5", got)
	}
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if got := newRSReplicas(d, []*appsv1.ReplicaSet{old, fresh}, fresh); got != 10 {
		t.Errorf("Recreate: %d, want all 10 at once", got)
	}
}

func TestSetNewRSAnnotations(t *testing.T) {
	d := rollingDeployment(4, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{"team": "web", lastAppliedAnnotation: "{}", revisionAnnotation: "7"}
	rs := &appsv1.ReplicaSet{}
	if !setNewRSAnnotations(d, rs, 1, false) {
		t.Fatal("no change reported for a new replica set")
	}
	want := map[string]string{"team": "web", revisionAnnotation: "1", desiredReplicasAnnotation: "4", maxReplicasAnnotation: "5"}
	if len(rs.Annotations) != len(want) {
		t.Errorf("annotations = %v, want %v", rs.Annotations, want)
	}
	for k, v := range want {
		if rs.Annotations[k] != v {
			t.Errorf("annotations = %v, want %v", rs.Annotations, want)
		}
	}
	if setNewRSAnnotations(d, rs, 1, true) {
		t.Error("change reported for an up-to-date replica set")
	}
	// Becomes new again (an undo) twice: its old revisions are kept.
	setNewRSAnnotations(d, rs, 3, true)
	setNewRSAnnotations(d, rs, 5, true)
	if rs.Annotations[revisionAnnotation] != "5" || rs.Annotations[revisionHistoryAnnotation] != "1,3" {
		t.Errorf("revision %q history %q, want 5 and 1,3", rs.Annotations[revisionAnnotation], rs.Annotations[revisionHistoryAnnotation])
	}
	// A lower revision never moves it back.
	if setNewRSAnnotations(d, rs, 2, true) || rs.Annotations[revisionAnnotation] != "5" {
		t.Error("revision moved back")
	}
}

func TestAppendRevisionHistory_BoundedLength(t *testing.T) {
	var parts []string
	for i := range 500 {
		parts = append(parts, strconv.Itoa(1000+i))
	}
	got := appendRevisionHistory(strings.Join(parts, ","), "9999")
	if len(got) > maxRevisionHistoryChars || !strings.HasSuffix(got, ",9999") || strings.HasPrefix(got, "1000,") {
		t.Errorf("history of %d chars, ending %q", len(got), got[len(got)-10:])
	}
}

func TestDeploymentTimedOut(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := rollingDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.ProgressDeadlineSeconds = new(int32(60))
	at := func(reason string, ago time.Duration) *appsv1.DeploymentStatus {
		return &appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: reason, LastUpdateTime: metav1.NewTime(now.Add(-ago))}}}
	}
	cases := []struct {
		name string
		st   *appsv1.DeploymentStatus
		want bool
	}{
		{"progress within the deadline", at(reasonRSUpdated, 30*time.Second), false},
		{"no progress for longer", at(reasonRSUpdated, 61*time.Second), true},
		{"complete never times out", at(reasonNewRSAvailable, time.Hour), false},
		{"timed out stays so", at(reasonTimedOut, 0), true},
		{"no condition", &appsv1.DeploymentStatus{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := deploymentTimedOut(d, tc.st, now); got != tc.want {
				t.Errorf("timed out = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCalculateStatus_SumsReplicaSetsAndSetsAvailable(t *testing.T) {
	d := rollingDeployment(4, intstr.FromInt32(1), intstr.FromInt32(1))
	d.Generation = 3
	old, fresh := rsOf("old", 2, "", time.Hour), rsOf("new", 3, "", 0)
	old.Status = appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	fresh.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, TerminatingReplicas: new(int32(1))}
	st := calculateStatus([]*appsv1.ReplicaSet{old, fresh}, fresh, d)
	if st.ObservedGeneration != 3 || st.Replicas != 5 || st.UpdatedReplicas != 3 || st.ReadyReplicas != 4 || st.AvailableReplicas != 3 ||
		st.UnavailableReplicas != 2 || *st.TerminatingReplicas != 1 {
		t.Errorf("status = %+v", st)
	}
	if c := getCondition(&st, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("3 of 4 available with maxUnavailable 1: Available = %+v", c)
	}
	fresh.Status.AvailableReplicas = 0
	if c := getCondition(new(calculateStatus([]*appsv1.ReplicaSet{old, fresh}, fresh, d)), appsv1.DeploymentAvailable); c.Status != corev1.ConditionFalse || c.Reason != reasonMinimumUnavailable {
		t.Errorf("2 of 4 available: Available = %+v", c)
	}
}

func TestReplicaFailure_NewReplicaSetsFirst(t *testing.T) {
	failing := func(name, msg string) *appsv1.ReplicaSet {
		rs := rsOf(name, 1, "", 0)
		rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: msg}}
		return rs
	}
	healthy := rsOf("new", 1, "", 0)
	cases := []struct {
		name    string
		all     []*appsv1.ReplicaSet
		newRS   *appsv1.ReplicaSet
		wantMsg string
	}{
		{"none", []*appsv1.ReplicaSet{rsOf("old", 1, "", 0), healthy}, healthy, ""},
		{"an old one's", []*appsv1.ReplicaSet{failing("old", "old quota"), healthy}, healthy, "old quota"},
		{"the new one's before an old one's", []*appsv1.ReplicaSet{failing("old", "old quota"), failing("new", "new quota")}, failing("new", "new quota"), "new quota"},
		{"no new replica set yet", []*appsv1.ReplicaSet{failing("old", "old quota"), nil}, nil, "old quota"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := replicaFailure(tc.all, tc.newRS)
			if ok != (tc.wantMsg != "") || c.Message != tc.wantMsg || (ok && (c.Type != appsv1.DeploymentReplicaFailure || c.Reason != "FailedCreate")) {
				t.Errorf("replicaFailure = %+v, %v; want message %q", c, ok, tc.wantMsg)
			}
		})
	}
}
