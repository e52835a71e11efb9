package policy

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// attributes is what matching needs of a request.
type attributes struct {
	op          admissionregistrationv1.OperationType
	gvr         schema.GroupVersionResource
	gvk         schema.GroupVersionKind
	subresource string
	namespace   string
	name        string
	namespaced  bool
	obj, old    runtime.Object
}

func (a *attributes) isNamespace() bool {
	return a.gvr.Group == "" && a.gvr.Resource == "namespaces"
}

// matcher decides whether MatchResources select a request.
type matcher struct {
	ctx        context.Context
	attrs      *attributes
	namespaces NamespaceGetter
	// served reports whether a group-version-resource is served, for
	// matchPolicy Equivalent.
	served func(schema.GroupVersionResource) bool
}

// matches applies resourceRules, excludeResourceRules, namespaceSelector
// and objectSelector as upstream's generic matcher does.
func (m *matcher) matches(mr *admissionregistrationv1.MatchResources) (bool, error) {
	if mr == nil {
		return true, nil
	}
	equivalent := mr.MatchPolicy != nil && *mr.MatchPolicy == admissionregistrationv1.Equivalent
	for _, r := range mr.ExcludeResourceRules {
		if m.ruleMatches(r, equivalent) {
			return false, nil
		}
	}
	// No resourceRules (a binding's matchResources) selects whatever the
	// policy does.
	if len(mr.ResourceRules) > 0 {
		found := false
		for _, r := range mr.ResourceRules {
			if m.ruleMatches(r, equivalent) {
				found = true
				break
			}
		}
		if !found {
			return false, nil
		}
	}
	ok, err := m.namespaceSelected(mr.NamespaceSelector)
	if err != nil || !ok {
		return false, err
	}
	return objectSelected(mr.ObjectSelector, m.attrs)
}

// namespaceSelected is upstream's namespace matcher: requests for
// cluster-scoped objects other than namespaces always match; a namespace
// is matched by its own labels.
func (m *matcher) namespaceSelected(ls *metav1.LabelSelector) (bool, error) {
	if ls == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return false, fmt.Errorf("namespaceSelector: %w", err)
	}
	if sel.Empty() {
		return true, nil
	}
	a := m.attrs
	if a.isNamespace() {
		return sel.Matches(labels.Set(objectLabels(a.obj, a.old))), nil
	}
	if a.namespace == "" {
		return true, nil
	}
	ns, err := m.namespaces.Namespace(m.ctx, a.namespace)
	if err != nil {
		return false, err
	}
	if ns == nil {
		return false, nil
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}

// objectLabels are the labels of obj, or old's when obj is nil (delete).
func objectLabels(obj, old runtime.Object) map[string]string {
	for _, o := range []runtime.Object{obj, old} {
		if o == nil {
			continue
		}
		if acc, err := meta.Accessor(o); err == nil {
			return acc.GetLabels()
		}
	}
	return nil
}

// objectSelected matches the new or the old object, as upstream.
func objectSelected(ls *metav1.LabelSelector, a *attributes) (bool, error) {
	if ls == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return false, fmt.Errorf("objectSelector: %w", err)
	}
	if sel.Empty() {
		return true, nil
	}
	for _, o := range []runtime.Object{a.obj, a.old} {
		if o == nil {
			continue
		}
		if acc, err := meta.Accessor(o); err == nil && sel.Matches(labels.Set(acc.GetLabels())) {
			return true, nil
		}
	}
	return false, nil
}

// ruleMatches matches one rule. With equivalent, a rule naming another
// served version of the same group and resource matches too (skiff
// serves each resource's objects in every version through one row).
func (m *matcher) ruleMatches(r admissionregistrationv1.NamedRuleWithOperations, equivalent bool) bool {
	a := m.attrs
	if len(r.ResourceNames) > 0 && !contains(r.ResourceNames, a.name) {
		return false
	}
	if !operationMatches(r.Operations, a.op) || !scopeMatches(r.Scope, a) {
		return false
	}
	if !wildcardMatch(r.APIGroups, a.gvr.Group) || !resourceMatches(r.Resources, a.gvr.Resource, a.subresource) {
		return false
	}
	if wildcardMatch(r.APIVersions, a.gvr.Version) {
		return true
	}
	if !equivalent || m.served == nil {
		return false
	}
	for _, v := range r.APIVersions {
		if m.served(schema.GroupVersionResource{Group: a.gvr.Group, Version: v, Resource: a.gvr.Resource}) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func wildcardMatch(list []string, s string) bool {
	for _, x := range list {
		if x == "*" || x == s {
			return true
		}
	}
	return false
}

func operationMatches(ops []admissionregistrationv1.OperationType, op admissionregistrationv1.OperationType) bool {
	for _, o := range ops {
		if o == admissionregistrationv1.OperationAll || o == op {
			return true
		}
	}
	return false
}

func scopeMatches(scope *admissionregistrationv1.ScopeType, a *attributes) bool {
	if scope == nil || *scope == admissionregistrationv1.AllScopes {
		return true
	}
	switch *scope {
	case admissionregistrationv1.NamespacedScope:
		return !a.isNamespace() && a.namespaced
	case admissionregistrationv1.ClusterScope:
		return a.isNamespace() || !a.namespaced
	}
	return false
}

// resourceMatches matches "resource", "resource/subresource" and their
// wildcards.
func resourceMatches(resources []string, resource, subresource string) bool {
	for _, r := range resources {
		res, sub, _ := strings.Cut(r, "/")
		if (res == "*" || res == resource) && (sub == "*" || sub == subresource) {
			return true
		}
	}
	return false
}
