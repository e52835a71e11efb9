// Package quota measures what objects use against ResourceQuotas: the
// usage of one object, whether a quota covers it (resources and scopes),
// and a quota's whole status.used from the objects of a namespace. The
// admission check (server/admission/resourcequota) and the quota
// controller both use it, so the two always agree, as upstream's share
// k8s.io/kubernetes/pkg/quota/v1.
package quota

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
)

// Operation is the kind of write being judged.
type Operation string

const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
)

// Evaluator measures quota usage for one group-resource.
type Evaluator interface {
	GroupResource() schema.GroupResource
	// Handles reports whether a write could change usage, so admission
	// must charge it; old is nil on create.
	Handles(op Operation, subresource string, obj, old runtime.Object) bool
	// MatchingResources returns the names in names that this evaluator
	// measures.
	MatchingResources(names []corev1.ResourceName) []corev1.ResourceName
	// MatchesScope reports whether obj is in one scope selector term.
	MatchesScope(sel corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error)
	// Constraints refuses an object that lacks what a quota on required
	// insists on (pods must set cpu and memory when those are quota'd).
	Constraints(required []corev1.ResourceName, obj runtime.Object) error
	// Usage is what obj uses.
	Usage(obj runtime.Object) (corev1.ResourceList, error)
}

// ErrNotServed is what a ListFunc wraps when the server does not serve a
// group-resource named by a quota: nothing of it exists, so it counts for
// nothing rather than failing the whole status.
var ErrNotServed = errors.New("resource not served")

// ListFunc lists the objects of a group-resource in a namespace.
type ListFunc func(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)

// Selectors returns a quota's scopes and scopeSelector as one list of
// selector terms, all of which an object must match.
func Selectors(q *corev1.ResourceQuota) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		out = append(out, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		out = append(out, q.Spec.ScopeSelector.MatchExpressions...)
	}
	return out
}

// Matches reports whether quota q covers obj: q limits something e
// measures (by status.hard, what the quota enforces now) and obj is in
// every one of q's scopes.
func Matches(e Evaluator, q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	if len(e.MatchingResources(Names(q.Status.Hard))) == 0 {
		return false, nil
	}
	return inScopes(e, Selectors(q), obj)
}

func inScopes(e Evaluator, sels []corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	for _, sel := range sels {
		ok, err := e.MatchesScope(sel, obj)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// selectorMatches evaluates one In/NotIn/Exists/DoesNotExist term against
// the scope values an object has (key: scope name).
func selectorMatches(sel corev1.ScopedResourceSelectorRequirement, have labels.Set) (bool, error) {
	var op selection.Operator
	switch sel.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return false, fmt.Errorf("%q is not a valid scope selector operator", sel.Operator)
	}
	r, err := labels.NewRequirement(string(sel.ScopeName), op, sel.Values)
	if err != nil {
		return false, fmt.Errorf("failed to parse and convert selector: %w", err)
	}
	return labels.NewSelector().Add(*r).Matches(have), nil
}

// CountName is the object-count quota name of a group-resource:
// count/<resource> for the core group, count/<resource>.<group> otherwise.
func CountName(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// parseCountName is CountName's inverse (resource names have no dots, so
// the first dot ends the resource).
func parseCountName(name corev1.ResourceName) (schema.GroupResource, bool) {
	rest, ok := strings.CutPrefix(string(name), "count/")
	if !ok || rest == "" {
		return schema.GroupResource{}, false
	}
	res, group, _ := strings.Cut(rest, ".")
	return schema.GroupResource{Group: group, Resource: res}, true
}

var one = *resource.NewQuantity(1, resource.DecimalSI)

// countEvaluator counts objects: count/<resource>.<group>, plus a legacy
// alias (configmaps, secrets, ...) for a few core kinds. Upstream counts
// only creates, the controller finds deletes.
type countEvaluator struct {
	gr    schema.GroupResource
	names []corev1.ResourceName
}

func newCountEvaluator(gr schema.GroupResource, alias corev1.ResourceName) *countEvaluator {
	e := &countEvaluator{gr: gr, names: []corev1.ResourceName{CountName(gr)}}
	if alias != "" {
		e.names = append(e.names, alias)
	}
	return e
}

func (e *countEvaluator) GroupResource() schema.GroupResource { return e.gr }

func (e *countEvaluator) Handles(op Operation, subresource string, _, _ runtime.Object) bool {
	return op == Create && subresource == ""
}

func (e *countEvaluator) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	return Intersection(names, e.names)
}

// MatchesScope: scopes are for pods and claims; a scoped quota covers no
// other kind.
func (e *countEvaluator) MatchesScope(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error) {
	return false, nil
}

func (e *countEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

func (e *countEvaluator) Usage(runtime.Object) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, n := range e.names {
		out[n] = one.DeepCopy()
	}
	return out, nil
}

// legacyCountAliases are upstream's old object-count names.
var legacyCountAliases = map[string]corev1.ResourceName{
	"configmaps":             corev1.ResourceConfigMaps,
	"resourcequotas":         corev1.ResourceQuotas,
	"replicationcontrollers": corev1.ResourceReplicationControllers,
	"secrets":                corev1.ResourceSecrets,
}

// Registry holds the evaluators: the built-in ones with rules of their own
// and an object counter made on first use for any other group-resource,
// custom resources included.
type Registry struct {
	now func() time.Time

	mu    sync.Mutex
	byGR  map[schema.GroupResource]Evaluator
	order []schema.GroupResource
}

// NewRegistry makes a registry; now (nil: time.Now) tells when a deleting
// pod's grace period has run out.
func NewRegistry(now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	r := &Registry{now: now, byGR: map[schema.GroupResource]Evaluator{}}
	r.add(&podEvaluator{now: now})
	r.add(serviceEvaluator{})
	r.add(pvcEvaluator{})
	for res, alias := range legacyCountAliases {
		r.add(newCountEvaluator(schema.GroupResource{Resource: res}, alias))
	}
	return r
}

func (r *Registry) add(e Evaluator) {
	gr := e.GroupResource()
	if _, ok := r.byGR[gr]; !ok {
		r.order = append(r.order, gr)
	}
	r.byGR[gr] = e
}

// For returns the evaluator of gr, making an object counter if it has none.
func (r *Registry) For(gr schema.GroupResource) Evaluator {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byGR[gr]; ok {
		return e
	}
	e := newCountEvaluator(gr, "")
	r.add(e)
	return e
}

// Usage is what obj of gr uses.
func (r *Registry) Usage(gr schema.GroupResource, obj runtime.Object) (corev1.ResourceList, error) {
	return r.For(gr).Usage(obj)
}

// Matches reports whether quota q covers obj of gr.
func (r *Registry) Matches(gr schema.GroupResource, q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	return Matches(r.For(gr), q, obj)
}

// evaluatorsFor returns the evaluators measuring any of names: the known
// ones, and counters for count/ names of group-resources not seen yet.
func (r *Registry) evaluatorsFor(names []corev1.ResourceName) []Evaluator {
	for _, n := range names {
		if gr, ok := parseCountName(n); ok && !Ignored(gr) {
			r.For(gr)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Evaluator
	for _, gr := range r.order {
		if e := r.byGR[gr]; len(e.MatchingResources(names)) > 0 {
			out = append(out, e)
		}
	}
	return out
}

// CalculateUsage measures what the objects in namespace use of hard,
// counting only objects in every scope of sels. Resources whose objects
// could not be listed are left out of the result and reported in the
// error, so a caller can keep their last known value.
func (r *Registry) CalculateUsage(ctx context.Context, namespace string, hard corev1.ResourceList, sels []corev1.ScopedResourceSelectorRequirement, list ListFunc) (corev1.ResourceList, error) {
	names := Names(hard)
	used := corev1.ResourceList{}
	var errs []error
	for _, e := range r.evaluatorsFor(names) {
		measured := e.MatchingResources(names)
		sum := corev1.ResourceList{}
		for _, n := range measured {
			sum[n] = resource.Quantity{Format: resource.DecimalSI}
		}
		objs, err := list(ctx, e.GroupResource(), namespace)
		if errors.Is(err, ErrNotServed) {
			objs, err = nil, nil
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", e.GroupResource(), err))
			continue
		}
		if err := sumUsage(e, sels, objs, sum); err != nil {
			errs = append(errs, err)
			continue
		}
		used = Add(used, Mask(sum, measured))
	}
	return used, errors.Join(errs...)
}

func sumUsage(e Evaluator, sels []corev1.ScopedResourceSelectorRequirement, objs []runtime.Object, sum corev1.ResourceList) error {
	for _, obj := range objs {
		in, err := inScopes(e, sels, obj)
		if err != nil {
			return fmt.Errorf("%s: %w", e.GroupResource(), err)
		}
		if !in {
			continue
		}
		u, err := e.Usage(obj)
		if err != nil {
			return fmt.Errorf("%s: %w", e.GroupResource(), err)
		}
		addInto(sum, u)
	}
	return nil
}

// Status computes the status a quota controller writes for q, as
// upstream's syncResourceQuota: hard is spec.hard, used is measured anew
// for every hard resource; a resource that could not be measured keeps
// its previous value (and the error is returned), one no evaluator knows
// is left out.
func (r *Registry) Status(ctx context.Context, q *corev1.ResourceQuota, list ListFunc) (corev1.ResourceQuotaStatus, error) {
	hard := Add(corev1.ResourceList{}, q.Spec.Hard)
	used := Add(corev1.ResourceList{}, q.Status.Used)
	measured, err := r.CalculateUsage(ctx, q.Namespace, hard, Selectors(q), list)
	for k, v := range measured {
		used[k] = v
	}
	return corev1.ResourceQuotaStatus{Hard: hard, Used: Mask(used, Names(hard))}, err
}

// ignored are never quota'd, as upstream: virtual resources that are not
// stored, and events.
var ignored = map[schema.GroupResource]bool{
	{Resource: "bindings"}:                                                 true,
	{Resource: "componentstatuses"}:                                        true,
	{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             true,
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       true,
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  true,
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   true,
	{Resource: "events"}:                         true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// Ignored reports whether quota never applies to gr.
func Ignored(gr schema.GroupResource) bool { return ignored[gr] }
