package endpoints

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// LabelHeadless marks the Endpoints of a service without a cluster IP, so
// that proxies skip them.
const LabelHeadless = "service.kubernetes.io/headless"

// errConflict wraps write races with another writer or with this
// controller's own cache; they are retried without complaint.
var errConflict = errors.New("endpoints changed since read")

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.triggers.forget(key)
		return c.deleteLeftover(ctx, ns, name)
	}
	if err != nil {
		return err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || len(svc.Spec.Selector) == 0 {
		// Endpoints of a service without a selector are managed by hand.
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	subsets, truncated := truncate(desiredSubsets(svc, pods), MaxAddresses)
	trigger, recordTrigger := c.triggers.compute(key, svc, pods)
	wantLabels := endpointsLabels(svc)

	current, err := c.endpoints.Endpoints(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if current != nil && apiequality.Semantic.DeepEqual(current.Subsets, subsets) &&
		maps.Equal(current.Labels, wantLabels) && (current.Annotations[corev1.EndpointsOverCapacity] == "truncated") == truncated {
		recordTrigger()
		return nil
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if current != nil {
		ep = current.DeepCopy()
	}
	ep.Subsets, ep.Labels = subsets, wantLabels
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	setOrDelete(ep.Annotations, corev1.EndpointsLastChangeTriggerTime, !trigger.IsZero(), trigger.UTC().Format(time.RFC3339Nano))
	setOrDelete(ep.Annotations, corev1.EndpointsOverCapacity, truncated, "truncated")
	if current == nil {
		_, err = c.cfg.Client.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{})
	} else {
		_, err = c.cfg.Client.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{})
	}
	switch {
	case err == nil:
		recordTrigger()
		return nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%w: %w", errConflict, err)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil
	case current == nil:
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %s/%s: %v", ns, name, err)
		return fmt.Errorf("create endpoints: %w", err)
	default:
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %s/%s: %v", ns, name, err)
		return fmt.Errorf("update endpoints: %w", err)
	}
}

// deleteLeftover removes the Endpoints of a deleted service: they have no
// owner reference for the garbage collector to follow.
func (c *controller) deleteLeftover(ctx context.Context, ns, name string) error {
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, leader := ep.Annotations[leaderAnnotation]; leader {
		return nil
	}
	err = c.cfg.Client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ep.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete endpoints: %w", err)
	}
	return nil
}

// endpointsLabels are the service's labels, plus the headless marker for
// a service without a virtual IP.
func endpointsLabels(svc *corev1.Service) map[string]string {
	out := maps.Clone(svc.Labels)
	if out == nil {
		out = map[string]string{}
	}
	if hasClusterIP(svc) {
		delete(out, LabelHeadless)
	} else {
		out[LabelHeadless] = ""
	}
	return out
}

func setOrDelete(m map[string]string, k string, set bool, v string) {
	if set {
		m[k] = v
	} else {
		delete(m, k)
	}
}
