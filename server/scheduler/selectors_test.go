package scheduler

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestSpreadSelectors_ServicesAndTheOwningReplicaSetSelectThePodsGroup(t *testing.T) {
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	rss := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	add := func(i cache.Indexer, obj any) {
		if err := i.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	add(svcs, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}}})
	add(svcs, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}, Spec: v1.ServiceSpec{Selector: map[string]string{"app": "db"}}})
	add(rss, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-7d9", Namespace: "default"}, Spec: appsv1.ReplicaSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "pod-template-hash": "7d9"}}}})
	s := &spreadSelectors{services: corelisters.NewServiceLister(svcs), replicaSets: appslisters.NewReplicaSetLister(rss)}
	yes := true
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-7d9-x", Namespace: "default", Labels: map[string]string{"app": "web", "pod-template-hash": "7d9"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9", Controller: &yes}}}}
	sel := s.selector(pod)
	tests := []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"app": "web", "pod-template-hash": "7d9"}, true},
		{map[string]string{"app": "web", "pod-template-hash": "old"}, false},
		{map[string]string{"app": "db"}, false},
	}
	for _, tt := range tests {
		if got := sel.Matches(labels.Set(tt.labels)); got != tt.want {
			t.Errorf("selector %q matches %v = %v, want %v", sel, tt.labels, got, tt.want)
		}
	}
	lonely := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lonely", Namespace: "default", Labels: map[string]string{"app": "batch"}}}
	if sel := s.selector(lonely); !sel.Empty() {
		t.Errorf("a pod nothing selects got selector %q, want empty", sel)
	}
}
