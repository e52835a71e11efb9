package endpointslice

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// errStale: the informer has not yet seen one of the controller's own
// writes, so the cache cannot be planned from.
var errStale = errors.New("endpoint slice cache is behind this controller's writes")

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Its slices carry an owner reference; the garbage collector
		// removes them.
		c.tracker.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || len(svc.Spec.Selector) == 0 {
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	sel := labels.SelectorFromValidatedSet(labels.Set{discovery.LabelServiceName: name, discovery.LabelManagedBy: ControllerName})
	cached, err := c.slices.EndpointSlices(ns).List(sel)
	if err != nil {
		return err
	}
	existing := cached[:0:0]
	for _, s := range cached {
		// A slice being deleted is on its way out; planning around it
		// would only stall on it.
		if s.DeletionTimestamp == nil {
			existing = append(existing, s)
		}
	}
	if c.tracker.stale(key, existing) {
		return errStale
	}
	p := reconcile(svc, existing, desiredGroups(svc, pods, c.zoneOf), c.cfg.MaxEndpointsPerSlice)
	if p.empty() {
		return nil
	}
	err = c.apply(ctx, key, p)
	// A conflict is a race with another writer, retried at once; only real
	// failures are worth telling the service's owner about.
	if err != nil && !apierrors.IsConflict(err) {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s/%s: %v", ns, name, err)
	}
	return err
}

// apply writes a plan: creates first and deletes last, so that during the
// change consumers see endpoints twice rather than not at all.
func (c *controller) apply(ctx context.Context, key string, p plan) error {
	var errs []error
	for _, s := range p.create {
		got, err := c.cfg.Client.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			// A namespace being deleted refuses new objects; nothing to
			// retry there.
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil
			}
			errs = append(errs, fmt.Errorf("create endpoint slice: %w", err))
			continue
		}
		c.tracker.recordWrite(key, got)
	}
	for _, s := range p.update {
		got, err := c.cfg.Client.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("update endpoint slice %s: %w", s.Name, err))
			continue
		}
		c.tracker.recordWrite(key, got)
	}
	for _, s := range p.delete {
		// Recorded first: the deletion may come back through the informer
		// before the call returns.
		c.tracker.recordDelete(key, s)
		err := c.cfg.Client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			c.tracker.ownDeletion(key, s)
			errs = append(errs, fmt.Errorf("delete endpoint slice %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}
