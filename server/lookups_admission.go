package server

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/admission/podsecurity"
	"skiff/server/apiserver"
)

// ListLimitRanges is the LimitRanger's view of a namespace's LimitRanges.
// An empty answer waits for the cache to catch up once, so a LimitRange
// created a moment before a pod applies to it (upstream falls back to a
// live list the same way).
func (l *objectLookups) ListLimitRanges(ctx context.Context, namespace string) ([]*corev1.LimitRange, error) {
	out, err := list[corev1.LimitRange](l, "", "limitranges", namespace)
	if err != nil || len(out) > 0 {
		return out, err
	}
	if err := l.st.Cache().WaitCurrent(ctx); err != nil {
		return nil, err
	}
	return list[corev1.LimitRange](l, "", "limitranges", namespace)
}

// Namespace reads a namespace from the cache, confirming a miss in the
// store: Pod Security applies the labels of a namespace created a moment
// ago.
func (l *objectLookups) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if ns := get[corev1.Namespace](l, "", "namespaces", "", name); ns != nil {
		return ns, nil
	}
	res := l.resource("", "namespaces")
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
	ns, _ := e.Obj.(*corev1.Namespace)
	return ns, nil
}

// ListPods lists a namespace's pods from the cache.
func (l *objectLookups) ListPods(_ context.Context, namespace string) ([]*corev1.Pod, error) {
	return list[corev1.Pod](l, "", "pods", namespace)
}

// admissionWarner hands Pod Security the request's warnings.
func admissionWarner(ctx context.Context) podsecurity.Warner {
	if w := apiserver.WarnerFrom(ctx); w != nil {
		return w
	}
	return nil
}
