package server

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"

	"skiff/server/storage"
)

// nodeGraph answers the node authorizer from the watch cache: which pods
// are bound to a node.
type nodeGraph struct{ l *objectLookups }

// PodsOnNode implements node.Graph.
func (g nodeGraph) PodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error) {
	res := g.l.resource("", "pods")
	if res == nil {
		return nil, nil
	}
	entries, _, err := g.l.st.Cache().List(res, storage.Predicate{Field: fields.OneTermEqualSelector("spec.nodeName", node)})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(entries))
	for _, e := range entries {
		if p, ok := e.Obj.(*corev1.Pod); ok && p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

// Pod implements node.Graph.
func (g nodeGraph) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return get[corev1.Pod](g.l, "", "pods", namespace, name), nil
}

// Sync implements node.Graph.
func (g nodeGraph) Sync(ctx context.Context) error { return g.l.st.Cache().WaitCurrent(ctx) }
