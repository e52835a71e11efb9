package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/apiserver"
)

// MutatingSource lists the MutatingAdmissionPolicies and bindings in force.
type MutatingSource interface {
	MutatingAdmissionPolicies(ctx context.Context) ([]*admissionregistrationv1.MutatingAdmissionPolicy, error)
	MutatingAdmissionPolicyBindings(ctx context.Context) ([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, error)
}

// MutatingLookups is everything the mutating plugin reads.
type MutatingLookups interface {
	Lookups
	MutatingSource
}

// Mutating is the MutatingAdmissionPolicy plugin, as upstream's: each
// binding whose policy exists selects requests as a validating policy's
// does; the policy's mutations, in order, patch the object: an
// ApplyConfiguration merged by the resource's schema (structured merge
// diff, atomic fields refused) or a JSON Patch. Its failures follow the
// policy's failurePolicy. IfNeeded policies run again on the admission
// chain's reinvocation pass (apiserver/reinvocation.go) when the object
// changed after them: a later policy, or a mutating webhook.
type Mutating struct {
	base   *Plugin // lookups, the authorizer and the shared request state
	source MutatingSource
	mu     sync.Mutex
	// compiled caches each policy's programs by UID for one generation.
	compiled map[types.UID]*cachedPolicy
}

// NewMutating returns the plugin.
func NewMutating(l MutatingLookups, opts ...Option) *Mutating {
	return &Mutating{base: New(l, opts...), source: l, compiled: map[types.UID]*cachedPolicy{}}
}

// invocation is one (policy, binding, param) the request matched.
type invocation struct {
	policy  *admissionregistrationv1.MutatingAdmissionPolicy
	binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
	cp      *compiledPolicy
	param   any
	key     string
}

// policyError is a failed mutation or a misconfiguration: its policy's
// failurePolicy decides whether it refuses the request.
type policyError struct {
	policy  *admissionregistrationv1.MutatingAdmissionPolicy
	binding string
	err     error
}

func (e policyError) Error() string {
	if e.binding != "" {
		return fmt.Sprintf("policy '%s' with binding '%s' denied request: %v", e.policy.Name, e.binding, e.err)
	}
	return fmt.Sprintf("policy %q denied request: %v", e.policy.Name, e.err)
}

// Admit implements apiserver.Admitter.
func (m *Mutating) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if a.Resource == nil || (a.Resource.Group == admissionregistrationv1.GroupName && exempt[a.Resource.Name]) {
		return nil
	}
	// Only creates and updates carry an object to mutate.
	if (a.Op != apiserver.OpCreate && a.Op != apiserver.OpUpdate) || isNil(a.Object) {
		return nil
	}
	bindings, err := m.source.MutatingAdmissionPolicyBindings(ctx)
	if err != nil || len(bindings) == 0 {
		return err
	}
	run := a.Reinvocation.Hooks(m) // apiserver/reinvocation.go
	if a.Reinvocation.IsReinvoke() && !run.BeginReinvoke(a.Object) {
		return nil // no invocation to run again
	}
	defer func() { run.Left(a.Object) }()
	policies, err := m.source.MutatingAdmissionPolicies(ctx)
	if err != nil {
		return err
	}
	m.prune(policies)
	r := newRun(ctx, m.base, a)
	invs, perrs, err := m.invocations(r, policies, bindings)
	if err != nil {
		return err
	}
	if len(invs) > 0 {
		mu := newMutator(r, a)
		perrs = append(perrs, mu.mutate(invs, run)...)
		if err := mu.commit(); err != nil {
			return err
		}
	}
	return refusal(r.attrs, perrs)
}

// Reinvocable: IfNeeded policies take part in the chain's reinvocation
// pass (apiserver/reinvocation.go).
func (*Mutating) Reinvocable() {}

// invocations matches the request against every binding, in policy then
// binding name order, and collects its params. Misconfigurations are
// policy errors; a failure to read the namespace ends the request.
func (m *Mutating) invocations(r *run, policies []*admissionregistrationv1.MutatingAdmissionPolicy, bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding) ([]invocation, []policyError, error) {
	byPolicy := map[string][]*admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	for _, b := range bindings {
		byPolicy[b.Spec.PolicyName] = append(byPolicy[b.Spec.PolicyName], b)
	}
	sort.Slice(policies, func(i, j int) bool { return policies[i].Name < policies[j].Name })
	var invs []invocation
	var perrs []policyError
	for _, pol := range policies {
		bs := byPolicy[pol.Name]
		if len(bs) == 0 {
			continue
		}
		ok, err := r.m.matches(pol.Spec.MatchConstraints)
		if err != nil {
			perrs = append(perrs, policyError{policy: pol, err: fmt.Errorf("failed to configure policy: %w", err)})
			continue
		}
		if !ok {
			continue
		}
		cp := m.compile(pol)
		if cp.err != nil {
			perrs = append(perrs, policyError{policy: pol, err: fmt.Errorf("failed to configure policy: %w", cp.err)})
			continue
		}
		sort.Slice(bs, func(i, j int) bool { return bs[i].Name < bs[j].Name })
		for _, b := range bs {
			ok, err := r.m.matches(b.Spec.MatchResources)
			if err == nil && ok {
				var params []any
				if params, err = r.params(pol.Spec.ParamKind, b.Spec.ParamRef); err == nil {
					for i, p := range params {
						invs = append(invs, invocation{policy: pol, binding: b, cp: cp, param: p, key: fmt.Sprintf("%s/%s/%d", pol.UID, b.UID, i)})
					}
				}
			}
			if err != nil {
				perrs = append(perrs, policyError{policy: pol, binding: b.Name, err: fmt.Errorf("failed to configure binding: %w", err)})
			}
		}
	}
	if len(invs) > 0 {
		// Every invocation may read namespaceObject; a namespace that
		// cannot be read ends the request, as upstream.
		if _, err := r.namespaceObject(); err != nil {
			return nil, nil, err
		}
	}
	return invs, perrs, nil
}

// compile returns the cached programs of a policy's generation.
func (m *Mutating) compile(pol *admissionregistrationv1.MutatingAdmissionPolicy) *compiledPolicy {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.compiled[pol.UID]; c != nil && c.generation == pol.Generation {
		return c.policy
	}
	cp, errs := compileMutatingSpec(&pol.Spec, field.NewPath("spec"))
	if cp == nil {
		cp = &compiledPolicy{err: errs[0]}
	}
	m.compiled[pol.UID] = &cachedPolicy{generation: pol.Generation, policy: cp}
	return cp
}

// prune forgets the programs of policies that are gone.
func (m *Mutating) prune(policies []*admissionregistrationv1.MutatingAdmissionPolicy) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.compiled) <= len(policies) {
		return
	}
	live := make(map[types.UID]bool, len(policies))
	for _, pol := range policies {
		live[pol.UID] = true
	}
	for uid := range m.compiled {
		if !live[uid] {
			delete(m.compiled, uid)
		}
	}
}

// refusal is upstream's error for the policy errors whose failurePolicy
// is Fail: Forbidden with the first one's message, each one a cause.
func refusal(attrs *attributes, perrs []policyError) error {
	var msgs []string
	for _, e := range perrs {
		if fp := e.policy.Spec.FailurePolicy; fp != nil && *fp == admissionregistrationv1.Ignore {
			continue
		}
		var status apierrors.APIStatus
		if errors.As(e.err, &status) {
			return e.err // an API error (a missing namespace) is returned as it is
		}
		msgs = append(msgs, e.Error())
	}
	if len(msgs) == 0 {
		return nil
	}
	name := attrs.name
	if name == "" {
		name = "Unknown"
	}
	err := apierrors.NewForbidden(attrs.gvr.GroupResource(), name, errors.New("admission request denied by policy"))
	err.ErrStatus.Message = msgs[0]
	err.ErrStatus.Reason = metav1.StatusReasonInvalid
	for _, msg := range msgs {
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Message: msg})
	}
	return err
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
