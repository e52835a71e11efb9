package resourcequota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"skiff/server/apiserver"
	"skiff/server/quota"
)

// change is one quota's new status after a request is charged.
type change struct {
	old, updated *corev1.ResourceQuota
	delta        corev1.ResourceList
}

// check is upstream's CheckRequest: it finds the quotas that cover the
// object, refuses what breaks one of them, and returns the new usage of
// each quota the request adds to (an update is charged only what it adds
// over the old object, and only where the old object was covered too).
func check(quotas []*corev1.ResourceQuota, a apiserver.AdmissionAttributes, ev quota.Evaluator) ([]change, error) {
	var covering []*corev1.ResourceQuota
	for _, q := range quotas {
		ok, err := quota.Matches(ev, q, a.Object)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("error matching scopes of quota %s: %w", q.Name, err))
		}
		if !ok {
			continue
		}
		restricted := ev.MatchingResources(quota.Names(q.Status.Hard))
		if err := ev.Constraints(restricted, a.Object); err != nil {
			return nil, forbidden(a, fmt.Errorf("failed quota: %s: %w", q.Name, err))
		}
		if !hasUsage(q, restricted) {
			return nil, forbidden(a, fmt.Errorf("status unknown for quota: %s, resources: %s", q.Name, quota.PrettyPrintNames(restricted)))
		}
		covering = append(covering, q)
	}
	if len(covering) == 0 {
		return nil, nil
	}
	usage, err := ev.Usage(a.Object)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if neg := quota.Negative(usage); len(neg) > 0 {
		return nil, forbidden(a, fmt.Errorf("quota usage is negative for resource(s): %s", quota.PrettyPrintNames(neg)))
	}
	deltas := make([]corev1.ResourceList, len(covering))
	for i := range covering {
		deltas[i] = usage
	}
	if a.Op == apiserver.OpUpdate {
		if err := updateDeltas(a, ev, covering, usage, deltas); err != nil {
			return nil, err
		}
	}
	var out []change
	for i, q := range covering {
		delta := quota.RemoveZeros(deltas[i])
		if len(delta) == 0 {
			continue
		}
		requested := quota.Mask(delta, quota.Names(q.Status.Hard))
		used := quota.Add(q.Status.Used, requested)
		// A status write records what already happened (an expansion the
		// volume plugin made): it is charged, never refused.
		if a.Subresource != "status" {
			if ok, over := quota.LessThanOrEqual(quota.Mask(used, quota.Names(requested)), q.Status.Hard); !ok {
				return nil, forbidden(a, fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s",
					q.Name, quota.PrettyPrint(quota.Mask(requested, over)),
					quota.PrettyPrint(quota.Mask(q.Status.Used, over)), quota.PrettyPrint(quota.Mask(q.Status.Hard, over))))
			}
		}
		if quota.Equals(used, q.Status.Used) {
			continue
		}
		updated := q.DeepCopy()
		updated.Status.Used = used
		out = append(out, change{old: q, updated: updated, delta: requested})
	}
	return out, nil
}

// updateDeltas charges an update the growth over the old object for the
// quotas that covered the old object too; an old object without a
// resourceVersion was never stored, so it is charged in full.
func updateDeltas(a apiserver.AdmissionAttributes, ev quota.Evaluator, covering []*corev1.ResourceQuota, usage corev1.ResourceList, deltas []corev1.ResourceList) error {
	if a.Old == nil {
		return forbidden(a, fmt.Errorf("unable to get previous usage since prior version of object was not found"))
	}
	acc, err := meta.Accessor(a.Old)
	if err != nil || acc.GetResourceVersion() == "" {
		return nil
	}
	prev, err := ev.Usage(a.Old)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	grown := quota.SubtractWithNonNegativeResult(usage, prev)
	for i, q := range covering {
		ok, err := quota.Matches(ev, q, a.Old)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("error matching scopes of quota %s: %w", q.Name, err))
		}
		if ok {
			deltas[i] = grown
		}
	}
	return nil
}

// hasUsage: every hard limit among the resources has a usage: a quota the
// controller has not measured yet cannot admit anything it limits.
func hasUsage(q *corev1.ResourceQuota, resources []corev1.ResourceName) bool {
	for _, n := range resources {
		if _, limited := q.Status.Hard[n]; !limited {
			continue
		}
		if _, ok := q.Status.Used[n]; !ok {
			return false
		}
	}
	return true
}

// forbidden is upstream's admission.NewForbidden: 403 naming the object.
func forbidden(a apiserver.AdmissionAttributes, err error) error {
	name := ""
	if acc, aerr := meta.Accessor(a.Object); aerr == nil {
		name = acc.GetName()
	}
	gr := a.Resource.GVR().GroupResource()
	return apierrors.NewForbidden(gr, name, err)
}
