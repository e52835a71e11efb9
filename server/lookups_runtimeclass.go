package server

import (
	"context"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// RuntimeClass implements admission.RuntimeClassGetter: the watch cache
// first, the store on a miss (a class created a moment ago may not have
// reached the cache), as upstream's plugin falls back to a live read.
func (l *objectLookups) RuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	if rc := get[nodev1.RuntimeClass](l, "node.k8s.io", "runtimeclasses", "", name); rc != nil {
		return rc, nil
	}
	res := l.resource("node.k8s.io", "runtimeclasses")
	if res == nil {
		return nil, nil
	}
	e, err := l.st.Get(ctx, res, "", name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rc, _ := e.Obj.(*nodev1.RuntimeClass)
	return rc, nil
}
