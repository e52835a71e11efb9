// Package ownerref answers the two questions every owning controller asks
// of an object it may own: which live owner its controller reference names,
// and which owners could adopt it when it has none.
package ownerref

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resolve returns the owner ref names, looked up with get, when ref points
// to the given kind and still names the same object: a reference to an
// owner deleted and re-created under its name resolves to nothing.
func Resolve[T metav1.Object](ref *metav1.OwnerReference, kind schema.GroupVersionKind, get func(name string) (T, error)) (T, bool) {
	var none T
	if ref == nil || ref.Kind != kind.Kind || ref.APIVersion != kind.GroupVersion().String() {
		return none, false
	}
	owner, err := get(ref.Name)
	if err != nil || owner.GetUID() != ref.UID {
		return none, false
	}
	return owner, true
}

// Selecting returns the owners whose selector matches lbls. An empty or
// invalid selector matches nothing, so a malformed owner never adopts.
func Selecting[T any](owners []T, selector func(T) *metav1.LabelSelector, lbls map[string]string) []T {
	var out []T
	for _, o := range owners {
		sel, err := metav1.LabelSelectorAsSelector(selector(o))
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(lbls)) {
			continue
		}
		out = append(out, o)
	}
	return out
}
