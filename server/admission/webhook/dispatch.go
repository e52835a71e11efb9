package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/admission/webhook/matchcond"
	"skiff/server/apiserver"
)

type dispatcher struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	conds map[string]*matchcond.Matcher // by the conditions' text
}

// maxCachedConditions bounds the compiled conditions kept: distinct sets
// of expressions, far more than a cluster's webhooks have.
const maxCachedConditions = 1024

func newDispatcher(cfg Config) *dispatcher {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &dispatcher{cfg: cfg, log: log, conds: map[string]*matchcond.Matcher{}}
}

// request is one admission request as webhooks see it.
type request struct {
	a               apiserver.AdmissionAttributes
	op              apiserver.Operation
	gvr             schema.GroupVersionResource
	gvk             schema.GroupVersionKind
	sub             string
	name, namespace string
	obj, old        runtime.Object
}

func newRequest(a apiserver.AdmissionAttributes) *request {
	r := &request{a: a, op: a.Op, gvr: a.Resource.GVR(), gvk: a.Resource.GVK(), sub: a.Subresource, obj: a.Object, old: a.Old,
		name: a.Name, namespace: a.Namespace}
	// A subresource's object may be of its own kind (Eviction, Scale,
	// the CONNECT options): its type metadata says so.
	if a.Subresource != "" && a.Object != nil {
		if gvk := a.Object.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
			r.gvk = gvk
		}
	}
	for _, o := range []runtime.Object{a.Object, a.Old} {
		if o == nil || a.Op == apiserver.OpConnect {
			continue
		}
		if acc, err := meta.Accessor(o); err == nil {
			if r.name == "" {
				r.name = acc.GetName()
			}
			if r.namespace == "" {
				r.namespace = acc.GetNamespace()
			}
		}
	}
	return r
}

// shouldCall decides whether h sees r and as what, as upstream's
// ShouldCallHook: rules, then selectors, then match conditions (whose
// errors follow the failure policy).
func (d *dispatcher) shouldCall(ctx context.Context, h *hook, r *request) (target, bool, error) {
	t, ok := d.matchRules(h, r)
	if !ok {
		return t, false, nil
	}
	if ok, err := d.matchNamespace(ctx, h, r); !ok || err != nil {
		return t, false, err
	}
	if ok, err := matchObject(h, r); !ok || err != nil {
		return t, false, err
	}
	if len(h.conditions) == 0 {
		return t, true, nil
	}
	m, err := d.matcher(h)
	if err != nil {
		return t, false, apierrors.NewInternalError(err)
	}
	vars, err := conditionVars(r, t)
	if err != nil {
		return t, false, apierrors.NewInternalError(err)
	}
	d.bindAuthorizer(&vars, r)
	ok, err = m.Match(ctx, vars)
	switch {
	case !ok:
		return t, false, nil
	case err != nil && h.failurePolicy == admissionregistrationv1.Ignore:
		return t, false, nil
	case err != nil:
		return t, false, apierrors.NewForbidden(r.gvr.GroupResource(), r.name, err)
	}
	return t, true, nil
}

func (d *dispatcher) matcher(h *hook) (*matchcond.Matcher, error) {
	key := ""
	for _, c := range h.conditions {
		key += c.Name + "\x00" + c.Expression + "\x00"
	}
	d.mu.Lock()
	m, ok := d.conds[key]
	d.mu.Unlock()
	if ok {
		return m, nil
	}
	m, errs := matchcond.Compile(h.conditions, nil)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	d.mu.Lock()
	if len(d.conds) >= maxCachedConditions {
		clear(d.conds)
	}
	d.conds[key] = m
	d.mu.Unlock()
	return m, nil
}

// mutate calls the matching mutating webhooks in order, as upstream's
// mutating dispatcher. On the chain's reinvocation pass
// (apiserver/reinvocation.go) it calls only the IfNeeded webhooks called
// on the first pass that saw the object change after them: a later
// webhook's patch, or any change since this plugin's first pass. A
// webhook first matched on the reinvocation pass is not called.
func (d *dispatcher) mutate(ctx context.Context, a apiserver.AdmissionAttributes, hooks []*hook, run *apiserver.Hooks) error {
	again := a.Reinvocation.IsReinvoke()
	round := 0
	if again {
		round = 1
	}
	defer func() { run.Left(a.Object) }()
	for i, h := range hooks {
		r := newRequest(a)
		t, ok, err := d.shouldCall(ctx, h, r)
		if err != nil {
			return err
		}
		if !ok || (again && !run.Due(h.key)) {
			continue
		}
		site := mutationSite{round: round, index: i} // audit.go
		changed, err := d.callMutating(ctx, h, r, t, site)
		site.failedOpen(ctx, h, err)
		if changed {
			run.Changed()
			a.Reinvocation.SetShouldReinvoke()
		}
		if h.reinvoke {
			run.Invoked(h.key)
		}
		if err = d.outcome(ctx, h, err); err != nil {
			return err
		}
	}
	return nil
}

// validate calls the matching validating webhooks in parallel and returns
// the first refusal in webhook order.
func (d *dispatcher) validate(ctx context.Context, a apiserver.AdmissionAttributes, hooks []*hook) error {
	r := newRequest(a)
	errs := make([]error, len(hooks))
	var wg sync.WaitGroup
	called := 0 // upstream numbers the webhooks called
	for i, h := range hooks {
		t, ok, err := d.shouldCall(ctx, h, r)
		if err != nil {
			errs[i] = err
			continue
		}
		if !ok {
			continue
		}
		wg.Add(1)
		idx := called
		called++
		go func() {
			defer wg.Done()
			err := d.callValidating(ctx, h, r, t)
			validatingFailedOpen(ctx, h, idx, err) // audit.go
			errs[i] = d.outcome(ctx, h, err)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// callError is a webhook that could not be called or answered
// nonsense: its failure policy decides.
type callError struct {
	name   string
	reason error
}

func (e *callError) Error() string {
	return fmt.Sprintf("failed calling webhook %q: %v", e.name, e.reason)
}

func (e *callError) Unwrap() error { return e.reason }

// outcome applies the failure policy: Ignore lets the request go on
// (unless the request itself is out of time), Fail refuses it with a 500
// as upstream. Refusals and other errors pass unchanged.
func (d *dispatcher) outcome(ctx context.Context, h *hook, err error) error {
	var ce *callError
	if !errors.As(err, &ce) {
		return err
	}
	if h.failurePolicy == admissionregistrationv1.Ignore {
		d.log.Warn("failed calling webhook, failing open", "webhook", h.name, "err", err)
		if ctx.Err() != nil {
			return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
		}
		return nil
	}
	d.log.Warn("failed calling webhook, failing closed", "webhook", h.name, "err", err)
	return apierrors.NewInternalError(err)
}

func internalError(err error) error {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return err
	}
	return apierrors.NewInternalError(err)
}
