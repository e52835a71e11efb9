package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/podcondition"
	"skiff/server/storage"
)

// maxDisruptedPods bounds a budget's record of evictions the disruption
// controller has not yet seen, as upstream: past it, evictions stop until
// the controller catches up.
const maxDisruptedPods = 2000

// evict deletes a pod through the eviction subresource, unless that would
// break the PodDisruptionBudget covering it (upstream's eviction REST).
func (s *Server) evict(q *request) {
	body, err := s.readBody(q.w, q.r)
	var ev policyv1.Eviction
	if err == nil && len(body) > 0 {
		err = s.decodeBody(q.w, q.r, body, &ev, validationIgnore)
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	opts := metav1.DeleteOptions{}
	if ev.DeleteOptions != nil {
		opts = *ev.DeleteOptions
	}
	ctx := q.r.Context()
	e, err := s.st.Get(ctx, q.res, q.info.Namespace, q.info.Name)
	if err == nil {
		if pod, ok := e.Obj.(*corev1.Pod); ok && !canIgnoreBudget(pod) {
			err = s.takeDisruption(ctx, pod, len(opts.DryRun) > 0)
		}
	}
	if err == nil && len(opts.DryRun) == 0 {
		opts, err = s.markEvicted(ctx, q, opts)
	}
	if err == nil {
		_, _, err = s.deleteObject(ctx, q, q.info.Namespace, q.info.Name, opts)
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	writeJSON(q.w, q.r, http.StatusCreated, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

// markEvicted gives the pod the DisruptionTarget condition before it is
// deleted, as upstream's eviction does, so that its owner (a Job's pod
// failure policy) can tell an eviction from a failure. The deletion's
// preconditions are checked against the pod first, and a resourceVersion
// precondition is moved on to the version this write made.
func (s *Server) markEvicted(ctx context.Context, q *request, opts metav1.DeleteOptions) (metav1.DeleteOptions, error) {
	pre := opts.Preconditions
	e, err := s.st.GuaranteedUpdate(ctx, q.res, q.info.Namespace, q.info.Name, func(cur runtime.Object) (runtime.Object, error) {
		pod, ok := cur.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		if pre != nil {
			if pre.UID != nil && *pre.UID != "" && *pre.UID != pod.UID {
				return nil, apierrors.NewConflict(corev1.Resource("pods"), pod.Name,
					fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *pre.UID, pod.UID))
			}
			if pre.ResourceVersion != nil && *pre.ResourceVersion != "" && *pre.ResourceVersion != pod.ResourceVersion {
				return nil, apierrors.NewConflict(corev1.Resource("pods"), pod.Name,
					fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *pre.ResourceVersion, pod.ResourceVersion))
			}
		}
		if !setEvictionCondition(&pod.Status, metav1.Now()) {
			return nil, nil
		}
		return pod, nil
	})
	if err != nil {
		return opts, err
	}
	if pre != nil && pre.ResourceVersion != nil && *pre.ResourceVersion != "" {
		if acc, aerr := meta.Accessor(e.Obj); aerr == nil {
			pre = pre.DeepCopy()
			rv := acc.GetResourceVersion()
			pre.ResourceVersion = &rv
			opts.Preconditions = pre
		}
	}
	return opts, nil
}

// setEvictionCondition sets DisruptionTarget=True with the eviction's
// reason (upstream's UpdatePodCondition: the transition time moves only
// when the status does), reporting whether anything changed.
func setEvictionCondition(st *corev1.PodStatus, now metav1.Time) bool {
	return podcondition.Set(st, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}, now)
}

// canIgnoreBudget: pods that are done, not yet running or already going
// count for no budget, so evicting them needs none.
func canIgnoreBudget(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// takeDisruption finds the budget covering pod and spends one of its
// allowed disruptions, refusing with 429 when none is left.
func (s *Server) takeDisruption(ctx context.Context, pod *corev1.Pod, dryRun bool) error {
	pdbRes, ok := s.reg.Lookup(policyv1.GroupName, "v1", "poddisruptionbudgets")
	if !ok {
		return nil
	}
	if err := s.st.Cache().WaitCurrent(ctx); err != nil {
		return err
	}
	entries, _, err := s.st.Cache().List(pdbRes, storage.Predicate{Namespace: pod.Namespace})
	if err != nil {
		return err
	}
	var matching []*policyv1.PodDisruptionBudget
	for _, e := range entries {
		pdb := e.Obj.(*policyv1.PodDisruptionBudget)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		// A nil selector selects nothing; an empty one selects every pod
		// of the namespace (policy/v1).
		if err != nil || pdb.Spec.Selector == nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		matching = append(matching, pdb)
	}
	switch {
	case len(matching) == 0:
		return nil
	case len(matching) > 1:
		return apierrors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support"))
	}
	pdb := matching[0]
	if !podReady(pod) {
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return nil
		}
		// IfHealthyBudget: an unhealthy pod may go while the budget is met
		// without it.
		if pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
			return nil
		}
	}
	spend := func(cur runtime.Object) (runtime.Object, error) {
		pdb := cur.(*policyv1.PodDisruptionBudget)
		if err := checkBudget(pdb); err != nil {
			return nil, err
		}
		pdb.Status.DisruptionsAllowed--
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		pdb.Status.DisruptedPods[pod.Name] = metav1.NewTime(time.Now())
		return pdb, nil
	}
	if dryRun {
		_, err := spend(pdb.DeepCopy())
		return err
	}
	_, err = s.st.GuaranteedUpdate(ctx, pdbRes, pdb.Namespace, pdb.Name, spend)
	return err
}

// checkBudget says whether pdb allows one more disruption now, with
// upstream's errors: 429 (try again later) while it is full or not yet
// processed, 403 when it is in a state no retry will fix.
func checkBudget(pdb *policyv1.PodDisruptionBudget) error {
	const msg = "Cannot evict pod as it would violate the pod's disruption budget."
	tooMany := func(retryAfter int, cause string) error {
		err := apierrors.NewTooManyRequests(msg, retryAfter)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
		return err
	}
	switch {
	case pdb.Status.ObservedGeneration < pdb.Generation:
		return tooMany(10, fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name))
	case pdb.Status.DisruptionsAllowed < 0:
		return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("pdb disruptions allowed is negative"))
	case len(pdb.Status.DisruptedPods) > maxDisruptedPods:
		return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	case pdb.Status.DisruptionsAllowed == 0:
		return tooMany(0, fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy))
	}
	return nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
