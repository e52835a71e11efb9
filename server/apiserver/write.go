package apiserver

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/auth"
	"skiff/server/registry"
	"skiff/server/storage"
)

// Operation is what a write does, for admission.
type Operation string

const (
	OpCreate Operation = "CREATE"
	OpUpdate Operation = "UPDATE"
	OpDelete Operation = "DELETE"
	// OpConnect is a pods/exec, attach or portforward request: Object is
	// its options (PodExecOptions, ...), Name and Namespace the pod's.
	OpConnect Operation = "CONNECT"
)

// Admitter is one admission plugin: it may change the object (mutating) or
// refuse it with an API error.
type Admitter interface {
	// Admit sees the object after defaulting and before validation; old is
	// nil on create. subresource is "" for the main resource.
	Admit(ctx context.Context, a AdmissionAttributes) error
}

// Releaser is implemented by admission plugins that reserve something for
// an object (Service IPs and node ports): what obj holds and keep does not
// is given back when a write does not happen or an object goes.
type Releaser interface {
	// Release frees what obj holds that keep (nil: nothing) does not.
	Release(ctx context.Context, res *registry.Resource, obj, keep runtime.Object)
}

// AdmissionAttributes describe one write to admission plugins.
type AdmissionAttributes struct {
	Op          Operation
	Resource    *registry.Resource
	Subresource string
	Object      runtime.Object
	Old         runtime.Object
	User        *auth.User
	DryRun      bool
	// Name and Namespace are set for OpConnect, whose object is not the
	// one named; other operations take them from the object.
	Name, Namespace string
	// ApplyTypes is the schema the resource's objects merge by (nil: it
	// has none), for plugins that merge apply configurations.
	ApplyTypes func() managedfields.TypeConverter
	// Reinvocation is the request's reinvocation state in the mutating
	// phase (nil elsewhere): reinvocation.go.
	Reinvocation *Reinvocation
}

func dryRun(r *http.Request) (bool, error) {
	for _, v := range r.URL.Query()["dryRun"] {
		if v != "All" {
			return false, apierrors.NewBadRequest(fmt.Sprintf("unsupported dryRun value %q: only All is supported", v))
		}
		return true, nil
	}
	return false, nil
}

func (s *Server) create(q *request) {
	ctx := q.r.Context()
	body, err := s.readBody(q.w, q.r)
	fv, ferr := parseFieldValidation(q.r)
	dry, derr := dryRun(q.r)
	var obj runtime.Object
	if err == nil && ferr == nil && derr == nil {
		obj, err = s.decodeObject(q.w, q.r, q.res, body, fv)
	}
	if err = firstErr(err, ferr, derr); err != nil {
		writeError(q.w, q.r, err)
		return
	}
	e, err := s.createObject(ctx, q, obj, dry)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	writeObject(q.w, q.r, http.StatusCreated, e.Obj, e.Raw)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// createObject runs the create pipeline: scope, name, namespace lifecycle,
// defaults, admission, validation, then the store (unless dry-run).
func (s *Server) createObject(ctx context.Context, q *request, obj runtime.Object, dry bool) (*storage.Entry, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := s.setScope(q, acc); err != nil {
		return nil, err
	}
	if acc.GetName() == "" && acc.GetGenerateName() != "" {
		acc.SetName(acc.GetGenerateName() + rand.String(5))
	}
	if acc.GetName() == "" {
		return nil, apierrors.NewInvalid(q.res.GVK().GroupKind(), "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if err := s.checkNamespace(ctx, q.res, acc.GetNamespace()); err != nil {
		return nil, err
	}
	prepareForCreate(q.res, obj, acc)
	stampCSRRequester(ctx, obj)
	obj = s.trackUpdate(q, q.res.New(), obj)
	acc, _ = meta.Accessor(obj)
	if err := s.admit(ctx, q, OpCreate, obj, nil, dry, phaseMutating); err != nil {
		s.release(ctx, q, obj, nil)
		return nil, err
	}
	setQOS(obj)
	if q.res.Validate != nil {
		if errs := q.res.Validate(obj); len(errs) > 0 {
			s.release(ctx, q, obj, nil)
			return nil, apierrors.NewInvalid(q.res.GVK().GroupKind(), acc.GetName(), errs)
		}
	}
	if err := s.admit(ctx, q, OpCreate, obj, nil, dry, phaseValidating); err != nil {
		s.release(ctx, q, obj, nil)
		return nil, err
	}
	if dry {
		s.release(ctx, q, obj, nil)
		return entryOf(obj)
	}
	e, err := s.st.Create(ctx, q.res, obj)
	if err != nil {
		s.release(ctx, q, obj, nil)
	}
	return e, err
}

// release tells every Releaser that obj's reservations beyond keep's are
// no longer needed.
func (s *Server) release(ctx context.Context, q *request, obj, keep runtime.Object) {
	for _, p := range s.cfg.Admission {
		if r, ok := p.(Releaser); ok && obj != nil {
			r.Release(context.WithoutCancel(ctx), q.res, obj, keep)
		}
	}
}

// setScope makes the object's namespace agree with the URL's.
func (s *Server) setScope(q *request, acc metav1.Object) error {
	if !q.res.Namespaced {
		acc.SetNamespace("")
		return nil
	}
	switch ns := acc.GetNamespace(); {
	case ns == "":
		acc.SetNamespace(q.info.Namespace)
	case ns != q.info.Namespace:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// checkNamespace refuses new content in a namespace that does not exist or
// is being deleted (upstream's NamespaceLifecycle admission).
func (s *Server) checkNamespace(ctx context.Context, res *registry.Resource, namespace string) error {
	if !res.Namespaced {
		return nil
	}
	nsRes, ok := s.reg.Lookup("", "v1", "namespaces")
	if !ok {
		return nil
	}
	// The watch cache answers for the namespaces it has; one created a
	// moment ago may not be there yet, so a miss asks the store.
	e := s.st.Cache().Get(nsRes, "", namespace)
	if e == nil {
		var err error
		if e, err = s.st.Get(ctx, nsRes, "", namespace); err != nil {
			return err
		}
	}
	if acc, _ := meta.Accessor(e.Obj); acc != nil && acc.GetDeletionTimestamp() != nil {
		return apierrors.NewForbidden(res.GVR().GroupResource(), "",
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
	}
	return nil
}

// prepareForCreate sets what the server owns on a new object.
func prepareForCreate(res *registry.Resource, obj runtime.Object, acc metav1.Object) {
	acc.SetUID(uuid.NewUUID())
	acc.SetCreationTimestamp(metav1.NewTime(time.Now().Truncate(time.Second)))
	acc.SetResourceVersion("")
	acc.SetDeletionTimestamp(nil)
	acc.SetDeletionGracePeriodSeconds(nil)
	acc.SetSelfLink("")
	acc.SetGeneration(0)
	if res.Generation {
		acc.SetGeneration(1)
	}
	if res.Status {
		resetStatusOnCreate(obj)
	}
	if res.Default != nil {
		res.Default(obj)
	}
	setQOS(obj)
}

// setQOS computes a pod's QoS class; it runs again after admission, which
// may have set resources (LimitRanger, mutating webhooks).
func setQOS(obj runtime.Object) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.Status.QOSClass = podQOS(pod)
	}
}

// ValidatingAdmitter marks the plugins of upstream's validating phase
// (policies, validating webhooks, Pod Security, ResourceQuota): they run
// after the object is validated, so an invalid object gets its 422 before
// any of them is asked (or charges quota).
type ValidatingAdmitter interface {
	Admitter
	ValidatingPhase()
}

// admission phases
const (
	phaseMutating = iota
	phaseValidating
	phaseAll
)

// admit runs the admission plugins of one phase, in their order; the
// mutating phase with upstream's reinvocation (reinvocation.go).
func (s *Server) admit(ctx context.Context, q *request, op Operation, obj, old runtime.Object, dry bool, phase int) error {
	ctx = withWarner(ctx, q.w) // warnings.go
	a := AdmissionAttributes{Op: op, Resource: q.res, Subresource: q.info.Subresource, Object: obj, Old: old, User: auth.UserFrom(ctx), DryRun: dry,
		ApplyTypes: func() managedfields.TypeConverter { return s.fields.typeConverter(q.res) }}
	var plugins []Admitter
	for _, p := range s.cfg.Admission {
		_, validating := p.(ValidatingAdmitter)
		if (phase == phaseMutating && validating) || (phase == phaseValidating && !validating) {
			continue
		}
		plugins = append(plugins, p)
	}
	if phase == phaseMutating {
		return AdmitMutating(ctx, plugins, a) // reinvocation.go
	}
	for _, p := range plugins {
		if err := p.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// entryOf encodes an object that was not stored (dry-run).
func entryOf(obj runtime.Object) (*storage.Entry, error) {
	return &storage.Entry{Obj: obj}, nil
}
