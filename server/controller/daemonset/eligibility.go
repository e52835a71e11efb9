package daemonset

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// daemonTolerations are added to every daemon pod so that the node
// lifecycle controller's taints neither evict a daemon (daemons are what
// often brings a node back) nor keep one off a node under pressure.
func daemonTolerations(hostNetwork bool) []corev1.Toleration {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	t := []corev1.Toleration{
		exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
	}
	if hostNetwork {
		// Only host-network pods can come up before the node's pod network.
		t = append(t, exists(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule))
	}
	return t
}

// addDaemonTolerations adds the daemon tolerations to spec, replacing a
// toleration the user wrote with the same key, operator, value and effect
// (a user's tolerationSeconds on those would let the daemon be evicted).
func addDaemonTolerations(spec *corev1.PodSpec) {
	for _, want := range daemonTolerations(spec.HostNetwork) {
		replaced := false
		for i := range spec.Tolerations {
			if want.MatchToleration(&spec.Tolerations[i]) {
				spec.Tolerations[i] = want
				replaced = true
			}
		}
		if !replaced {
			spec.Tolerations = append(spec.Tolerations, want)
		}
	}
}

// tolerates reports whether t tolerates taint. The numeric Lt/Gt operators
// are behind an alpha gate upstream and treated as not matching, as there.
func tolerates(t corev1.Toleration, taint corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	case corev1.TolerationOpExists:
		return true
	}
	return false
}

// untolerated reports whether some taint selected by effects is tolerated by
// none of tolerations.
func untolerated(taints []corev1.Taint, tolerations []corev1.Toleration, effects ...corev1.TaintEffect) bool {
	for _, taint := range taints {
		considered := false
		for _, e := range effects {
			considered = considered || taint.Effect == e
		}
		if !considered {
			continue
		}
		ok := false
		for _, t := range tolerations {
			if tolerates(t, taint) {
				ok = true
				break
			}
		}
		if !ok {
			return true
		}
	}
	return false
}

// nodeShouldRunDaemonPod says whether ds wants a pod on node (shouldRun)
// and whether a pod already there may stay (shouldContinue): a pod keeps
// running on a node that gained a NoSchedule taint it does not tolerate,
// as the kubelet would not evict it either.
func nodeShouldRunDaemonPod(node *corev1.Node, ds *appsv1.DaemonSet) (shouldRun, shouldContinue bool) {
	spec := ds.Spec.Template.Spec.DeepCopy()
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false, false
	}
	addDaemonTolerations(spec)
	if !matchesNodeSelector(spec, node) {
		return false, false
	}
	if untolerated(node.Spec.Taints, spec.Tolerations, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) {
		return false, !untolerated(node.Spec.Taints, spec.Tolerations, corev1.TaintEffectNoExecute)
	}
	return true, true
}

// matchesNodeSelector is the scheduler's required node affinity: the
// nodeSelector labels and, when given, one of the required terms.
func matchesNodeSelector(spec *corev1.PodSpec, node *corev1.Node) bool {
	for k, v := range spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if termMatches(term, node) {
			return true
		}
	}
	return false
}

// termMatches ANDs a term's requirements. An empty term matches nothing,
// as upstream: it would otherwise select every node by accident.
func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, r := range term.MatchExpressions {
		v, ok := node.Labels[r.Key]
		if !requirementMatches(r, v, ok) {
			return false
		}
	}
	for _, r := range term.MatchFields {
		// metadata.name is the only field the API allows here.
		if r.Key != metav1.ObjectNameField || !requirementMatches(r, node.Name, true) {
			return false
		}
	}
	return true
}

func requirementMatches(r corev1.NodeSelectorRequirement, value string, present bool) bool {
	in := func() bool {
		for _, v := range r.Values {
			if v == value {
				return true
			}
		}
		return false
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return present && in()
	case corev1.NodeSelectorOpNotIn:
		return !present || !in()
	case corev1.NodeSelectorOpExists:
		return present
	case corev1.NodeSelectorOpDoesNotExist:
		return !present
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !present || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// pinToNode makes the scheduler place the pod on nodeName: the required
// node affinity becomes the single term metadata.name In [nodeName]. The
// template's own terms are dropped; the node was already checked against
// them, and keeping them could only make the pod unschedulable.
func pinToNode(affinity *corev1.Affinity, nodeName string) *corev1.Affinity {
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}},
	}}}
	if affinity == nil {
		affinity = &corev1.Affinity{}
	}
	if affinity.NodeAffinity == nil {
		affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
	return affinity
}

// targetNode is the node a daemon pod is for: where it is bound, or, while
// it waits for the scheduler, the node its affinity pins it to.
func targetNode(pod *corev1.Pod) (string, bool) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, true
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchFields {
			if r.Key == metav1.ObjectNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				return r.Values[0], true
			}
		}
	}
	return "", false
}
