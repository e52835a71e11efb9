package statefulset

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// podName matches <set>-<ordinal>, the only names a set's pods have.
var podName = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// parentAndOrdinal splits a pod's name; ordinal is -1 for a name that is
// not a set member's.
func parentAndOrdinal(pod *corev1.Pod) (string, int) {
	m := podName.FindStringSubmatch(pod.Name)
	if m == nil {
		return "", -1
	}
	i, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return "", -1
	}
	return m[1], int(i)
}

func ordinalOf(pod *corev1.Pod) int {
	_, o := parentAndOrdinal(pod)
	return o
}

func isMemberOf(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, o := parentAndOrdinal(pod)
	return o >= 0 && parent == set.Name
}

func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func replicas(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

// inRange says whether pod's ordinal is one the set currently wants.
func inRange(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	o := ordinalOf(pod)
	return o >= startOrdinal(set) && o < startOrdinal(set)+replicas(set)
}

func memberName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

func claimName(set *appsv1.StatefulSet, template string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template, set.Name, ordinal)
}

// identityMatches says whether pod still carries the identity of its
// ordinal: name and the labels a headless service and users select on.
func identityMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, o := parentAndOrdinal(pod)
	return o >= 0 && parent == set.Name && pod.Namespace == set.Namespace &&
		pod.Labels[appsv1.StatefulSetPodNameLabel] == pod.Name &&
		pod.Labels[appsv1.PodIndexLabel] == strconv.Itoa(o)
}

// setIdentity (re)labels pod with its identity.
func setIdentity(set *appsv1.StatefulSet, pod *corev1.Pod) {
	o := ordinalOf(pod)
	pod.Name = memberName(set, o)
	pod.Namespace = set.Namespace
	pod.Labels = maps.Clone(pod.Labels)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(o)
}

// claimsFor are the claims pod mounts, one per volume claim template, in
// template order. They carry the set's selector labels so that they can
// be found again by it.
func claimsFor(set *appsv1.StatefulSet, ordinal int) []corev1.PersistentVolumeClaim {
	out := make([]corev1.PersistentVolumeClaim, 0, len(set.Spec.VolumeClaimTemplates))
	for _, t := range set.Spec.VolumeClaimTemplates {
		c := *t.DeepCopy()
		c.Name = claimName(set, t.Name, ordinal)
		c.Namespace = set.Namespace
		c.Labels = maps.Clone(c.Labels)
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			maps.Copy(c.Labels, set.Spec.Selector.MatchLabels)
		}
		c.ResourceVersion, c.UID, c.CreationTimestamp = "", "", metav1.Time{}
		out = append(out, c)
	}
	return out
}

// storageMatches says whether pod mounts every claim it should.
func storageMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	o := ordinalOf(pod)
	if o < 0 {
		return false
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, t := range set.Spec.VolumeClaimTemplates {
		v, ok := vols[t.Name]
		if !ok || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claimName(set, t.Name, o) {
			return false
		}
	}
	return true
}

// setStorage mounts pod's claims as the volumes named after their
// templates, replacing a template volume of the same name.
func setStorage(set *appsv1.StatefulSet, pod *corev1.Pod) {
	o := ordinalOf(pod)
	templates := map[string]bool{}
	var vols []corev1.Volume
	for _, t := range set.Spec.VolumeClaimTemplates {
		templates[t.Name] = true
		vols = append(vols, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(set, t.Name, o)},
		}})
	}
	for _, v := range pod.Spec.Volumes {
		if !templates[v.Name] {
			vols = append(vols, v)
		}
	}
	pod.Spec.Volumes = vols
}

// newPod is the pod for ordinal made from set's template (set being the
// set at the revision the pod is to run), labelled with that revision.
func newPod(set *appsv1.StatefulSet, ordinal int, revision string) *corev1.Pod {
	t := set.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            memberName(set, ordinal),
			Namespace:       set.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Spec: t.Spec,
	}
	setIdentity(set, pod)
	// Hostname and subdomain give the pod its DNS name under the set's
	// headless service; they cannot change after creation.
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	setStorage(set, pod)
	pod.Labels[appsv1.StatefulSetRevisionLabel] = revision
	return pod
}

func podRevision(pod *corev1.Pod) string {
	return pod.Labels[appsv1.StatefulSetRevisionLabel]
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// isCreated: pods the API server holds have a phase; the ones this sync
// means to create have none yet.
func isCreated(pod *corev1.Pod) bool     { return pod.Status.Phase != "" }
func isFailed(pod *corev1.Pod) bool      { return pod.Status.Phase == corev1.PodFailed }
func isSucceeded(pod *corev1.Pod) bool   { return pod.Status.Phase == corev1.PodSucceeded }
func isPending(pod *corev1.Pod) bool     { return pod.Status.Phase == corev1.PodPending }
func isTerminating(pod *corev1.Pod) bool { return pod.DeletionTimestamp != nil }

func isRunningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && readyCondition(pod) != nil
}

// isRunningAndAvailable is running and ready for minReadySeconds.
func isRunningAndAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(pod)
	if pod.Status.Phase != corev1.PodRunning || c == nil {
		return false
	}
	return minReadySeconds == 0 || (!c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).Before(now))
}

func isHealthy(pod *corev1.Pod) bool {
	return isRunningAndReady(pod) && !isTerminating(pod)
}

// retentionPolicy is the set's claim retention, Retain where unset.
func retentionPolicy(set *appsv1.StatefulSet) appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	p := appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}
	if r := set.Spec.PersistentVolumeClaimRetentionPolicy; r != nil {
		if r.WhenDeleted != "" {
			p.WhenDeleted = r.WhenDeleted
		}
		if r.WhenScaled != "" {
			p.WhenScaled = r.WhenScaled
		}
	}
	return p
}

// wantClaimOwners says which owner references the retention policy wants
// on a claim of pod: the set's (so deleting the set deletes the claim) and
// the pod's (so a scaled-down pod takes its claim along).
func wantClaimOwners(set *appsv1.StatefulSet, pod *corev1.Pod) (bySet, byPod bool) {
	p := retentionPolicy(set)
	del := appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	scaledDown := !inRange(set, pod)
	switch {
	case p.WhenScaled == del && scaledDown:
		return false, true
	default:
		return p.WhenDeleted == del, false
	}
}

func hasOwner(obj metav1.Object, uid string) bool {
	for _, r := range obj.GetOwnerReferences() {
		if string(r.UID) == uid {
			return true
		}
	}
	return false
}

// claimOwnersMatch says whether claim's references are as the policy wants.
func claimOwnersMatch(set *appsv1.StatefulSet, pod *corev1.Pod, claim *corev1.PersistentVolumeClaim) bool {
	bySet, byPod := wantClaimOwners(set, pod)
	return hasOwner(claim, string(set.UID)) == bySet && hasOwner(claim, string(pod.UID)) == byPod
}

// setClaimOwners makes claim's references what the policy wants and says
// whether it changed anything.
func setClaimOwners(set *appsv1.StatefulSet, pod *corev1.Pod, claim *corev1.PersistentVolumeClaim) bool {
	bySet, byPod := wantClaimOwners(set, pod)
	changed := false
	apply := func(want bool, ref metav1.OwnerReference) {
		has := hasOwner(claim, string(ref.UID))
		switch {
		case want && !has:
			claim.OwnerReferences = append(claim.OwnerReferences, ref)
			changed = true
		case !want && has:
			var kept []metav1.OwnerReference
			for _, r := range claim.OwnerReferences {
				if r.UID != ref.UID {
					kept = append(kept, r)
				}
			}
			claim.OwnerReferences = kept
			changed = true
		}
	}
	apply(bySet, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set.Name, UID: set.UID})
	apply(byPod, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID})
	return changed
}

// staleOwner says whether claim still belongs to an earlier pod of the
// same name: it is on its way out and must not be mounted by a new pod.
func staleOwner(claim *corev1.PersistentVolumeClaim, pod *corev1.Pod) bool {
	for _, r := range claim.OwnerReferences {
		if r.Kind == "Pod" && r.Name == pod.Name && r.UID != pod.UID {
			return true
		}
	}
	return false
}
