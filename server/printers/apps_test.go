package printers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func webTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "web", Image: "nginx:1.27"},
		{Name: "sidecar", Image: "envoy:v1"},
	}}}
}

func appSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

func TestAppsCells(t *testing.T) {
	tests := []struct {
		name   string
		kind   string
		header string
		obj    runtime.Object
		want   []interface{}
	}{
		{"deployment two of three ready", "Deployment", "Name;Ready;Up-to-date;Available;Age;*Containers;*Images;*Selector",
			&appsv1.Deployment{ObjectMeta: objMeta("web", 7*24*time.Hour),
				Spec:   appsv1.DeploymentSpec{Replicas: ptr(int32(3)), Selector: appSelector(), Template: webTemplate()},
				Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}},
			[]interface{}{"web", "2/3", int64(3), int64(2), "7d", "web,sidecar", "nginx:1.27,envoy:v1", "app=web"}},
		{"deployment with an empty selector prints it blank", "Deployment", "Name;Ready;Up-to-date;Available;Age;*Containers;*Images;*Selector",
			&appsv1.Deployment{ObjectMeta: objMeta("web", time.Hour), Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{}}},
			[]interface{}{"web", "0/0", int64(0), int64(0), "60m", "", "", ""}},
		{"deployment with an invalid selector", "Deployment", "Name;Ready;Up-to-date;Available;Age;*Containers;*Images;*Selector",
			&appsv1.Deployment{ObjectMeta: objMeta("web", time.Hour), Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}},
			[]interface{}{"web", "0/0", int64(0), int64(0), "60m", "", "", "<invalid>"}},
		{"replica set", "ReplicaSet", "Name;Desired;Current;Ready;Age;*Containers;*Images;*Selector",
			&appsv1.ReplicaSet{ObjectMeta: objMeta("web-5d", time.Hour),
				Spec:   appsv1.ReplicaSetSpec{Replicas: ptr(int32(3)), Selector: appSelector(), Template: webTemplate()},
				Status: appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1}},
			[]interface{}{"web-5d", int64(3), int64(3), int64(1), "60m", "web,sidecar", "nginx:1.27,envoy:v1", "app=web"}},
		{"replica set without selector", "ReplicaSet", "Name;Desired;Current;Ready;Age;*Containers;*Images;*Selector",
			&appsv1.ReplicaSet{ObjectMeta: objMeta("rs", time.Hour)},
			[]interface{}{"rs", int64(0), int64(0), int64(0), "60m", "", "", "<none>"}},
		{"stateful set", "StatefulSet", "Name;Ready;Age;*Containers;*Images",
			&appsv1.StatefulSet{ObjectMeta: objMeta("db", time.Hour),
				Spec:   appsv1.StatefulSetSpec{Replicas: ptr(int32(3)), Template: webTemplate()},
				Status: appsv1.StatefulSetStatus{ReadyReplicas: 3}},
			[]interface{}{"db", "3/3", "60m", "web,sidecar", "nginx:1.27,envoy:v1"}},
		{"daemon set", "DaemonSet", "Name;Desired;Current;Ready;Up-to-date;Available;Node Selector;Age;*Containers;*Images;*Selector",
			&appsv1.DaemonSet{ObjectMeta: objMeta("proxy", time.Hour),
				Spec: appsv1.DaemonSetSpec{Selector: appSelector(), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
					Containers:   []corev1.Container{{Name: "proxy", Image: "skiff/proxy"}},
				}}},
				Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}},
			[]interface{}{"proxy", int64(3), int64(3), int64(2), int64(1), int64(2), "kubernetes.io/os=linux", "60m", "proxy", "skiff/proxy", "app=web"}},
		{"daemon set without node selector", "DaemonSet", "Name;Desired;Current;Ready;Up-to-date;Available;Node Selector;Age;*Containers;*Images;*Selector",
			&appsv1.DaemonSet{ObjectMeta: objMeta("ds", time.Hour)},
			[]interface{}{"ds", int64(0), int64(0), int64(0), int64(0), int64(0), "<none>", "60m", "", "", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gk := schema.GroupKind{Group: "apps", Kind: tt.kind}
			p, _ := For(gk)
			if got := header(p); got != tt.header {
				t.Errorf("header %q, want %q", got, tt.header)
			}
			assertCells(t, gk, tt.obj, tt.want)
		})
	}
}

func TestControllerRevisionCells(t *testing.T) {
	owned := func(apiVersion, kind string) metav1.ObjectMeta {
		m := objMeta("web-7c9", time.Hour)
		m.OwnerReferences = []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "not-controller"},
			{APIVersion: apiVersion, Kind: kind, Name: "web", Controller: ptr(true)},
		}
		return m
	}
	tests := []struct {
		name string
		meta metav1.ObjectMeta
		want interface{}
	}{
		{"owned by a daemon set", owned("apps/v1", "DaemonSet"), "daemonset.apps/web"},
		{"owned by a core kind", owned("v1", "Pod"), "pod/web"},
		{"no controller", objMeta("web-7c9", time.Hour), "<none>"},
	}
	gk := schema.GroupKind{Group: "apps", Kind: "ControllerRevision"}
	p, _ := For(gk)
	if got := header(p); got != "Name;Controller;Revision;Age" {
		t.Errorf("header %q", got)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := &appsv1.ControllerRevision{ObjectMeta: tt.meta, Revision: 4}
			assertCells(t, gk, cr, []interface{}{"web-7c9", tt.want, int64(4), "60m"})
		})
	}
	t.Run("unparsable owner api version is an error", func(t *testing.T) {
		cr := &appsv1.ControllerRevision{ObjectMeta: owned("a/b/c", "X")}
		if _, err := Rows(p, []runtime.Object{cr}, testNow); err == nil {
			t.Error("no error")
		}
	})
}
