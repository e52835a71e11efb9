package admission

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/registry"
)

func TestNodeRestriction(t *testing.T) {
	n1 := &auth.User{Name: "system:node:n1", Groups: []string{auth.GroupNodes, auth.GroupAuthenticated}}
	admin := &auth.User{Name: "admin", Groups: []string{auth.GroupMasters}}
	nodes := &registry.Resource{Version: "v1", Name: "nodes", Kind: "Node"}
	pods := &registry.Resource{Version: "v1", Name: "pods", Kind: "Pod", Namespaced: true}
	leases := &registry.Resource{Group: "coordination.k8s.io", Version: "v1", Name: "leases", Kind: "Lease", Namespaced: true}
	node := func(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	mirror := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "static-n1",
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "hash"}}, Spec: corev1.PodSpec{NodeName: "n1"}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	bound := func(nodeName string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p"}, Spec: corev1.PodSpec{NodeName: nodeName}}
	}
	lease := func(ns, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	noSchedule := corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name    string
		a       apiserver.AdmissionAttributes
		wantErr string
	}{
		{"register itself", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: nodes, Object: node("n1", map[string]string{"kubernetes.io/hostname": "n1"}, noSchedule)}, ""},
		{"register as another node", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: nodes, Object: node("n2", nil)}, `may not modify node "n2"`},
		{"update another node", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: nodes, Object: node("n2", nil), Old: node("n2", nil)}, `may not modify node "n2"`},
		{"update its own status", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: nodes, Subresource: "status", Object: node("n1", nil), Old: node("n1", nil)}, ""},
		{"set a node-restriction label", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: nodes,
			Object: node("n1", map[string]string{"node-restriction.kubernetes.io/secure": "true"}), Old: node("n1", nil)}, "node-restriction.kubernetes.io/secure"},
		{"remove a node-restriction label", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: nodes,
			Object: node("n1", nil), Old: node("n1", map[string]string{"node-restriction.kubernetes.io/secure": "true"})}, "node-restriction.kubernetes.io/secure"},
		{"keep a node-restriction label", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: nodes,
			Object: node("n1", map[string]string{"node-restriction.kubernetes.io/secure": "true"}), Old: node("n1", map[string]string{"node-restriction.kubernetes.io/secure": "true"})}, ""},
		{"change its taints", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: nodes, Object: node("n1", nil), Old: node("n1", nil, noSchedule)}, "may not modify its taints"},
		{"delete itself", apiserver.AdmissionAttributes{Op: apiserver.OpDelete, Resource: nodes, Old: node("n1", nil)}, ""},
		{"create a mirror pod", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: pods, Object: mirror(nil)}, ""},
		{"create a regular pod", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: pods, Object: mirror(func(p *corev1.Pod) { p.Annotations = nil })}, "only create mirror pods"},
		{"create a mirror pod for another node", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: pods, Object: mirror(func(p *corev1.Pod) { p.Spec.NodeName = "n2" })}, "bound to itself"},
		{"create a mirror pod using a secret", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: pods, Object: mirror(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "top-secret"}}}}
		})}, `uses secret "top-secret"`},
		{"create a mirror pod using a configmap in env", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: pods, Object: mirror(func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}
		})}, `uses configmap "cm"`},
		{"create a mirror pod with a service account", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: pods, Object: mirror(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" })}, "service account"},
		{"create a mirror pod owned by another node", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: pods, Object: mirror(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n2", UID: "u"}}
		})}, "its own Node"},
		{"update status of its pod", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: pods, Subresource: "status", Object: bound("n1"), Old: bound("n1")}, ""},
		{"update status of another node's pod", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: pods, Subresource: "status", Object: bound("n2"), Old: bound("n2")}, `bound to "n2"`},
		{"update a pod's spec", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: pods, Object: bound("n1"), Old: bound("n1")}, "may not update pods"},
		{"delete its pod", apiserver.AdmissionAttributes{Op: apiserver.OpDelete, Resource: pods, Old: bound("n1")}, ""},
		{"evict another node's pod", apiserver.AdmissionAttributes{Op: apiserver.OpDelete, Resource: pods, Subresource: "eviction", Old: bound("n2")}, `bound to "n2"`},
		{"write its lease", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: leases, Object: lease("kube-node-lease", "n1"), Old: lease("kube-node-lease", "n1")}, ""},
		{"create another node's lease", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: leases, Object: lease("kube-node-lease", "n2")}, "only write its own Lease"},
		{"write a lease elsewhere", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: leases, Object: lease("kube-system", "n1")}, "only write its own Lease"},
		{"administrators are not limited", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: nodes, Object: node("n2", map[string]string{"node-restriction.kubernetes.io/x": "y"}), Old: node("n2", nil)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.a.User == nil {
				tt.a.User = n1
			}
			if strings.HasPrefix(tt.name, "administrators") {
				tt.a.User = admin
			}
			err := NodeRestriction{}.Admit(context.Background(), tt.a)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Admit = %v, want allowed", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Admit = %v, want 403 containing %q", err, tt.wantErr)
			}
		})
	}
}
