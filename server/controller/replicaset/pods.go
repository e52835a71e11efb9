package replicaset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Event reasons, as upstream's pod control records them.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
)

// claimPods sorts the namespace's active pods into those the ReplicaSet
// controls: pods it owns and still selects, plus orphans it selects, which
// it adopts. Pods it owns that no longer match are released so that
// someone else may take them. Errors of individual pods are joined; the
// claimed pods are returned regardless.
func (c *controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, sel labels.Selector, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	var claimed []*corev1.Pod
	var errs []error
	var adoptable *bool
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		matches := sel.Matches(labels.Set(pod.Labels))
		switch {
		case ref != nil && ref.UID != rs.UID:
			continue
		case ref != nil && matches:
			claimed = append(claimed, pod)
		case ref != nil:
			// A ReplicaSet being deleted leaves its pods to the garbage
			// collector rather than releasing them.
			if rs.DeletionTimestamp != nil {
				continue
			}
			if err := c.release(ctx, rs, pod); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		case !matches || rs.DeletionTimestamp != nil || pod.DeletionTimestamp != nil || pod.Namespace != rs.Namespace:
			continue
		default:
			if adoptable == nil {
				ok, err := c.canAdopt(ctx, rs)
				if err != nil {
					errs = append(errs, err)
				}
				adoptable = &ok
			}
			if !*adoptable {
				continue
			}
			if err := c.adopt(ctx, rs, pod); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
				continue
			}
			claimed = append(claimed, pod)
		}
	}
	return claimed, errors.Join(errs...)
}

// canAdopt rechecks, against the API server rather than the cache, that
// the ReplicaSet still exists and is not being deleted: adopting for a
// ReplicaSet that is going would hand the pod to the garbage collector.
func (c *controller) canAdopt(ctx context.Context, rs *appsv1.ReplicaSet) (bool, error) {
	fresh, err := c.kind.fetch(ctx, rs.Namespace, rs.Name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("recheck %s %s/%s before adoption: %w", c.kind.noun(), rs.Namespace, rs.Name, err)
	}
	return fresh.UID == rs.UID && fresh.DeletionTimestamp == nil, nil
}

type ownerRefPatch struct {
	Metadata struct {
		OwnerReferences []any     `json:"ownerReferences"`
		UID             types.UID `json:"uid"`
	} `json:"metadata"`
}

// adopt adds the ReplicaSet as controller of an orphan. The pod's UID in
// the patch makes it fail rather than touch a same-named successor.
func (c *controller) adopt(ctx context.Context, rs *appsv1.ReplicaSet, pod *corev1.Pod) error {
	var p ownerRefPatch
	p.Metadata.OwnerReferences = []any{*metav1.NewControllerRef(rs, c.kind.gvk())}
	p.Metadata.UID = pod.UID
	return c.patchPod(ctx, pod, p)
}

// release removes the ReplicaSet's reference from a pod it no longer
// selects.
func (c *controller) release(ctx context.Context, rs *appsv1.ReplicaSet, pod *corev1.Pod) error {
	var p ownerRefPatch
	p.Metadata.OwnerReferences = []any{map[string]any{"$patch": "delete", "uid": rs.UID}}
	p.Metadata.UID = pod.UID
	return c.patchPod(ctx, pod, p)
}

func (c *controller) patchPod(ctx context.Context, pod *corev1.Pod, p ownerRefPatch) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch owner of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// podFromTemplate is the pod a ReplicaSet creates: its template, named
// after it, controlled by it (as an object of the given kind).
func podFromTemplate(rs *appsv1.ReplicaSet, kind schema.GroupVersionKind) *corev1.Pod {
	t := rs.Spec.Template
	prefix := rs.Name + "-"
	if len(validation.NameIsDNSSubdomain(prefix, true)) != 0 {
		prefix = rs.Name
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    prefix,
			Namespace:       rs.Namespace,
			Labels:          maps.Clone(t.Labels),
			Annotations:     maps.Clone(t.Annotations),
			Finalizers:      append([]string(nil), t.Finalizers...),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, kind)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
}

func (c *controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	pod := podFromTemplate(rs, c.kind.gvk())
	if len(pod.Labels) == 0 {
		// Unlabelled pods could never be counted back.
		return errors.New("unable to create pods, no labels")
	}
	created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			c.recorder.Eventf(c.kind.eventObject(rs), corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		}
		return fmt.Errorf("create pod for %s %s/%s: %w", c.kind.noun(), rs.Namespace, rs.Name, err)
	}
	c.recorder.Eventf(c.kind.eventObject(rs), corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", created.Name)
	return nil
}

func (c *controller) deletePodOf(ctx context.Context, rs *appsv1.ReplicaSet, pod *corev1.Pod) error {
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		c.recorder.Eventf(c.kind.eventObject(rs), corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	c.recorder.Eventf(c.kind.eventObject(rs), corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", pod.Name)
	return nil
}

// slowStartBatch calls fn count times, in batches of 1, 2, 4, ... run in
// parallel, and stops after the first batch with a failure: when creations
// fail (quota, admission), they fail all alike, and one failing call is
// better than hundreds. It returns how many calls succeeded and the first
// error.
func slowStartBatch(count, initial int, fn func() error) (int, error) {
	remaining, successes := count, 0
	for batch := min(remaining, initial); batch > 0; batch = min(2*batch, remaining) {
		errCh := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Go(func() {
				if err := fn(); err != nil {
					errCh <- err
				}
			})
		}
		wg.Wait()
		successes += batch - len(errCh)
		if len(errCh) > 0 {
			return successes, <-errCh
		}
		remaining -= batch
	}
	return successes, nil
}
