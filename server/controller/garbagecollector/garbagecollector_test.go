package garbagecollector

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

const ns = "default"

func ref(apiVersion, kind, name string, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name), BlockOwnerDeletion: &block}
}

func rsRef(name string) metav1.OwnerReference { return ref("apps/v1", "ReplicaSet", name, true) }

func ownerUIDs(o *metav1.PartialObjectMetadata) []types.UID {
	var out []types.UID
	for _, r := range o.OwnerReferences {
		out = append(out, r.UID)
	}
	return out
}

// A ReplicaSet deleted in the background takes its pods along; a pod with
// another live owner only loses the reference to it.
func TestBackgroundDeletion(t *testing.T) {
	s := newFakeServer(t,
		obj("apps/v1", "ReplicaSet", ns, "rs1"),
		obj("apps/v1", "ReplicaSet", ns, "rs2"),
		obj("v1", "Pod", ns, "only-rs1", rsRef("rs1")),
		obj("v1", "Pod", ns, "both", rsRef("rs1"), rsRef("rs2")),
		obj("v1", "Pod", ns, "only-rs2", rsRef("rs2")),
	)
	s.start()
	// The API server's part of a background delete: the owner just goes.
	if err := s.client.Tracker().Delete(rsGVR, ns, "rs1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod only-rs1 deleted", func() bool { return s.get(podsGVR, ns, "only-rs1") == nil })
	eventually(t, "pod both to lose its reference to rs1", func() bool {
		p := s.get(podsGVR, ns, "both")
		return p != nil && slices.Equal(ownerUIDs(p), []types.UID{"rs2"})
	})
	if got := s.deletePolicies(podsGVR, "only-rs1"); !slices.Equal(got, []metav1.DeletionPropagation{metav1.DeletePropagationBackground}) {
		t.Errorf("only-rs1 deleted with %v, want [Background]", got)
	}
	if len(s.actions("delete", podsGVR, "both")) != 0 || len(s.actions("delete", podsGVR, "only-rs2")) != 0 {
		t.Error("a pod with a live owner was deleted")
	}
	// Events are nobody's dependents and too many to watch; token reviews
	// cannot be listed.
	if s.called("list", schema.GroupVersionResource{Version: "v1", Resource: "events"}) || s.called("list", schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews"}) {
		t.Error("events or tokenreviews were listed")
	}
}

// An owner with the same name but another UID is another object: the
// referenced one is gone.
func TestOwnerUIDMismatchIsAbsent(t *testing.T) {
	newer := obj("apps/v1", "ReplicaSet", ns, "rs")
	newer.UID = "rs-recreated"
	s := newFakeServer(t, newer, obj("v1", "Pod", ns, "p", rsRef("rs"))) // references UID "rs"
	s.start()
	eventually(t, "pod p deleted", func() bool { return s.get(podsGVR, ns, "p") == nil })
	if s.get(rsGVR, ns, "rs") == nil {
		t.Error("the new ReplicaSet was deleted")
	}
}

// An owner the informers have not delivered (yet) exists for the
// collector as soon as a live GET finds it; its dependents stay. Once it
// is really gone, the dependents go, even if no informer ever saw it.
func TestOwnerNotYetInCacheIsVerifiedLive(t *testing.T) {
	s := newFakeServer(t,
		obj("apps/v1", "ReplicaSet", ns, "hidden"),
		obj("v1", "Pod", ns, "child-of-hidden", rsRef("hidden")),
		obj("v1", "Pod", ns, "child-of-nobody", rsRef("nobody")),
	)
	s.hide("hidden", true)
	s.start()
	// The check of "nobody" and two checks of "hidden" (the second after
	// the first was decided) have happened...
	eventually(t, "pod child-of-nobody deleted", func() bool { return s.get(podsGVR, ns, "child-of-nobody") == nil })
	eventually(t, "two live lookups of the hidden owner", func() bool { return len(s.actions("get", rsGVR, "hidden")) >= 2 })
	// ...and the hidden owner's dependent is still there.
	if s.get(podsGVR, ns, "child-of-hidden") == nil || len(s.actions("delete", podsGVR, "child-of-hidden")) != 0 {
		t.Fatal("a dependent was deleted although its owner exists")
	}
	if err := s.client.Tracker().Delete(rsGVR, ns, "hidden"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod child-of-hidden deleted after its owner went", func() bool { return s.get(podsGVR, ns, "child-of-hidden") == nil })
}

// Foreground: the Deployment waits for its ReplicaSet, deleted in the
// foreground because it has pods, which waits for its pod.
func TestForegroundDeletion(t *testing.T) {
	s := newFakeServer(t,
		obj("apps/v1", "Deployment", ns, "d"),
		obj("apps/v1", "ReplicaSet", ns, "rs", ref("apps/v1", "Deployment", "d", true)),
		obj("v1", "Pod", ns, "p", rsRef("rs")),
		obj("v1", "Pod", ns, "other"),
	)
	s.start()
	fg := metav1.DeletePropagationForeground
	if err := s.client.Resource(deployGVR).Namespace(ns).Delete(context.Background(), "d", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	if d := s.get(deployGVR, ns, "d"); d == nil || d.DeletionTimestamp == nil {
		t.Fatal("the fake did not keep the deployment for its finalizer")
	}
	eventually(t, "the deployment deleted", func() bool { return s.get(deployGVR, ns, "d") == nil })
	if s.get(rsGVR, ns, "rs") != nil || s.get(podsGVR, ns, "p") != nil {
		t.Error("the deployment went before its dependents")
	}
	if got := s.deletePolicies(rsGVR, "rs"); !slices.Equal(got, []metav1.DeletionPropagation{fg}) {
		t.Errorf("replica set deleted with %v, want [Foreground]", got)
	}
	if got := s.deletePolicies(podsGVR, "p"); !slices.Equal(got, []metav1.DeletionPropagation{metav1.DeletePropagationBackground}) {
		t.Errorf("pod deleted with %v, want [Background]", got)
	}
	if s.get(podsGVR, ns, "other") == nil {
		t.Error("an unrelated pod was deleted")
	}
}

// Orphan: the dependents lose their references, then the owner goes.
func TestOrphanDeletion(t *testing.T) {
	s := newFakeServer(t,
		obj("apps/v1", "ReplicaSet", ns, "rs"),
		obj("apps/v1", "ReplicaSet", ns, "keeper"),
		obj("v1", "Pod", ns, "p1", rsRef("rs")),
		obj("v1", "Pod", ns, "p2", rsRef("rs")),
		obj("v1", "Pod", ns, "shared", rsRef("rs"), rsRef("keeper")),
	)
	s.start()
	orphan := metav1.DeletePropagationOrphan
	if err := s.client.Resource(rsGVR).Namespace(ns).Delete(context.Background(), "rs", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replica set deleted", func() bool { return s.get(rsGVR, ns, "rs") == nil })
	for name, want := range map[string][]types.UID{"p1": nil, "p2": nil, "shared": {"keeper"}} {
		p := s.get(podsGVR, ns, name)
		if p == nil {
			t.Errorf("pod %s was deleted", name)
		} else if !slices.Equal(ownerUIDs(p), want) {
			t.Errorf("pod %s owners %v, want %v", name, ownerUIDs(p), want)
		}
	}
	// Give a wrong deletion of the now unowned pods a chance to show.
	time.Sleep(200 * time.Millisecond)
	for _, name := range []string{"p1", "p2", "shared"} {
		if len(s.actions("delete", podsGVR, name)) != 0 {
			t.Errorf("orphaned pod %s was deleted", name)
		}
	}
}

// A cluster-scoped object cannot have a namespaced owner: it is left
// alone, not deleted because the lookup finds nothing.
func TestClusterScopedWithNamespacedOwnerIsLeftAlone(t *testing.T) {
	s := newFakeServer(t,
		obj("v1", "Node", "", "n", rsRef("rs")),
		obj("v1", "Pod", ns, "canary", rsRef("gone")),
	)
	s.start()
	eventually(t, "the canary pod deleted", func() bool { return s.get(podsGVR, ns, "canary") == nil })
	time.Sleep(100 * time.Millisecond)
	if s.get(nodesGVR, "", "n") == nil {
		t.Error("the node was deleted")
	}
}

// Resources added to discovery later (CRDs) are collected too.
func TestNewResourcesArePickedUp(t *testing.T) {
	s := newFakeServer(t)
	s.start()
	s.disc.addResources(&metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		apiResource("widgets", "Widget", true, allVerbs...),
	}})
	s.create(obj("example.com/v1", "Widget", ns, "parent"))
	s.create(obj("example.com/v1", "Widget", ns, "child", ref("example.com/v1", "Widget", "parent", false)))
	eventually(t, "widgets watched", func() bool { return s.called("watch", widgetsGVR) })
	if err := s.client.Tracker().Delete(widgetsGVR, ns, "parent"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child widget deleted", func() bool { return s.get(widgetsGVR, ns, "child") == nil })
}

// A resync (same resourceVersion) re-examines owners still waiting for
// the collector; other resyncs and real updates queue nothing here.
func TestResyncRequeuesWaitingOwners(t *testing.T) {
	c := &collector{
		toDelete: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[item]()),
		toOrphan: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[objectRef]()),
	}
	defer c.toDelete.ShutDown()
	defer c.toOrphan.ShutDown()
	r := resource{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}}
	now := metav1.Now()
	mk := func(name, rv string, fin ...string) *metav1.PartialObjectMetadata {
		o := obj("apps/v1", "ReplicaSet", ns, name)
		o.ResourceVersion, o.Finalizers = rv, fin
		if len(fin) > 0 {
			o.DeletionTimestamp = &now
		}
		return o
	}
	c.resynced(r, mk("fg", "1", metav1.FinalizerDeleteDependents), mk("fg", "1", metav1.FinalizerDeleteDependents))
	c.resynced(r, mk("or", "1", metav1.FinalizerOrphanDependents), mk("or", "1", metav1.FinalizerOrphanDependents))
	c.resynced(r, mk("plain", "1"), mk("plain", "1"))
	c.resynced(r, mk("changed", "1", metav1.FinalizerOrphanDependents), mk("changed", "2", metav1.FinalizerOrphanDependents))
	if c.toDelete.Len() != 1 || c.toOrphan.Len() != 1 {
		t.Fatalf("queued %d to delete, %d to orphan; want 1 and 1", c.toDelete.Len(), c.toOrphan.Len())
	}
	if it, _ := c.toDelete.Get(); it.ref.Name != "fg" {
		t.Errorf("queued %v to delete", it.ref)
	}
	if ref, _ := c.toOrphan.Get(); ref.Name != "or" {
		t.Errorf("queued %v to orphan", ref)
	}
}
