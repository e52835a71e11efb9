package ownerref

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestResolve_OnlyTheSameLiveOwnerOfTheKind(t *testing.T) {
	kind := appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	live := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-1"}}
	get := func(name string) (*appsv1.ReplicaSet, error) {
		if name == live.Name {
			return live, nil
		}
		return nil, errors.New("not found")
	}
	ref := func(apiVersion, k, name string, uid types.UID) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: apiVersion, Kind: k, Name: name, UID: uid}
	}
	for _, tc := range []struct {
		name string
		ref  *metav1.OwnerReference
		want bool
	}{
		{"same owner", ref("apps/v1", "ReplicaSet", "web", "uid-1"), true},
		{"no reference", nil, false},
		{"other kind", ref("apps/v1", "Deployment", "web", "uid-1"), false},
		{"other group version", ref("extensions/v1beta1", "ReplicaSet", "web", "uid-1"), false},
		{"re-created under the name", ref("apps/v1", "ReplicaSet", "web", "uid-0"), false},
		{"gone", ref("apps/v1", "ReplicaSet", "api", "uid-2"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Resolve(tc.ref, kind, get)
			if ok != tc.want || (ok && got != live) || (!ok && got != nil) {
				t.Errorf("Resolve = %v, %v; want found=%v", got, ok, tc.want)
			}
		})
	}
}

func TestSelecting_EmptyOrInvalidSelectorsNeverMatch(t *testing.T) {
	sets := []*appsv1.DaemonSet{
		{ObjectMeta: metav1.ObjectMeta{Name: "match"}, Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nil"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "invalid"}, Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}}},
	}
	got := Selecting(sets, func(ds *appsv1.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector }, map[string]string{"app": "a", "tier": "x"})
	if len(got) != 1 || got[0].Name != "match" {
		names := []string{}
		for _, ds := range got {
			names = append(names, ds.Name)
		}
		t.Errorf("Selecting = %v, want [match]", names)
	}
}
