package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/storage"
)

func (s *Server) update(q *request) {
	ctx := q.r.Context()
	body, err := s.readBody(q.w, q.r)
	fv, ferr := parseFieldValidation(q.r)
	dry, derr := dryRun(q.r)
	var obj runtime.Object
	if err = firstErr(err, ferr, derr); err == nil {
		obj, err = s.decodeObject(q.w, q.r, q.res, body, fv)
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		writeError(q.w, q.r, apierrors.NewBadRequest(err.Error()))
		return
	}
	if acc.GetName() == "" {
		acc.SetName(q.info.Name)
	}
	if acc.GetName() != q.info.Name {
		writeError(q.w, q.r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", acc.GetName(), q.info.Name)))
		return
	}
	if err := s.setScope(q, acc); err != nil {
		writeError(q.w, q.r, err)
		return
	}
	expected, err := storage.ParseResourceVersion(acc.GetResourceVersion())
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	e, err := s.updateLoop(ctx, q, expected, dry, func(runtime.Object) (runtime.Object, error) {
		return obj.DeepCopyObject(), nil
	})
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	writeObject(q.w, q.r, http.StatusOK, e.Obj, e.Raw)
}

// updateLoop reads the current object, asks next for the new one and
// writes it with compare-and-swap. With an expected resourceVersion a
// mismatch is a 409 for the client; without one (an unconditional update or
// a patch) a lost race is retried against the newer object.
func (s *Server) updateLoop(ctx context.Context, q *request, expected int64, dry bool, next func(cur runtime.Object) (runtime.Object, error)) (*storage.Entry, error) {
	for attempt := 0; ; attempt++ {
		cur, err := s.st.Get(ctx, q.res, q.info.Namespace, q.info.Name)
		if err != nil {
			return nil, err
		}
		if expected != 0 && expected != cur.Rev {
			return nil, conflict(q)
		}
		obj, err := next(cur.Obj.DeepCopyObject())
		if err != nil {
			return nil, err
		}
		e, err := s.writeUpdate(ctx, q, obj, cur, dry)
		if err == nil || !apierrors.IsConflict(err) || expected != 0 || attempt >= 16 {
			return e, err
		}
	}
}

func conflict(q *request) error {
	return apierrors.NewConflict(q.res.GVR().GroupResource(), q.info.Name,
		fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

// writeUpdate runs the update pipeline for obj replacing cur: server-owned
// fields, the status split, generation, defaults, admission, validation,
// then a compare-and-swap write. A no-op update writes nothing.
func (s *Server) writeUpdate(ctx context.Context, q *request, obj runtime.Object, cur *storage.Entry, dry bool) (*storage.Entry, error) {
	old := cur.Obj
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	oldAcc, _ := meta.Accessor(old)
	if uid := acc.GetUID(); uid != "" && uid != oldAcc.GetUID() {
		return nil, apierrors.NewConflict(q.res.GVR().GroupResource(), q.info.Name,
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, oldAcc.GetUID()))
	}
	if csr, ok := csrForUpdate(q.info.Subresource, obj, old); ok {
		obj = csr
		acc, _ = meta.Accessor(obj)
	} else if pod, ok := podForSubresourceUpdate(q.info.Subresource, obj, old); ok {
		obj = pod // podsubresources.go
		acc, _ = meta.Accessor(obj)
	} else if q.info.Subresource == "status" {
		obj = statusUpdate(q.res, obj, old)
		acc, _ = meta.Accessor(obj)
	} else if q.res.Status {
		copyStatus(obj, old)
	}
	acc.SetUID(oldAcc.GetUID())
	acc.SetCreationTimestamp(oldAcc.GetCreationTimestamp())
	acc.SetDeletionTimestamp(oldAcc.GetDeletionTimestamp())
	acc.SetDeletionGracePeriodSeconds(oldAcc.GetDeletionGracePeriodSeconds())
	acc.SetGeneration(oldAcc.GetGeneration())
	if q.res.Generation && !specEqual(obj, old) {
		acc.SetGeneration(oldAcc.GetGeneration() + 1)
	}
	acc.SetResourceVersion(oldAcc.GetResourceVersion())
	if (q.info.Subresource == "" || podSpecSubresources[q.info.Subresource]) && q.res.Default != nil {
		q.res.Default(obj)
	}
	obj = s.trackUpdate(q, old, obj)
	acc, _ = meta.Accessor(obj)
	if err := s.admit(ctx, q, OpUpdate, obj, old, dry, phaseMutating); err != nil {
		s.release(ctx, q, obj, old)
		return nil, err
	}
	if q.res.ValidateUpdate != nil {
		if errs := append(validateUpdate(q, obj, old), validateCSRConditions(obj, old)...); len(errs) > 0 {
			s.release(ctx, q, obj, old)
			return nil, apierrors.NewInvalid(q.res.GVK().GroupKind(), acc.GetName(), errs)
		}
	}
	if err := s.admit(ctx, q, OpUpdate, obj, old, dry, phaseValidating); err != nil {
		s.release(ctx, q, obj, old)
		return nil, err
	}
	if sameObject(obj, old) {
		return cur, nil
	}
	if dry {
		s.release(ctx, q, obj, old)
		return entryOf(obj)
	}
	var e *storage.Entry
	if acc.GetDeletionTimestamp() != nil && len(acc.GetFinalizers()) == 0 && graceDone(acc.GetDeletionGracePeriodSeconds()) && !namespacePending(obj) {
		// The last finalizer is gone from an object being deleted: delete it.
		if e, err = s.st.Delete(ctx, q.res, acc.GetNamespace(), acc.GetName(), cur.Rev); err == nil {
			s.release(ctx, q, old, nil)
			s.release(ctx, q, obj, nil)
		}
	} else if e, err = s.st.Update(ctx, q.res, obj, cur.Rev); err == nil {
		s.release(ctx, q, old, obj)
	}
	if err != nil {
		s.release(ctx, q, obj, old)
	}
	return e, err
}

func graceDone(grace *int64) bool { return grace == nil || *grace == 0 }

// namespacePending: a namespace also waits for its spec finalizers (the
// namespace controller's), removed only through /finalize.
func namespacePending(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
}

// sameObject reports whether an update changes nothing; such updates are
// not written, so they cost no revision and wake no watcher.
func sameObject(a, b runtime.Object) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
