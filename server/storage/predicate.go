package storage

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"skiff/server/registry"
)

// Predicate selects objects by namespace, labels and fields.
type Predicate struct {
	// Namespace limits a namespaced resource to one namespace ("" = all).
	Namespace string
	Label     labels.Selector // nil = everything
	Field     fields.Selector // nil = everything
}

// Matches reports whether an entry of res is selected.
func (p Predicate) Matches(res *registry.Resource, e *Entry) bool {
	acc, err := meta.Accessor(e.Obj)
	if err != nil {
		return false
	}
	if p.Namespace != "" && res.Namespaced && acc.GetNamespace() != p.Namespace {
		return false
	}
	if p.Label != nil && !p.Label.Empty() && !p.Label.Matches(labels.Set(acc.GetLabels())) {
		return false
	}
	if p.Field != nil && !p.Field.Empty() {
		set := fields.Set{"metadata.name": acc.GetName()}
		if res.Namespaced {
			set["metadata.namespace"] = acc.GetNamespace()
		}
		if res.Fields != nil {
			for k, v := range res.Fields(e.Obj) {
				set[k] = v
			}
		}
		if !p.Field.Matches(set) {
			return false
		}
	}
	return true
}

// Everything reports whether the predicate selects all objects of a scope.
func (p Predicate) Everything() bool {
	return (p.Label == nil || p.Label.Empty()) && (p.Field == nil || p.Field.Empty())
}
