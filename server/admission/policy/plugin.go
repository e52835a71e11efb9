// Package policy enforces ValidatingAdmissionPolicies
// (admissionregistration.k8s.io/v1) as upstream's validating policy
// plugin does: every binding whose policy exists selects requests by the
// policy's matchConstraints and its own matchResources, the policy's
// matchConditions, variables and validations are CEL on server/cel, with
// params from the binding's paramRef, and a failed validation denies,
// warns or annotates the request's audit event by the binding's
// validationActions; auditAnnotations annotate it too (audit.go).
//
// The authorizer variables check the requesting user's permissions with
// the authorizer WithAuthorizer gives (authz.go, server/cel's authz
// library).
//
// Not done: converting the object to the version an Equivalent rule
// named. status.observedGeneration and status.typeChecking are written by
// the status controller (status.go, typecheck.go), which type-checks the
// validations against the matched kinds as upstream's does.
package policy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/apiserver"
)

// Source lists the policies and bindings in force (from the watch cache,
// so that a change applies within a moment).
type Source interface {
	ValidatingAdmissionPolicies(ctx context.Context) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, error)
	ValidatingAdmissionPolicyBindings(ctx context.Context) ([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error)
}

// NamespaceGetter reads a namespace (nil, nil: there is none).
type NamespaceGetter interface {
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

// ParamSource reads the objects a paramKind names.
type ParamSource interface {
	// ParamScope reports whether objects of gvk are served and
	// namespaced.
	ParamScope(gvk schema.GroupVersionKind) (namespaced, ok bool)
	// GetParam reads one object (nil, nil: not found).
	GetParam(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error)
	// ListParams lists the objects of a namespace ("" all) that sel selects.
	ListParams(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]runtime.Object, error)
	// Served reports whether a group-version-resource is served (for
	// matchPolicy Equivalent).
	Served(gvr schema.GroupVersionResource) bool
}

// Lookups is everything the plugin reads.
type Lookups interface {
	Source
	NamespaceGetter
	ParamSource
}

// Plugin is the ValidatingAdmissionPolicy admission plugin.
type Plugin struct {
	lookups Lookups
	authz   Authorizer // nil: the authorizer variables are unbound
	// warner finds the request's warning recorder (apiserver.WarnerFrom).
	warner func(context.Context) apiserver.Warner
	mu     sync.Mutex
	// compiled caches each policy's programs by UID for one generation.
	compiled map[types.UID]*cachedPolicy
}

type cachedPolicy struct {
	generation int64
	policy     *compiledPolicy
}

// New returns the plugin.
func New(l Lookups, opts ...Option) *Plugin {
	p := &Plugin{lookups: l, warner: apiserver.WarnerFrom, compiled: map[types.UID]*cachedPolicy{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// exempt are the resources policies never apply to, as upstream: a bad
// policy must not lock out the configuration that would fix it.
var exempt = map[string]bool{
	"validatingwebhookconfigurations":   true,
	"mutatingwebhookconfigurations":     true,
	"validatingadmissionpolicies":       true,
	"validatingadmissionpolicybindings": true,
	"mutatingadmissionpolicies":         true,
	"mutatingadmissionpolicybindings":   true,
}

// Admit implements apiserver.Admitter.
func (p *Plugin) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if a.Resource == nil || (a.Resource.Group == admissionregistrationv1.GroupName && exempt[a.Resource.Name]) {
		return nil
	}
	bindings, err := p.lookups.ValidatingAdmissionPolicyBindings(ctx)
	if err != nil || len(bindings) == 0 {
		return err
	}
	policies, err := p.lookups.ValidatingAdmissionPolicies(ctx)
	if err != nil {
		return err
	}
	byPolicy := map[string][]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for _, b := range bindings {
		byPolicy[b.Spec.PolicyName] = append(byPolicy[b.Spec.PolicyName], b)
	}
	sort.Slice(policies, func(i, j int) bool { return policies[i].Name < policies[j].Name })
	p.prune(policies)
	r := newRun(ctx, p, a)
	for _, pol := range policies {
		bs := byPolicy[pol.Name]
		if len(bs) == 0 {
			continue
		}
		sort.Slice(bs, func(i, j int) bool { return bs[i].Name < bs[j].Name })
		if err := r.policy(pol, bs); err != nil {
			return err
		}
	}
	r.publishAudit() // audit.go
	return r.result()
}

// compile returns the cached programs of a policy's generation.
func (p *Plugin) compile(pol *admissionregistrationv1.ValidatingAdmissionPolicy) *compiledPolicy {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.compiled[pol.UID]; c != nil && c.generation == pol.Generation {
		return c.policy
	}
	cp, errs := compileSpec(&pol.Spec, field.NewPath("spec"))
	if cp == nil {
		cp = &compiledPolicy{err: errs[0]}
	}
	p.compiled[pol.UID] = &cachedPolicy{generation: pol.Generation, policy: cp}
	return cp
}

// prune forgets the programs of policies that are gone.
func (p *Plugin) prune(policies []*admissionregistrationv1.ValidatingAdmissionPolicy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.compiled) <= len(policies) {
		return
	}
	live := make(map[types.UID]bool, len(policies))
	for _, pol := range policies {
		live[pol.UID] = true
	}
	for uid := range p.compiled {
		if !live[uid] {
			delete(p.compiled, uid)
		}
	}
}

// denial is the first decision that refuses the request.
type denial struct {
	policy, binding string
	message         string
	reason          metav1.StatusReason
}

// run is one request's pass over the policies.
type run struct {
	ctx     context.Context
	p       *Plugin
	a       apiserver.AdmissionAttributes
	attrs   *attributes
	m       *matcher
	denied  []denial
	baseVar map[string]any // object, oldObject, request
	ns      *nsCache
	audited *auditRecord // what goes into the audit event (audit.go)
}

type nsCache struct {
	loaded bool
	val    any
	err    error
}

func newRun(ctx context.Context, p *Plugin, a apiserver.AdmissionAttributes) *run {
	attrs := attributesOf(a)
	return &run{ctx: ctx, p: p, a: a, attrs: attrs, ns: &nsCache{},
		m: &matcher{ctx: ctx, attrs: attrs, namespaces: p.lookups, served: p.lookups.Served}}
}

// configError records a misconfigured policy or binding as its
// failurePolicy says.
func (r *run) configError(pol *admissionregistrationv1.ValidatingAdmissionPolicy, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding, err error) {
	if failurePolicy(pol) == admissionregistrationv1.Ignore {
		return
	}
	d := denial{policy: pol.Name, message: fmt.Sprintf("failed to configure policy: %v", err)}
	if binding != nil {
		d.binding, d.message = binding.Name, fmt.Sprintf("failed to configure binding: %v", err)
	}
	r.denied = append(r.denied, d)
}

func failurePolicy(pol *admissionregistrationv1.ValidatingAdmissionPolicy) admissionregistrationv1.FailurePolicyType {
	if pol.Spec.FailurePolicy == nil {
		return admissionregistrationv1.Fail
	}
	return *pol.Spec.FailurePolicy
}

// policy applies one policy through its bindings. An error return is a
// failure to read what evaluation needs (the namespace).
func (r *run) policy(pol *admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) error {
	ok, err := r.m.matches(pol.Spec.MatchConstraints)
	if err != nil {
		r.configError(pol, nil, err)
		return nil
	}
	if !ok {
		return nil
	}
	cp := r.p.compile(pol)
	if cp.err != nil {
		r.configError(pol, nil, cp.err)
		return nil
	}
	for _, b := range bindings {
		ok, err := r.m.matches(b.Spec.MatchResources)
		if err != nil {
			r.configError(pol, b, err)
			continue
		}
		if !ok {
			continue
		}
		params, err := r.params(pol.Spec.ParamKind, b.Spec.ParamRef)
		if err != nil {
			r.configError(pol, b, err)
			continue
		}
		if len(params) == 0 {
			continue
		}
		ns, err := r.namespaceObject()
		if err != nil {
			return err
		}
		for _, param := range params {
			for _, d := range r.evaluate(pol, cp, param, ns) {
				r.act(pol, b, d)
			}
		}
	}
	return nil
}

// act applies a binding's validationActions to a failed validation.
func (r *run) act(pol *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, d decision) {
	if d.deny {
		r.denied = append(r.denied, denial{policy: pol.Name, binding: b.Name, message: d.message})
		return
	}
	for _, action := range b.Spec.ValidationActions {
		switch action {
		case admissionregistrationv1.Deny:
			r.denied = append(r.denied, denial{policy: pol.Name, binding: b.Name, message: d.message, reason: d.reason})
		case admissionregistrationv1.Warn:
			if w := r.p.warner(r.ctx); w != nil {
				w.AddWarning(fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", pol.Name, b.Name, d.message))
			}
		case admissionregistrationv1.Audit:
			r.auditFailure(pol, b, d) // audit.go
		}
	}
}

// result is upstream's error for the first denial: a Forbidden-shaped
// Status whose reason and code are the validation's (Invalid, 422, by
// default).
func (r *run) result() error {
	if len(r.denied) == 0 {
		return nil
	}
	d := r.denied[0]
	msg := fmt.Sprintf("ValidatingAdmissionPolicy '%s' denied request: %s", d.policy, d.message)
	if d.binding != "" {
		msg = fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", d.policy, d.binding, d.message)
	}
	name := r.attrs.name
	if name == "" {
		name = "Unknown"
	}
	err := apierrors.NewForbidden(r.attrs.gvr.GroupResource(), name, errors.New(msg))
	reason := d.reason
	if reason == "" {
		reason = metav1.StatusReasonInvalid
	}
	err.ErrStatus.Reason = reason
	err.ErrStatus.Code = reasonToCode(reason)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Message: msg})
	return err
}

func reasonToCode(r metav1.StatusReason) int32 {
	switch r {
	case metav1.StatusReasonForbidden:
		return http.StatusForbidden
	case metav1.StatusReasonUnauthorized:
		return http.StatusUnauthorized
	case metav1.StatusReasonRequestEntityTooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusUnprocessableEntity
}

// attributesOf describes a write for matching and for `request`.
func attributesOf(a apiserver.AdmissionAttributes) *attributes {
	res := a.Resource
	out := &attributes{op: admissionregistrationv1.OperationType(a.Op), gvr: res.GVR(), gvk: res.GVK(),
		subresource: a.Subresource, namespaced: res.Namespaced, obj: a.Object, old: a.Old}
	for _, o := range []runtime.Object{a.Object, a.Old} {
		if o == nil {
			continue
		}
		if acc, err := metaAccessor(o); err == nil {
			out.name, out.namespace = acc.GetName(), acc.GetNamespace()
			if out.name == "" {
				out.name = acc.GetGenerateName()
			}
			break
		}
	}
	if !res.Namespaced {
		out.namespace = ""
	}
	return out
}

// staticMessage is a validation's message when its messageExpression gives
// none, as upstream: the message, else the failed expression.
func staticMessage(v admissionregistrationv1.Validation) string {
	if m := strings.TrimSpace(v.Message); m != "" {
		return m
	}
	return fmt.Sprintf("failed expression: %v", strings.TrimSpace(v.Expression))
}

// ValidatingPhase: policies run after the object is validated.
func (*Plugin) ValidatingPhase() {}
