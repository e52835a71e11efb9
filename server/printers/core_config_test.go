package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCoreConfigKindsCells(t *testing.T) {
	tests := []struct {
		name   string
		kind   string
		header string
		obj    runtime.Object
		want   []interface{}
	}{
		{"configmap counts data and binary data", "ConfigMap", "Name;Data;Age",
			&corev1.ConfigMap{ObjectMeta: objMeta("cfg", 45*time.Second), Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"c": {1}}},
			[]interface{}{"cfg", int64(3), "45s"}},
		{"empty configmap", "ConfigMap", "Name;Data;Age",
			&corev1.ConfigMap{ObjectMeta: objMeta("kube-root-ca.crt", 2*time.Hour)},
			[]interface{}{"kube-root-ca.crt", int64(0), "120m"}},
		{"secret counts data keys once with string data", "Secret", "Name;Type;Data;Age",
			&corev1.Secret{ObjectMeta: objMeta("tls", 3*24*time.Hour), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}, StringData: map[string]string{"tls.key": "x", "ca.crt": "y"}},
			[]interface{}{"tls", "kubernetes.io/tls", int64(3), "3d"}},
		{"service account counts secrets", "ServiceAccount", "Name;Secrets;Age",
			&corev1.ServiceAccount{ObjectMeta: objMeta("default", time.Hour), Secrets: []corev1.ObjectReference{{Name: "a"}}},
			[]interface{}{"default", int64(1), "60m"}},
		{"pod template", "PodTemplate", "Name;Containers;Images;Pod Labels",
			&corev1.PodTemplate{ObjectMeta: objMeta("tmpl", time.Hour), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}, {Name: "log", Image: "busybox"}}},
			}},
			[]interface{}{"tmpl", "web,log", "nginx:1.27,busybox", "app=web"}},
		{"replication controller", "ReplicationController", "Name;Desired;Current;Ready;Age;*Containers;*Images;*Selector",
			&corev1.ReplicationController{ObjectMeta: objMeta("rc", time.Hour),
				Spec: corev1.ReplicationControllerSpec{Replicas: ptr(int32(3)), Selector: map[string]string{"app": "web"}, Template: &corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
				}},
				Status: corev1.ReplicationControllerStatus{Replicas: 3, ReadyReplicas: 2}},
			[]interface{}{"rc", int64(3), int64(3), int64(2), "60m", "web", "nginx", "app=web"}},
		{"replication controller without template", "ReplicationController", "Name;Desired;Current;Ready;Age;*Containers;*Images;*Selector",
			&corev1.ReplicationController{ObjectMeta: objMeta("rc", time.Hour)},
			[]interface{}{"rc", int64(0), int64(0), int64(0), "60m", "", "", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gk := schema.GroupKind{Kind: tt.kind}
			p, _ := For(gk)
			if got := header(p); got != tt.header {
				t.Errorf("header %q, want %q", got, tt.header)
			}
			assertCells(t, gk, tt.obj, tt.want)
		})
	}
}

func TestResourceQuotaSplitsRequestsAndLimits(t *testing.T) {
	q := &corev1.ResourceQuota{
		ObjectMeta: objMeta("quota", time.Hour),
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{
				"pods":            resource.MustParse("10"),
				"requests.cpu":    resource.MustParse("2"),
				"limits.memory":   resource.MustParse("4Gi"),
				"limits.cpu":      resource.MustParse("4"),
				"requests.memory": resource.MustParse("1Gi"),
			},
			Used: corev1.ResourceList{
				"pods":         resource.MustParse("3"),
				"requests.cpu": resource.MustParse("500m"),
				"limits.cpu":   resource.MustParse("1"),
			},
		},
	}
	gk := schema.GroupKind{Kind: "ResourceQuota"}
	p, _ := For(gk)
	if got := header(p); got != "Name;Request;Limit;Age" {
		t.Errorf("header %q", got)
	}
	assertCells(t, gk, q, []interface{}{
		"quota",
		"pods: 3/10, requests.cpu: 500m/2, requests.memory: 0/1Gi",
		"limits.cpu: 1/4, limits.memory: 0/4Gi",
		"60m",
	})
}
