package statefulset

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// member builds pod name of set web; state is any of "ready", "old",
// "deleting", "failed", "new" (not yet created).
func member(name, state string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{appsv1.StatefulSetRevisionLabel: "web-new"}}}
	p.Status.Phase = corev1.PodPending
	for _, w := range strings.Fields(state) {
		switch w {
		case "ready":
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		case "old":
			p.Labels[appsv1.StatefulSetRevisionLabel] = "web-old"
		case "deleting":
			p.DeletionTimestamp = &metav1.Time{}
		case "failed":
			p.Status.Phase = corev1.PodFailed
		case "new":
			p.Status.Phase = ""
		}
	}
	return p
}

func TestParentAndOrdinal(t *testing.T) {
	tests := []struct {
		name    string
		parent  string
		ordinal int
	}{
		{"web-0", "web", 0},
		{"web-12", "web", 12},
		{"my-web-3", "my-web", 3},
		{"web", "", -1},
		{"web-", "", -1},
		{"web-x", "", -1},
		{"web-99999999999", "", -1},
	}
	for _, tt := range tests {
		p, o := parentAndOrdinal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.name}})
		if p != tt.parent || o != tt.ordinal {
			t.Errorf("%s: %q %d, want %q %d", tt.name, p, o, tt.parent, tt.ordinal)
		}
	}
}

func TestUpdateTargets_HighestOrdinalFirstDownToPartition(t *testing.T) {
	tests := []struct {
		name           string
		pods           []*corev1.Pod
		partition, max int
		want           []int
	}{
		{"highest old pod first", []*corev1.Pod{member("web-0", "ready old"), member("web-1", "ready old"), member("web-2", "ready old")}, 0, 1, []int{2}},
		{"skips updated pods", []*corev1.Pod{member("web-0", "ready old"), member("web-1", "ready old"), member("web-2", "ready")}, 0, 1, []int{1}},
		{"waits for an unhealthy pod", []*corev1.Pod{member("web-0", "ready old"), member("web-1", "ready old"), member("web-2", "")}, 0, 1, nil},
		{"a terminating pod is unhealthy", []*corev1.Pod{member("web-0", "ready old"), member("web-1", "ready old deleting")}, 0, 1, nil},
		{"stops at the partition", []*corev1.Pod{member("web-0", "ready old"), member("web-1", "ready old"), member("web-2", "ready")}, 2, 1, nil},
		{"partition 1 updates ordinal 1", []*corev1.Pod{member("web-0", "ready old"), member("web-1", "ready old"), member("web-2", "ready")}, 1, 1, []int{1}},
		{"maxUnavailable 2", []*corev1.Pod{member("web-0", "ready old"), member("web-1", "ready old"), member("web-2", "ready old")}, 0, 2, []int{2, 1}},
		{"maxUnavailable 2 with one unhealthy", []*corev1.Pod{member("web-0", "ready old"), member("web-1", "ready old"), member("web-2", "old")}, 0, 2, []int{2}},
		{"all updated", []*corev1.Pod{member("web-0", "ready"), member("web-1", "ready")}, 0, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := updateTargets(tt.pods, "web-new", tt.partition, tt.max); !slices.Equal(got, tt.want) {
				t.Errorf("= %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMaxUnavailableOf(t *testing.T) {
	tests := []struct {
		v    *intstr.IntOrString
		n    int
		want int
	}{
		{nil, 5, 1},
		{new(intstr.FromInt32(3)), 5, 3},
		{new(intstr.FromString("50%")), 5, 2},
		{new(intstr.FromString("10%")), 5, 1},
		{new(intstr.FromInt32(0)), 5, 1},
	}
	for _, tt := range tests {
		if got, err := maxUnavailableOf(tt.v, tt.n); err != nil || got != tt.want {
			t.Errorf("%v of %d = %d, %v; want %d", tt.v, tt.n, got, err, tt.want)
		}
	}
}

func webSet(n int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "set-uid"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &n,
			ServiceName: "svc",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "v1"}},
					Volumes:    []corev1.Volume{{Name: "data"}, {Name: "config"}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"tier": "db"}}}},
		},
	}
}

func TestPartitionPods(t *testing.T) {
	set := webSet(3)
	set.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 1}
	pods := []*corev1.Pod{member("web-4", "ready"), member("web-2", "ready"), member("web-0", ""), member("web-7", "ready"), member("stray", "")}
	replicasList, condemned := partitionPods(set, pods)
	var got []string
	for _, p := range replicasList {
		if p == nil {
			got = append(got, "-")
		} else {
			got = append(got, p.Name)
		}
	}
	var gone []string
	for _, p := range condemned {
		gone = append(gone, p.Name)
	}
	if !slices.Equal(got, []string{"-", "web-2", "-"}) || !slices.Equal(gone, []string{"web-7", "web-4", "web-0"}) {
		t.Errorf("replicas %v, condemned %v", got, gone)
	}
	if u := firstUnhealthy(replicasList[1:2], condemned); u == nil || u.Name != "web-0" {
		t.Errorf("first unhealthy = %v", u)
	}
}

func TestNewPod_Identity(t *testing.T) {
	pod := newPod(webSet(3), 2, "web-abc")
	want := map[string]string{"app": "web", appsv1.StatefulSetPodNameLabel: "web-2", appsv1.PodIndexLabel: "2", appsv1.StatefulSetRevisionLabel: "web-abc"}
	if pod.Name != "web-2" || pod.Namespace != "ns" || pod.Spec.Hostname != "web-2" || pod.Spec.Subdomain != "svc" || !mapsEqual(pod.Labels, want) {
		t.Errorf("pod %s/%s host %s sub %s labels %v", pod.Namespace, pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, pod.Labels)
	}
	vols := pod.Spec.Volumes
	if len(vols) != 2 || vols[0].Name != "data" || vols[0].PersistentVolumeClaim.ClaimName != "data-web-2" || vols[1].Name != "config" {
		t.Errorf("volumes %+v", vols)
	}
	if !identityMatches(webSet(3), pod) || !storageMatches(webSet(3), pod) {
		t.Error("a new pod does not match its own identity")
	}
	claims := claimsFor(webSet(3), 2)
	if len(claims) != 1 || claims[0].Name != "data-web-2" || !mapsEqual(claims[0].Labels, map[string]string{"tier": "db", "app": "web"}) {
		t.Errorf("claims %+v", claims)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.Kind != "StatefulSet" || ref.UID != "set-uid" {
		t.Errorf("controller %v", ref)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestVersionedPod_PartitionKeepsLowOrdinalsOnCurrentRevision(t *testing.T) {
	current := webSet(4)
	update := webSet(4)
	update.Spec.Template.Spec.Containers[0].Image = "v2"
	partitioned := func(p int32) {
		for _, s := range []*appsv1.StatefulSet{current, update} {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &p}}
		}
	}
	tests := []struct {
		name    string
		setup   func()
		ordinal int
		want    string
	}{
		{"below the partition", func() { partitioned(2) }, 1, "cur"},
		{"at the partition", func() { partitioned(2) }, 2, "upd"},
		{"OnDelete recreates at the update revision", func() {
			for _, s := range []*appsv1.StatefulSet{current, update} {
				s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			}
		}, 0, "upd"},
		{"rolling update without parameters: below the current count", func() {
			for _, s := range []*appsv1.StatefulSet{current, update} {
				s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
			}
			current.Status.CurrentReplicas = 2
		}, 1, "cur"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup()
			pod := versionedPod(current, update, "cur", "upd", tt.ordinal)
			if got := podRevision(pod); got != tt.want {
				t.Errorf("revision %s, want %s", got, tt.want)
			}
			wantImage := map[string]string{"cur": "v1", "upd": "v2"}[tt.want]
			if img := pod.Spec.Containers[0].Image; img != wantImage {
				t.Errorf("image %s, want %s", img, wantImage)
			}
		})
	}
}

func TestClaimOwners_FollowRetentionPolicy(t *testing.T) {
	retain, del := appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	tests := []struct {
		whenDeleted, whenScaled appsv1.PersistentVolumeClaimRetentionPolicyType
		ordinal                 int
		want                    string
	}{
		{retain, retain, 0, ""},
		{retain, retain, 5, ""},
		{del, retain, 0, "StatefulSet"},
		{del, retain, 5, "StatefulSet"},
		{retain, del, 0, ""},
		{retain, del, 5, "Pod"},
		{del, del, 0, "StatefulSet"},
		{del, del, 5, "Pod"},
	}
	for _, tt := range tests {
		set := webSet(3)
		set.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: tt.whenDeleted, WhenScaled: tt.whenScaled}
		pod := newPod(set, tt.ordinal, "r")
		pod.UID = "pod-uid"
		// Start from the opposite of what is wanted to see both moves.
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
			{Kind: "Other", UID: "other"}, {Kind: "StatefulSet", UID: "set-uid"}, {Kind: "Pod", UID: "pod-uid"},
		}}}
		setClaimOwners(set, pod, claim)
		var got []string
		for _, r := range claim.OwnerReferences[1:] {
			got = append(got, r.Kind)
		}
		if strings.Join(got, ",") != tt.want || claim.OwnerReferences[0].UID != "other" {
			t.Errorf("%s/%s ordinal %d: owners %v, want %q", tt.whenDeleted, tt.whenScaled, tt.ordinal, claim.OwnerReferences, tt.want)
		}
		if !claimOwnersMatch(set, pod, claim) || setClaimOwners(set, pod, claim) {
			t.Errorf("%s/%s ordinal %d: not stable", tt.whenDeleted, tt.whenScaled, tt.ordinal)
		}
	}
}

func TestRevisions_HashAndApply(t *testing.T) {
	set := webSet(3)
	r1, err := newRevision(set, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := newRevision(set.DeepCopy(), 7, 0)
	bumped, _ := newRevision(set, 1, 1)
	changed := set.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "v2"
	r2, _ := newRevision(changed, 2, 0)
	switch {
	case r1.Name != again.Name:
		t.Errorf("same template, names %s and %s", r1.Name, again.Name)
	case r1.Name == bumped.Name:
		t.Error("the collision count does not change the name")
	case r1.Name == r2.Name:
		t.Error("a new template keeps the name")
	case !strings.HasPrefix(r1.Name, "web-") || r1.Labels[appsv1.ControllerRevisionHashLabelKey] != strings.TrimPrefix(r1.Name, "web-") || r1.Labels["app"] != "web":
		t.Errorf("revision %s labels %v", r1.Name, r1.Labels)
	}
	var shape map[string]map[string]map[string]any
	if err := json.Unmarshal(r1.Data.Raw, &shape); err != nil || shape["spec"]["template"]["$patch"] != "replace" {
		t.Errorf("data %s", r1.Data.Raw)
	}
	// Applying a revision restores its template and nothing else.
	changed.Spec.Replicas = new(int32(9))
	restored, err := applyRevision(changed, r1)
	if err != nil {
		t.Fatal(err)
	}
	if restored.Spec.Template.Spec.Containers[0].Image != "v1" || *restored.Spec.Replicas != 9 {
		t.Errorf("restored image %s replicas %d", restored.Spec.Template.Spec.Containers[0].Image, *restored.Spec.Replicas)
	}
	hist := []*appsv1.ControllerRevision{r2, {Revision: 1}, {Revision: 3}}
	sortRevisions(hist)
	if hist[0].Revision != 1 || hist[2].Revision != 3 {
		t.Errorf("sorted %d %d %d", hist[0].Revision, hist[1].Revision, hist[2].Revision)
	}
}

func TestStatusChanged(t *testing.T) {
	base := appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, CurrentRevision: "a", UpdateRevision: "a", CollisionCount: new(int32(0))}
	tests := []struct {
		name   string
		change func(*appsv1.StatefulSetStatus)
		want   bool
	}{
		{"same", func(*appsv1.StatefulSetStatus) {}, false},
		{"older generation", func(s *appsv1.StatefulSetStatus) { s.ObservedGeneration = 1 }, false},
		{"newer generation", func(s *appsv1.StatefulSetStatus) { s.ObservedGeneration = 3 }, true},
		{"ready count", func(s *appsv1.StatefulSetStatus) { s.ReadyReplicas = 1 }, true},
		{"update revision", func(s *appsv1.StatefulSetStatus) { s.UpdateRevision = "b" }, true},
		{"collision count", func(s *appsv1.StatefulSetStatus) { s.CollisionCount = new(int32(1)) }, true},
	}
	for _, tt := range tests {
		cur := *base.DeepCopy()
		tt.change(&cur)
		if got := statusChanged(&base, &cur); got != tt.want {
			t.Errorf("%s: %v", tt.name, got)
		}
	}
}
