package garbagecollector

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestDecide(t *testing.T) {
	x, y := ownedBy(rs("a", "x"), true), ownedBy(rs("a", "y"), true)
	two := []metav1.OwnerReference{x, y}
	const (
		S = ownerSolid
		D = ownerDangling
		W = ownerWaiting
	)
	bg, fgp, orph := metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan
	cases := []struct {
		name                 string
		finalizers           []string
		states               []ownerState
		hasDeps, depDeleting bool
		want                 plan
	}{
		{name: "every owner alive: keep", states: []ownerState{S, S}, want: plan{}},
		{name: "every owner gone: delete in the background", states: []ownerState{D, D}, want: plan{remove: true, policy: bg}},
		{name: "one owner alive: drop the dangling reference", states: []ownerState{D, S}, want: plan{removeRefs: []types.UID{"x"}}},
		{name: "one owner alive, one waiting: drop the waiting reference so it is not blocked",
			states: []ownerState{S, W}, want: plan{removeRefs: []types.UID{"y"}}},
		{name: "owner waiting, no dependents of our own: background", states: []ownerState{W, D}, want: plan{remove: true, policy: bg}},
		{name: "owner waiting, dependents of our own: foreground, so the owner waits for them too",
			states: []ownerState{W, D}, hasDeps: true, want: plan{remove: true, policy: fgp}},
		{name: "owner waiting, a dependent deleting in the foreground: unblock first (cycle)",
			states: []ownerState{W, W}, hasDeps: true, depDeleting: true, want: plan{remove: true, policy: fgp, unblock: true}},
		{name: "owners gone, orphan finalizer already there: honor it",
			finalizers: []string{metav1.FinalizerOrphanDependents}, states: []ownerState{D, D}, want: plan{remove: true, policy: orph}},
		{name: "owners gone, foreground finalizer already there: honor it",
			finalizers: []string{metav1.FinalizerDeleteDependents}, states: []ownerState{D, D}, want: plan{remove: true, policy: fgp}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Finalizers: tc.finalizers, OwnerReferences: two}
			got := decide(obj, two, tc.states, tc.hasDeps, tc.depDeleting)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStateOf(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		obj  metav1.Object
		want ownerState
	}{
		{nil, ownerDangling},
		{&metav1.ObjectMeta{}, ownerSolid},
		{&metav1.ObjectMeta{Finalizers: []string{metav1.FinalizerDeleteDependents}}, ownerSolid},
		{&metav1.ObjectMeta{DeletionTimestamp: &now}, ownerSolid},
		{&metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{metav1.FinalizerOrphanDependents}}, ownerSolid},
		{&metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{metav1.FinalizerDeleteDependents}}, ownerWaiting},
	}
	for i, tc := range cases {
		if got := stateOf(tc.obj); got != tc.want {
			t.Errorf("case %d: stateOf = %v, want %v", i, got, tc.want)
		}
	}
}

func TestPatches(t *testing.T) {
	obj := &metav1.ObjectMeta{UID: "u", ResourceVersion: "7"}
	x := ownedBy(rs("a", "x"), true)
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"last reference removed", ownersPatch(obj, withoutOwners([]metav1.OwnerReference{x}, []types.UID{"x"})),
			`{"metadata":{"uid":"u","resourceVersion":"7","ownerReferences":null}}`},
		{"references replaced", ownersPatch(obj, unblocked([]metav1.OwnerReference{x})),
			`{"metadata":{"uid":"u","resourceVersion":"7","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"x","uid":"x","blockOwnerDeletion":false}]}}`},
		{"last finalizer removed", finalizersPatch(obj, nil),
			`{"metadata":{"uid":"u","resourceVersion":"7","finalizers":null}}`},
		{"finalizers replaced", finalizersPatch(obj, []string{"a"}),
			`{"metadata":{"uid":"u","resourceVersion":"7","finalizers":["a"]}}`},
	}
	for _, tc := range cases {
		if string(tc.got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
	if !*x.BlockOwnerDeletion {
		t.Error("unblocked changed its input")
	}
}

func apiResource(name, kind string, namespaced bool, verbs ...string) metav1.APIResource {
	return metav1.APIResource{Name: name, Kind: kind, Namespaced: namespaced, Verbs: verbs}
}

var allVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

func TestBuildMapping(t *testing.T) {
	groups := []*metav1.APIGroup{
		{Name: "", PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "v1", Version: "v1"}, Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "v1", Version: "v1"}}},
		{Name: "apps", PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "apps/v1", Version: "v1"},
			Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apps/v1", Version: "v1"}, {GroupVersion: "apps/v1beta1", Version: "v1beta1"}}},
		{Name: "authentication.k8s.io", PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "authentication.k8s.io/v1", Version: "v1"}},
		{Name: "events.k8s.io", PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "events.k8s.io/v1", Version: "v1"}},
	}
	lists := []*metav1.APIResourceList{
		// The older version first: order in the list must not matter.
		{GroupVersion: "apps/v1beta1", APIResources: []metav1.APIResource{
			apiResource("deployments", "Deployment", true, allVerbs...),
			apiResource("statefulsets", "StatefulSet", true, allVerbs...), // only served here
		}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			apiResource("pods", "Pod", true, allVerbs...),
			apiResource("pods/status", "Pod", true, "get", "patch", "update"),
			apiResource("events", "Event", true, allVerbs...),
			apiResource("nodes", "Node", false, allVerbs...),
			apiResource("bindings", "Binding", true, "create"),
			apiResource("componentstatuses", "ComponentStatus", false, "get", "list"),
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			apiResource("deployments", "Deployment", true, allVerbs...),
			apiResource("deployments/scale", "Scale", true, "get", "patch", "update"),
		}},
		{GroupVersion: "authentication.k8s.io/v1", APIResources: []metav1.APIResource{
			apiResource("tokenreviews", "TokenReview", false, "create"),
		}},
		{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
			apiResource("events", "Event", true, allVerbs...),
		}},
	}
	m, watch := buildMapping(groups, lists)
	var got []string
	for _, r := range watch {
		got = append(got, r.gvr.String())
	}
	slices.Sort(got)
	want := []string{"/v1, Resource=nodes", "/v1, Resource=pods", "apps/v1, Resource=deployments", "apps/v1beta1, Resource=statefulsets"}
	if !slices.Equal(got, want) {
		t.Errorf("watched:\n got %v\nwant %v", got, want)
	}
	lookups := []struct {
		apiVersion, kind string
		want             schema.GroupVersionResource
		namespaced       bool
		err              error
	}{
		{"v1", "Pod", schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true, nil},
		{"v1", "Node", schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, false, nil},
		{"apps/v1beta1", "Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1beta1", Resource: "deployments"}, true, nil},
		// A version no longer served: the preferred one holds the same object.
		{"apps/v1beta2", "Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true, nil},
		{"example.com/v1", "Widget", schema.GroupVersionResource{}, false, errUnknownKind},
		{"v1", "Scale", schema.GroupVersionResource{}, false, errUnknownKind},
	}
	for _, l := range lookups {
		r, err := m.lookup(l.apiVersion, l.kind)
		if !errors.Is(err, l.err) || r.gvr != l.want || r.namespaced != l.namespaced {
			t.Errorf("lookup(%s, %s) = %v, %v, %v", l.apiVersion, l.kind, r.gvr, r.namespaced, err)
		}
	}
	var none *mapping
	if _, err := none.lookup("v1", "Pod"); !errors.Is(err, errUnknownKind) {
		t.Errorf("lookup before discovery: %v", err)
	}
}
