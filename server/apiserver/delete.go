package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/storage"
)

// deleteOptions reads DeleteOptions from the body (kubectl sends them
// there) or from query parameters.
func (s *Server) deleteOptions(q *request) (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	body, err := s.readBody(q.w, q.r)
	if err != nil {
		return opts, err
	}
	if len(body) > 0 {
		if err := s.decodeBody(q.w, q.r, body, &opts, validationIgnore); err != nil {
			return opts, err
		}
	}
	v := q.r.URL.Query()
	if g := v.Get("gracePeriodSeconds"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", g))
		}
		opts.GracePeriodSeconds = &n
	}
	if p := v.Get("propagationPolicy"); p != "" {
		pp := metav1.DeletionPropagation(p)
		opts.PropagationPolicy = &pp
	}
	if v.Get("orphanDependents") != "" {
		b := v.Get("orphanDependents") == "true"
		opts.OrphanDependents = &b
	}
	if _, ok := v["dryRun"]; ok {
		opts.DryRun = v["dryRun"]
	}
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationForeground, metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan:
		default:
			return opts, apierrors.NewBadRequest(fmt.Sprintf("propagationPolicy %q is not one of Foreground, Background, Orphan", *opts.PropagationPolicy))
		}
	}
	for _, d := range opts.DryRun {
		if d != metav1.DryRunAll {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("unsupported dryRun value %q", d))
		}
	}
	return opts, nil
}

func (s *Server) delete(q *request) {
	opts, err := s.deleteOptions(q)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	e, deleted, err := s.deleteObject(q.r.Context(), q, q.info.Namespace, q.info.Name, opts)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	if !deleted { // still there, with a deletionTimestamp: finalizers or a grace period
		writeObject(q.w, q.r, http.StatusOK, e.Obj, e.Raw)
		return
	}
	acc, _ := meta.Accessor(e.Obj)
	writeJSON(q.w, q.r, http.StatusOK, metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: acc.GetName(), Group: q.res.Group, Kind: q.res.Name, UID: acc.GetUID()},
	})
}

// deleteObject deletes one object. Objects with finalizers (including the
// foreground and orphan ones the propagation policy adds) and pods on a
// node with a grace period get a deletionTimestamp instead, and go when
// their finalizers are removed (or the kubelet deletes them with grace 0).
func (s *Server) deleteObject(ctx context.Context, q *request, namespace, name string, opts metav1.DeleteOptions) (*storage.Entry, bool, error) {
	dry := len(opts.DryRun) > 0
	for attempt := 0; ; attempt++ {
		cur, err := s.st.Get(ctx, q.res, namespace, name)
		if err != nil {
			return nil, false, err
		}
		acc, _ := meta.Accessor(cur.Obj)
		if err := checkPreconditions(q, acc, opts.Preconditions); err != nil {
			return nil, false, err
		}
		if err := s.admit(ctx, q, OpDelete, nil, cur.Obj, dry, phaseAll); err != nil {
			return nil, false, err
		}
		obj := cur.Obj.DeepCopyObject()
		if q.res.BeforeDelete != nil {
			q.res.BeforeDelete(obj)
		}
		oacc, _ := meta.Accessor(obj)
		if pending := markDeleting(obj, oacc, opts); pending {
			if dry || sameObject(obj, cur.Obj) {
				return cur, false, nil
			}
			e, err := s.st.Update(ctx, q.res, obj, cur.Rev)
			if apierrors.IsConflict(err) && attempt < 16 {
				continue
			}
			return e, false, err
		}
		if dry {
			return cur, true, nil
		}
		e, err := s.st.Delete(ctx, q.res, namespace, name, cur.Rev)
		if apierrors.IsConflict(err) && attempt < 16 {
			continue
		}
		if err == nil {
			s.release(ctx, q, cur.Obj, nil)
		}
		return e, err == nil, err
	}
}

func checkPreconditions(q *request, acc metav1.Object, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	gr := q.res.GVR().GroupResource()
	if p.UID != nil && *p.UID != acc.GetUID() {
		return apierrors.NewConflict(gr, acc.GetName(), fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, acc.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != acc.GetResourceVersion() {
		return apierrors.NewConflict(gr, acc.GetName(), fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, acc.GetResourceVersion()))
	}
	return nil
}

// markDeleting applies a delete to obj and reports whether the object must
// stay (with a deletionTimestamp) rather than go now.
func markDeleting(obj runtime.Object, acc metav1.Object, opts metav1.DeleteOptions) bool {
	fin := acc.GetFinalizers()
	policy := metav1.DeletePropagationBackground
	if opts.PropagationPolicy != nil {
		policy = *opts.PropagationPolicy
	} else if opts.OrphanDependents != nil && *opts.OrphanDependents {
		policy = metav1.DeletePropagationOrphan
	}
	switch policy {
	case metav1.DeletePropagationForeground:
		fin = withFinalizer(without(fin, metav1.FinalizerOrphanDependents), metav1.FinalizerDeleteDependents)
	case metav1.DeletePropagationOrphan:
		fin = withFinalizer(without(fin, metav1.FinalizerDeleteDependents), metav1.FinalizerOrphanDependents)
	}
	acc.SetFinalizers(fin)
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		// A namespace waits for its spec finalizers, which the namespace
		// controller removes once the namespace is empty.
		ns.Status.Phase = corev1.NamespaceTerminating
		if acc.GetDeletionTimestamp() == nil {
			setDeleting(acc, 0)
		}
		return true
	}
	grace := podGrace(obj, opts)
	if len(fin) == 0 && grace == 0 {
		return false
	}
	if acc.GetDeletionTimestamp() == nil || grace < deref(acc.GetDeletionGracePeriodSeconds()) {
		setDeleting(acc, grace)
	}
	return true
}

func withFinalizer(fin []string, f string) []string {
	if slices.Contains(fin, f) {
		return fin
	}
	return append(fin, f)
}

func without(fin []string, f string) []string {
	return slices.DeleteFunc(slices.Clone(fin), func(s string) bool { return s == f })
}

func setDeleting(acc metav1.Object, grace int64) {
	// The first deletionTimestamp changes what controllers of the object
	// may do, so it counts as a new generation (as upstream's BeforeDelete
	// and markAsDeleting do).
	if acc.GetDeletionTimestamp() == nil && acc.GetGeneration() > 0 {
		acc.SetGeneration(acc.GetGeneration() + 1)
	}
	now := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second).Truncate(time.Second))
	acc.SetDeletionTimestamp(&now)
	acc.SetDeletionGracePeriodSeconds(&grace)
}

func deref(p *int64) int64 {
	if p == nil {
		return 1 << 62
	}
	return *p
}

// podGrace is the graceful-deletion period: only pods that a kubelet runs
// get one; everything else is deleted at once.
func podGrace(obj runtime.Object, opts metav1.DeleteOptions) int64 {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		return max(*opts.GracePeriodSeconds, 0)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

func (s *Server) deleteCollection(q *request) {
	opts, err := s.deleteOptions(q)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	lo, err := s.parseListOptions(q)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	ctx := q.r.Context()
	if err := s.st.Cache().WaitCurrent(ctx); err != nil {
		writeError(q.w, q.r, err)
		return
	}
	entries, _, err := s.st.Cache().List(q.res, lo.pred)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	var deleted []*storage.Entry
	for _, e := range entries {
		acc, _ := meta.Accessor(e.Obj)
		d, _, err := s.deleteObject(ctx, q, acc.GetNamespace(), acc.GetName(), opts)
		if err != nil && !apierrors.IsNotFound(err) {
			writeError(q.w, q.r, err)
			return
		}
		if d != nil {
			deleted = append(deleted, d)
		}
	}
	s.writeEntries(q, deleted, s.st.Cache().Revision(), "", nil, false)
}
