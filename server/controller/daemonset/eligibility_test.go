package daemonset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func withAffinity(terms ...corev1.NodeSelectorTerm) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
}

func TestNodeShouldRunDaemonPod(t *testing.T) {
	taint := func(key string, effect corev1.TaintEffect) corev1.Taint {
		return corev1.Taint{Key: key, Value: "x", Effect: effect}
	}
	tests := []struct {
		name      string
		labels    map[string]string
		taints    []corev1.Taint
		spec      func(*corev1.PodSpec)
		run, stay bool
	}{
		{name: "plain node", run: true, stay: true},
		{name: "node selector matches", labels: map[string]string{"disk": "ssd"}, spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} }, run: true, stay: true},
		{name: "node selector does not match", labels: map[string]string{"disk": "hdd"}, spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} }},
		{name: "node selector label missing", spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} }},
		{name: "affinity In matches", labels: map[string]string{"zone": "a"}, spec: withAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "a", "b")}}), run: true, stay: true},
		{name: "affinity terms are ORed", labels: map[string]string{"zone": "c"}, spec: withAffinity(
			corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "a")}},
			corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpNotIn, "a")}}), run: true, stay: true},
		{name: "affinity requirements are ANDed", labels: map[string]string{"zone": "a"}, spec: withAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			req("zone", corev1.NodeSelectorOpIn, "a"), req("gpu", corev1.NodeSelectorOpExists)}})},
		{name: "affinity DoesNotExist", spec: withAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req("gpu", corev1.NodeSelectorOpDoesNotExist)}}), run: true, stay: true},
		{name: "affinity Gt", labels: map[string]string{"cores": "8"}, spec: withAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req("cores", corev1.NodeSelectorOpGt, "4")}}), run: true, stay: true},
		{name: "affinity Lt fails", labels: map[string]string{"cores": "8"}, spec: withAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req("cores", corev1.NodeSelectorOpLt, "4")}})},
		{name: "affinity on node name", spec: withAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "node")}}), run: true, stay: true},
		{name: "affinity on another node name", spec: withAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "elsewhere")}})},
		{name: "an empty term matches nothing", spec: withAffinity(corev1.NodeSelectorTerm{})},
		{name: "spec.nodeName elsewhere", spec: func(s *corev1.PodSpec) { s.NodeName = "elsewhere" }},
		{name: "untolerated NoSchedule keeps running pods", taints: []corev1.Taint{taint("dedicated", corev1.TaintEffectNoSchedule)}, stay: true},
		{name: "untolerated NoExecute evicts", taints: []corev1.Taint{taint("dedicated", corev1.TaintEffectNoExecute)}},
		{name: "PreferNoSchedule is ignored", taints: []corev1.Taint{taint("dedicated", corev1.TaintEffectPreferNoSchedule)}, run: true, stay: true},
		{name: "tolerated taint", taints: []corev1.Taint{taint("dedicated", corev1.TaintEffectNoSchedule)}, spec: func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x"}}
		}, run: true, stay: true},
		{name: "toleration with the wrong value", taints: []corev1.Taint{taint("dedicated", corev1.TaintEffectNoSchedule)}, spec: func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "y"}}
		}, stay: true},
		{name: "not-ready NoExecute is tolerated by default", taints: []corev1.Taint{taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)}, run: true, stay: true},
		{name: "unreachable NoExecute is tolerated by default", taints: []corev1.Taint{taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)}, run: true, stay: true},
		{name: "unschedulable is tolerated by default", taints: []corev1.Taint{taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)}, run: true, stay: true},
		{name: "disk pressure is tolerated by default", taints: []corev1.Taint{taint(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)}, run: true, stay: true},
		{name: "network-unavailable only for host-network pods", taints: []corev1.Taint{taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)}, stay: true},
		{name: "network-unavailable with host network", taints: []corev1.Taint{taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)}, spec: func(s *corev1.PodSpec) { s.HostNetwork = true }, run: true, stay: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{}
			if tt.spec != nil {
				tt.spec(&ds.Spec.Template.Spec)
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", Labels: tt.labels}, Spec: corev1.NodeSpec{Taints: tt.taints}}
			run, stay := nodeShouldRunDaemonPod(node, ds)
			if run != tt.run || stay != tt.stay {
				t.Errorf("run, stay = %v, %v; want %v, %v", run, stay, tt.run, tt.stay)
			}
		})
	}
}

func TestAddDaemonTolerations_ReplacesUserTolerationSeconds(t *testing.T) {
	secs := int64(30)
	spec := &corev1.PodSpec{Tolerations: []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
		{Key: "mine", Operator: corev1.TolerationOpExists},
	}}
	addDaemonTolerations(spec)
	if len(spec.Tolerations) != 7 {
		t.Fatalf("tolerations = %v", spec.Tolerations)
	}
	if spec.Tolerations[0].TolerationSeconds != nil || spec.Tolerations[1].Key != "mine" {
		t.Errorf("tolerations = %v", spec.Tolerations)
	}
	addDaemonTolerations(spec)
	if len(spec.Tolerations) != 7 {
		t.Errorf("adding twice duplicated tolerations: %v", spec.Tolerations)
	}
}

func TestPinToNode_ReplacesNodeTermsAndKeepsTheRest(t *testing.T) {
	aff := &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "a")}},
			{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "old")}},
		}}},
		PodAntiAffinity: &corev1.PodAntiAffinity{},
	}
	got := pinToNode(aff, "n1")
	if got.PodAntiAffinity == nil {
		t.Error("pod anti-affinity dropped")
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Affinity: got}}
	if n, ok := targetNode(pod); !ok || n != "n1" {
		t.Errorf("target = %q, %v", n, ok)
	}
	if terms := got.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 1 || len(terms[0].MatchExpressions) != 0 {
		t.Errorf("terms = %v", terms)
	}
	if n, ok := targetNode(&corev1.Pod{Spec: corev1.PodSpec{NodeName: "bound", Affinity: got}}); !ok || n != "bound" {
		t.Errorf("a bound pod's target = %q", n)
	}
	if _, ok := targetNode(&corev1.Pod{}); ok {
		t.Error("a pod without affinity has a target")
	}
	if pinToNode(nil, "n2").NodeAffinity == nil {
		t.Error("nil affinity not pinned")
	}
}
