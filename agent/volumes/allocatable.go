package volumes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// allocatable returns a function reading the node's allocatable at most
// once, on first use: downwardAPI resourceFieldRef limits.* of a container
// without that limit report it, as upstream. Without a Client or NodeName
// the list is empty (an unset limit then reads "0").
func (m *Manager) allocatable(ctx context.Context) func() (corev1.ResourceList, error) {
	var (
		done  bool
		alloc corev1.ResourceList
		err   error
	)
	return func() (corev1.ResourceList, error) {
		if done || m.cfg.Client == nil || m.cfg.NodeName == "" {
			return alloc, err
		}
		done = true
		var n *corev1.Node
		if n, err = m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{}); err != nil {
			err = fmt.Errorf("failed to find node object %s for the default limits: %w", m.cfg.NodeName, err)
			return nil, err
		}
		alloc = n.Status.Allocatable
		return alloc, nil
	}
}
