package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNodeColumns(t *testing.T) {
	p, _ := For(schema.GroupKind{Kind: "Node"})
	want := "Name;Status;Roles;Age;Version;*Internal-IP;*External-IP;*OS-Image;*Kernel-Version;*Container-Runtime"
	if got := header(p); got != want {
		t.Errorf("header %q, want %q", got, want)
	}
}

func readyCondition(status corev1.ConditionStatus) []corev1.NodeCondition {
	return []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		{Type: corev1.NodeReady, Status: status},
	}
}

func TestNodeCells(t *testing.T) {
	info := corev1.NodeSystemInfo{KubeletVersion: "v1.37.2+skiff", OSImage: "Debian GNU/Linux 12 (bookworm)", KernelVersion: "6.1.0-18-amd64", ContainerRuntimeVersion: "containerd://2.0.0"}
	tests := []struct {
		name string
		node *corev1.Node
		want []interface{}
	}{
		{
			name: "ready worker without roles",
			node: &corev1.Node{
				ObjectMeta: objMeta("worker-1", 10*24*time.Hour),
				Status: corev1.NodeStatus{
					Conditions: readyCondition(corev1.ConditionTrue),
					NodeInfo:   info,
					Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "worker-1"}, {Type: corev1.NodeInternalIP, Address: "192.168.1.10"}},
				},
			},
			want: []interface{}{"worker-1", "Ready", "<none>", "10d", "v1.37.2+skiff", "192.168.1.10", "<none>", info.OSImage, info.KernelVersion, info.ContainerRuntimeVersion},
		},
		{
			name: "not ready cordoned control plane",
			node: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name:              "cp-1",
					CreationTimestamp: ago(5 * time.Hour),
					Labels: map[string]string{
						"node-role.kubernetes.io/control-plane": "",
						"node-role.kubernetes.io/etcd":          "true",
						"node-role.kubernetes.io/":              "",
						"kubernetes.io/role":                    "etcd",
						"kubernetes.io/hostname":                "cp-1",
					},
				},
				Spec: corev1.NodeSpec{Unschedulable: true},
				Status: corev1.NodeStatus{
					Conditions: readyCondition(corev1.ConditionFalse),
					NodeInfo:   info,
					Addresses:  []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.5"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.2"}},
				},
			},
			want: []interface{}{"cp-1", "NotReady,SchedulingDisabled", "control-plane,etcd", "5h", "v1.37.2+skiff", "10.0.0.1", "203.0.113.5", info.OSImage, info.KernelVersion, info.ContainerRuntimeVersion},
		},
		{
			name: "node that never reported",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: map[string]string{"kubernetes.io/role": "worker"}}},
			want: []interface{}{"new", "Unknown", "worker", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "ready unknown is NotReady",
			node: &corev1.Node{ObjectMeta: objMeta("lost", time.Hour), Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: readyCondition(corev1.ConditionUnknown)}},
			want: []interface{}{"lost", "NotReady,SchedulingDisabled", "<none>", "60m", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "cordoned node without conditions",
			node: &corev1.Node{ObjectMeta: objMeta("c", time.Minute), Spec: corev1.NodeSpec{Unschedulable: true}},
			want: []interface{}{"c", "Unknown,SchedulingDisabled", "<none>", "60s", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, schema.GroupKind{Kind: "Node"}, tt.node, tt.want)
		})
	}
}

func TestNamespaceCells(t *testing.T) {
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want []interface{}
	}{
		{"active", &corev1.Namespace{ObjectMeta: objMeta("default", 400*24*time.Hour), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}, []interface{}{"default", "Active", "400d"}},
		{"terminating", &corev1.Namespace{ObjectMeta: objMeta("old", 3*time.Minute), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}, []interface{}{"old", "Terminating", "3m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, schema.GroupKind{Kind: "Namespace"}, tt.ns, tt.want)
		})
	}
	p, _ := For(schema.GroupKind{Kind: "Namespace"})
	if got := header(p); got != "Name;Status;Age" {
		t.Errorf("header %q", got)
	}
}

func TestComponentStatusCells(t *testing.T) {
	tests := []struct {
		name       string
		conditions []corev1.ComponentCondition
		want       []interface{}
	}{
		{"healthy", []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}}, []interface{}{"etcd-0", "Healthy", "ok", ""}},
		{"unhealthy", []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: "refused"}}, []interface{}{"etcd-0", "Unhealthy", "", "refused"}},
		{"no condition", nil, []interface{}{"etcd-0", "Unknown", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := &corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: "etcd-0"}, Conditions: tt.conditions}
			assertCells(t, schema.GroupKind{Kind: "ComponentStatus"}, cs, tt.want)
		})
	}
}
