package server

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/storage"
)

// The admission policy plugins' reads (admission/policy.Lookups and
// MutatingLookups), all from the watch cache so that a policy, binding or
// param change applies as soon as the cache has it.

// ValidatingAdmissionPolicies lists the policies.
func (l *objectLookups) ValidatingAdmissionPolicies(context.Context) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	return list[admissionregistrationv1.ValidatingAdmissionPolicy](l, admissionregistrationv1.GroupName, "validatingadmissionpolicies", "")
}

// ValidatingAdmissionPolicyBindings lists the bindings.
func (l *objectLookups) ValidatingAdmissionPolicyBindings(context.Context) ([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	return list[admissionregistrationv1.ValidatingAdmissionPolicyBinding](l, admissionregistrationv1.GroupName, "validatingadmissionpolicybindings", "")
}

// ParamScope reports whether a paramKind is served and namespaced.
func (l *objectLookups) ParamScope(gvk schema.GroupVersionKind) (namespaced, ok bool) {
	res, ok := l.reg.ForKind(gvk)
	if !ok {
		return false, false
	}
	return res.Namespaced, true
}

// GetParam reads a param object; a miss waits for the cache to catch up
// once, since a param created a moment before the request applies to it
// (upstream reads the API directly then).
func (l *objectLookups) GetParam(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	res, ok := l.reg.ForKind(gvk)
	if !ok {
		return nil, nil
	}
	if e := l.st.Cache().Get(res, namespace, name); e != nil {
		return e.Obj, nil
	}
	if err := l.st.Cache().WaitCurrent(ctx); err != nil {
		return nil, err
	}
	if e := l.st.Cache().Get(res, namespace, name); e != nil {
		return e.Obj, nil
	}
	return nil, nil
}

// ListParams lists the param objects sel selects in namespace ("" all).
func (l *objectLookups) ListParams(_ context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]runtime.Object, error) {
	res, ok := l.reg.ForKind(gvk)
	if !ok {
		return nil, nil
	}
	entries, _, err := l.st.Cache().List(res, storage.Predicate{Namespace: namespace, Label: sel})
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Object, len(entries))
	for i, e := range entries {
		out[i] = e.Obj
	}
	return out, nil
}

// Served reports whether a group-version-resource is served.
func (l *objectLookups) Served(gvr schema.GroupVersionResource) bool {
	_, ok := l.reg.Lookup(gvr.Group, gvr.Version, gvr.Resource)
	return ok
}

// MutatingAdmissionPolicies lists the mutating policies.
func (l *objectLookups) MutatingAdmissionPolicies(context.Context) ([]*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	return list[admissionregistrationv1.MutatingAdmissionPolicy](l, admissionregistrationv1.GroupName, "mutatingadmissionpolicies", "")
}

// MutatingAdmissionPolicyBindings lists their bindings.
func (l *objectLookups) MutatingAdmissionPolicyBindings(context.Context) ([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	return list[admissionregistrationv1.MutatingAdmissionPolicyBinding](l, admissionregistrationv1.GroupName, "mutatingadmissionpolicybindings", "")
}
