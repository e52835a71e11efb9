package storage

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/registry"
)

// flakyRow serves configmaps at a second version through a conversion that
// fails while broken is set, as a custom resource whose conversion webhook
// is down.
func flakyRow(base *registry.Resource, broken *atomic.Bool) *registry.Resource {
	r := *base
	r.Version = "v1flaky"
	r.Convert = &registry.Conversion{
		StorageVersion: "v1",
		NewStored:      func() runtime.Object { return &corev1.ConfigMap{} },
		ToStorage:      func(obj runtime.Object) (runtime.Object, error) { return obj.DeepCopyObject(), nil },
		FromStorage: func(stored runtime.Object) (runtime.Object, error) {
			if broken.Load() {
				return nil, errors.New("conversion webhook down")
			}
			return stored.DeepCopyObject(), nil
		},
	}
	return &r
}

func TestCache_AddResourceAtRunTime_ListsExistingAndFollowsNewObjects(t *testing.T) {
	s, reg := testStorage(t)
	cms := lookup(t, reg, "configmaps")
	createConfigMap(t, s, cms, "before")
	if err := s.Cache().WaitCurrent(deadline(t)); err != nil {
		t.Fatal(err)
	}
	var broken atomic.Bool
	row := flakyRow(cms, &broken)
	if err := reg.Put(row); err != nil {
		t.Fatal(err)
	}
	if err := s.Cache().AddResource(deadline(t), row); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, s, cms, "after")
	waitList(t, s, row, "after", "before") // key order
	s.Cache().RemoveResource(row)
	if _, _, err := s.Cache().List(row, Predicate{}); err == nil {
		t.Fatal("a removed resource is still listed from the cache")
	}
}

func TestCache_UndecodableEvent_RetriedUntilItDecodes(t *testing.T) {
	s, reg := testStorage(t)
	cms := lookup(t, reg, "configmaps")
	var broken atomic.Bool
	row := flakyRow(cms, &broken)
	if err := reg.Put(row); err != nil {
		t.Fatal(err)
	}
	if err := s.Cache().AddResource(deadline(t), row); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, s, cms, "a")
	waitList(t, s, row, "a")
	broken.Store(true)
	createConfigMap(t, s, cms, "b")
	if err := s.Cache().WaitCurrent(deadline(t)); err != nil {
		t.Fatal(err)
	}
	broken.Store(false)
	waitList(t, s, row, "a", "b")
}

// waitList waits until the row's cached list is exactly names.
func waitList(t *testing.T, s *Storage, res *registry.Resource, names ...string) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		entries, _, err := s.Cache().List(res, Predicate{})
		var got []string
		for _, e := range entries {
			got = append(got, e.Obj.(*corev1.ConfigMap).Name)
		}
		if err == nil && equalStrings(got, names) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("cached list = %v (err %v), want %v", got, err, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
