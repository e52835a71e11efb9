package endpointslicemirroring

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// errStale: the slice cache has not yet seen this controller's last
// writes; acting on it would make duplicates or undo them. Retried
// quietly.
var errStale = errors.New("endpointslice cache is behind this controller's writes")

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discovery.LabelServiceName: name, discovery.LabelManagedBy: ControllerName}))
	if err != nil {
		return err
	}
	if !c.writes.seen(key, existing) {
		return errStale
	}
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return c.deleteAll(ctx, key, existing)
	}
	if err != nil {
		return err
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) || err == nil && svc.Spec.Selector != nil || !shouldMirror(ep) {
		return c.deleteAll(ctx, key, existing)
	}
	if err != nil {
		return err
	}
	groups, skipped := desired(ep, c.cfg.MaxEndpointsPerSubset)
	if skipped > 0 {
		c.cfg.Recorder.Eventf(ep, corev1.EventTypeWarning, "AddressesSkipped",
			"%d addresses were not mirrored: at most %d per subset are, and only IP addresses", skipped, c.cfg.MaxEndpointsPerSubset)
	}
	return c.reconcile(ctx, key, ep, groups, existing)
}

// reconcile makes the mirrored slices those of groups: per group, slices
// that already exist are reused in name order (updated only when they
// differ), missing ones are created and extra ones deleted.
func (c *controller) reconcile(ctx context.Context, key string, ep *corev1.Endpoints, groups []*group, existing []*discovery.EndpointSlice) error {
	byGroup := map[string][]*discovery.EndpointSlice{}
	for _, s := range existing {
		k := string(s.AddressType) + "/" + portsKey(s.Ports)
		byGroup[k] = append(byGroup[k], s)
	}
	for _, list := range byGroup {
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	}
	var errs []error
	for _, g := range groups {
		have := byGroup[g.key]
		delete(byGroup, g.key)
		for i, eps := range g.chunks(c.cfg.MaxEndpointsPerSubset) {
			want := newSlice(ep, g, eps)
			if i < len(have) {
				errs = append(errs, c.update(ctx, key, have[i], want))
			} else {
				errs = append(errs, c.create(ctx, key, want))
			}
		}
		if n := len(g.chunks(c.cfg.MaxEndpointsPerSubset)); n < len(have) {
			errs = append(errs, c.deleteAll(ctx, key, have[n:]))
		}
	}
	for _, rest := range byGroup {
		errs = append(errs, c.deleteAll(ctx, key, rest))
	}
	return errors.Join(errs...)
}

// newSlice is a mirrored slice of ep (without a name: made from the
// Endpoints' name). Labels and annotations are the Endpoints' own, but for
// those that only make sense on it.
func newSlice(ep *corev1.Endpoints, g *group, eps []discovery.Endpoint) *discovery.EndpointSlice {
	l := maps.Clone(ep.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[discovery.LabelServiceName] = ep.Name
	l[discovery.LabelManagedBy] = ControllerName
	a := map[string]string{}
	for k, v := range ep.Annotations {
		if k != corev1.EndpointsLastChangeTriggerTime && k != corev1.LastAppliedConfigAnnotation {
			a[k] = v
		}
	}
	yes := true
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ep.Name + "-", Namespace: ep.Namespace, Labels: l, Annotations: a,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Endpoints", Name: ep.Name, UID: ep.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		AddressType: g.addressType,
		Ports:       g.ports,
		Endpoints:   append([]discovery.Endpoint{}, eps...),
	}
}

func (c *controller) create(ctx context.Context, key string, want *discovery.EndpointSlice) error {
	got, err := c.cfg.Client.DiscoveryV1().EndpointSlices(want.Namespace).Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		return fmt.Errorf("create endpointslice: %w", err)
	}
	c.writes.wrote(key, got)
	return nil
}

func (c *controller) update(ctx context.Context, key string, cur, want *discovery.EndpointSlice) error {
	if cur.AddressType == want.AddressType && maps.Equal(cur.Labels, want.Labels) && maps.Equal(cur.Annotations, want.Annotations) &&
		apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) && apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) &&
		apiequality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences) {
		return nil
	}
	next := cur.DeepCopy()
	next.Labels, next.Annotations, next.OwnerReferences = want.Labels, want.Annotations, want.OwnerReferences
	next.Ports, next.Endpoints = want.Ports, want.Endpoints
	got, err := c.cfg.Client.DiscoveryV1().EndpointSlices(cur.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	if err != nil {
		return fmt.Errorf("update endpointslice: %w", err)
	}
	c.writes.wrote(key, got)
	return nil
}

func (c *controller) deleteAll(ctx context.Context, key string, slices []*discovery.EndpointSlice) error {
	var errs []error
	for _, s := range slices {
		uid := s.UID
		err := c.cfg.Client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete endpointslice %s: %w", s.Name, err))
			continue
		}
		c.writes.deleted(key, s)
	}
	return errors.Join(errs...)
}

// writeTracker remembers, per Endpoints key, the slices this controller
// last wrote (name to resourceVersion) and deleted, so that a sync on a
// cache that has not caught up waits instead of acting twice.
type writeTracker struct {
	mu      sync.Mutex
	written map[string]map[string]string
	gone    map[string]map[types.UID]bool
}

func newWriteTracker() *writeTracker {
	return &writeTracker{written: map[string]map[string]string{}, gone: map[string]map[types.UID]bool{}}
}

func (w *writeTracker) wrote(key string, s *discovery.EndpointSlice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written[key] == nil {
		w.written[key] = map[string]string{}
	}
	w.written[key][s.Name] = s.ResourceVersion
}

func (w *writeTracker) deleted(key string, s *discovery.EndpointSlice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.written[key], s.Name)
	if w.gone[key] == nil {
		w.gone[key] = map[types.UID]bool{}
	}
	w.gone[key][s.UID] = true
}

// forget drops what is tracked of a slice that is gone from the cache.
func (w *writeTracker) forget(key string, s *discovery.EndpointSlice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.written[key], s.Name)
	delete(w.gone[key], s.UID)
}

// seen reports whether the cache's slices of key hold every write the
// controller made, and none it deleted; once they do, it forgets them.
func (w *writeTracker) seen(key string, cached []*discovery.EndpointSlice) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rvs := map[string]string{}
	for _, s := range cached {
		if w.gone[key][s.UID] {
			return false
		}
		rvs[s.Name] = s.ResourceVersion
	}
	for name, rv := range w.written[key] {
		got, ok := rvs[name]
		if !ok || newer(rv, got) {
			return false
		}
	}
	delete(w.written, key)
	delete(w.gone, key)
	return true
}

// newer reports whether resourceVersion a is after b (both are store
// revisions: integers).
func newer(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}
