package deployment

import (
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Labels and annotations shared with kubectl, which reads them to show
// and undo rollouts.
const (
	hashLabel                 = appsv1.DefaultDeploymentUniqueLabelKey
	revisionAnnotation        = "deployment.kubernetes.io/revision"
	revisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	desiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	maxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	lastAppliedAnnotation     = corev1.LastAppliedConfigAnnotation
	rollbackToAnnotation      = "deprecated.deployment.rollback.to"
	// maxRevisionHistoryChars bounds revision-history, which otherwise
	// grows with every undo to the same ReplicaSet.
	maxRevisionHistoryChars = 2000
)

// Condition reasons kubectl and users look for.
const (
	reasonNewRSCreated       = "NewReplicaSetCreated"
	reasonFoundNewRS         = "FoundNewReplicaSet"
	reasonRSUpdated          = "ReplicaSetUpdated"
	reasonNewRSAvailable     = "NewReplicaSetAvailable"
	reasonTimedOut           = "ProgressDeadlineExceeded"
	reasonPaused             = "DeploymentPaused"
	reasonResumed            = "DeploymentResumed"
	reasonFailedRSCreate     = "ReplicaSetCreateError"
	reasonMinimumAvailable   = "MinimumReplicasAvailable"
	reasonMinimumUnavailable = "MinimumReplicasUnavailable"
)

// skippedAnnotations stay on the Deployment: they describe it, not the
// ReplicaSet, or are the ReplicaSet's own.
var skippedAnnotations = map[string]bool{
	lastAppliedAnnotation:     true,
	revisionAnnotation:        true,
	revisionHistoryAnnotation: true,
	desiredReplicasAnnotation: true,
	maxReplicasAnnotation:     true,
	rollbackToAnnotation:      true,
}

// templateHash names a template: FNV-32a over its JSON (deterministic:
// struct fields in order, map keys sorted) and the collision count, which
// moves the name on when another object took it. Only names depend on it:
// the new ReplicaSet is found by comparing templates.
func templateHash(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	b, _ := json.Marshal(t)
	_, _ = h.Write(b)
	if collisionCount != nil {
		var buf [8]byte
		binary.LittleEndian.PutUint32(buf[:], uint32(*collisionCount))
		_, _ = h.Write(buf[:])
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// equalIgnoringHash compares templates but for the hash label, which only
// the ReplicaSet's copy carries.
func equalIgnoringHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, hashLabel)
	delete(b.Labels, hashLabel)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return equality.Semantic.DeepEqual(a, b)
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}

func selectorWithLabel(sel *metav1.LabelSelector, k, v string) *metav1.LabelSelector {
	out := sel.DeepCopy()
	out.MatchLabels = withLabel(out.MatchLabels, k, v)
	return out
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func isRolling(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// fenceposts resolves maxSurge and maxUnavailable against the replicas:
// surge rounds up, unavailable down, and both zero would never progress,
// so unavailable becomes 1 then.
func fenceposts(surge, unavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	zero := intstr.FromInt32(0)
	s, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(surge, zero), int(desired), true)
	if err != nil {
		return 0, 0, err
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(unavailable, zero), int(desired), false)
	if err != nil {
		return 0, 0, err
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u), nil
}

// maxSurge is how many pods above the replicas a rollout may run.
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRolling(d) || d.Spec.Strategy.RollingUpdate == nil {
		return 0
	}
	s, _, _ := fenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, replicas(d.Spec.Replicas))
	return s
}

// maxUnavailable is how many of the replicas a rollout may lack.
func maxUnavailable(d *appsv1.Deployment) int32 {
	r := replicas(d.Spec.Replicas)
	if !isRolling(d) || d.Spec.Strategy.RollingUpdate == nil || r == 0 {
		return 0
	}
	_, u, _ := fenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, r)
	return min(u, r)
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

func revisionOf(rs *appsv1.ReplicaSet) int64 {
	n, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
	return n
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		m = max(m, revisionOf(rs))
	}
	return m
}

// Sums over ReplicaSets; nil entries (no new ReplicaSet yet) count zero.

func specReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += replicas(rs.Spec.Replicas)
		}
	}
	return n
}

func sumStatus(rss []*appsv1.ReplicaSet, f func(*appsv1.ReplicaSetStatus) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(&rs.Status)
		}
	}
	return n
}

func statusReplicas(s *appsv1.ReplicaSetStatus) int32  { return s.Replicas }
func statusReady(s *appsv1.ReplicaSetStatus) int32     { return s.ReadyReplicas }
func statusAvailable(s *appsv1.ReplicaSetStatus) int32 { return s.AvailableReplicas }
func statusTerminating(s *appsv1.ReplicaSetStatus) int32 {
	if s.TerminatingReplicas == nil {
		return 0
	}
	return *s.TerminatingReplicas
}

// podsBound counts, for the surge limit, the pods a ReplicaSet may have:
// its spec, or more while a scale-down has not yet shown in its status.
// Upstream counts the spec alone, which lets a new pod start before the
// old one it replaces is gone.
func podsBound(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += max(replicas(rs.Spec.Replicas), rs.Status.Replicas)
		}
	}
	return n
}

// availableBound counts, for the unavailability limit, the pods surely
// available: a ReplicaSet's status may still count pods its scale-down is
// deleting, so no more than its spec is believed.
func availableBound(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += min(replicas(rs.Spec.Replicas), rs.Status.AvailableReplicas)
		}
	}
	return n
}

func activeReplicaSets(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && replicas(rs.Spec.Replicas) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// olderFirst orders by creation, then name, as upstream does.
func olderFirst(a, b *appsv1.ReplicaSet) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

func sortOlderFirst(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool { return olderFirst(rss[i], rss[j]) })
}

// sortByRevision orders oldest revision first, for cleanup.
func sortByRevision(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool {
		ri, rj := revisionOf(rss[i]), revisionOf(rss[j])
		if ri == rj {
			return olderFirst(rss[i], rss[j])
		}
		return ri < rj
	})
}

// setReplicasAnnotations records the deployment size a ReplicaSet was
// scaled for; proportional scaling reads max-replicas back.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	d, m := strconv.Itoa(int(desired)), strconv.Itoa(int(maxReplicas))
	changed := rs.Annotations[desiredReplicasAnnotation] != d || rs.Annotations[maxReplicasAnnotation] != m
	rs.Annotations[desiredReplicasAnnotation] = d
	rs.Annotations[maxReplicasAnnotation] = m
	return changed
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[desiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[maxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}

func annotatedInt(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// setNewRSAnnotations copies the Deployment's annotations to its new
// ReplicaSet and moves its revision to newRevision; a ReplicaSet that
// becomes new again (an undo) keeps its earlier revisions in
// revision-history. It reports whether anything changed.
func setNewRSAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64, exists bool) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range d.Annotations {
		if skippedAnnotations[k] || rs.Annotations[k] == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	old, had := rs.Annotations[revisionAnnotation]
	oldRevision, err := strconv.ParseInt(old, 10, 64)
	if err != nil {
		if old != "" {
			// Someone else's value: leave it alone.
			return changed
		}
		oldRevision = 0
	}
	if oldRevision < newRevision {
		rs.Annotations[revisionAnnotation] = strconv.FormatInt(newRevision, 10)
		changed = true
		if had {
			rs.Annotations[revisionHistoryAnnotation] = appendRevisionHistory(rs.Annotations[revisionHistoryAnnotation], old)
		}
	}
	if !exists && setReplicasAnnotations(rs, replicas(d.Spec.Replicas), replicas(d.Spec.Replicas)+maxSurge(d)) {
		changed = true
	}
	return changed
}

// appendRevisionHistory adds a revision to the comma-separated history,
// dropping the oldest entries to stay within maxRevisionHistoryChars.
func appendRevisionHistory(history, revision string) string {
	if history == "" {
		return revision
	}
	entries := strings.Split(history, ",")
	total := len(history) + len(revision) + 1
	start := 0
	for total > maxRevisionHistoryChars && start < len(entries) {
		total -= len(entries[start]) + 1
		start++
	}
	return strings.Join(append(entries[start:], revision), ",")
}

// newDeploymentCondition stamps a condition with now.
func newDeploymentCondition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
	now := metav1.Now()
	return appsv1.DeploymentCondition{Type: t, Status: s, LastUpdateTime: now, LastTransitionTime: now, Reason: reason, Message: msg}
}

func getCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition replaces the condition of its type, keeping the transition
// time while the status stays; the same status and reason change nothing,
// so that an unchanged status is not rewritten.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := getCondition(st, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(st, c.Type)
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}
