package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// replicaSetsFor returns the ReplicaSets the Deployment controls: those it
// owns and still selects, and orphans it selects, which it adopts. Owned
// ones it no longer selects are released.
func (c *controller) replicaSetsFor(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid selector: %w", d.Namespace, d.Name, err)
	}
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list replicasets: %w", err)
	}
	var claimed []*appsv1.ReplicaSet
	var errs []error
	var adoptable *bool
	for _, rs := range all {
		ref := metav1.GetControllerOfNoCopy(rs)
		matches := sel.Matches(labels.Set(rs.Labels))
		switch {
		case ref != nil && ref.UID != d.UID:
			continue
		case ref != nil && matches:
			claimed = append(claimed, rs)
		case ref != nil:
			if d.DeletionTimestamp != nil {
				continue
			}
			if err := c.patchOwner(ctx, rs, releasePatch(d.UID, rs.UID)); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		case !matches || d.DeletionTimestamp != nil || rs.DeletionTimestamp != nil:
			continue
		default:
			if adoptable == nil {
				ok, err := c.canAdopt(ctx, d)
				if err != nil {
					errs = append(errs, err)
				}
				adoptable = &ok
			}
			if !*adoptable {
				continue
			}
			if err := c.patchOwner(ctx, rs, adoptPatch(d, rs.UID)); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
				continue
			}
			claimed = append(claimed, rs)
		}
	}
	return claimed, errors.Join(errs...)
}

// canAdopt rechecks with the API server that the Deployment is still there
// and not being deleted: the cache may be behind, and a ReplicaSet adopted
// by a dying Deployment would be garbage collected with it.
func (c *controller) canAdopt(ctx context.Context, d *appsv1.Deployment) (bool, error) {
	fresh, err := c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("recheck deployment %s/%s before adoption: %w", d.Namespace, d.Name, err)
	}
	return fresh.UID == d.UID && fresh.DeletionTimestamp == nil, nil
}

// The UID in each patch makes it fail rather than touch a same-named
// successor of the ReplicaSet read from the cache.

func adoptPatch(d *appsv1.Deployment, rsUID types.UID) map[string]any {
	return map[string]any{"metadata": map[string]any{
		"ownerReferences": []any{*metav1.NewControllerRef(d, controllerKind)},
		"uid":             rsUID,
	}}
}

func releasePatch(ownerUID, rsUID types.UID) map[string]any {
	return map[string]any{"metadata": map[string]any{
		"ownerReferences": []any{map[string]any{"$patch": "delete", "uid": ownerUID}},
		"uid":             rsUID,
	}}
}

func (c *controller) patchOwner(ctx context.Context, rs *appsv1.ReplicaSet, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch owner of replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	return nil
}

// podsByReplicaSet groups the Deployment's pods by the ReplicaSet (among
// rss) controlling them; Recreate waits on them to be gone.
func (c *controller) podsByReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (map[types.UID][]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	pods, err := c.podLister.Pods(d.Namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := make(map[types.UID][]*corev1.Pod, len(rss))
	for _, rs := range rss {
		out[rs.UID] = nil
	}
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil {
			continue
		}
		if _, ok := out[ref.UID]; ok {
			out[ref.UID] = append(out[ref.UID], p)
		}
	}
	return out, nil
}
