package crd

import (
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// acceptNames decides the names a CRD may serve under, given the names the
// other CRDs of its group have been granted, as upstream's naming
// controller does: a name already granted to another CRD is refused, a
// name the CRD already holds is kept.
func acceptNames(in *apiextensionsv1.CustomResourceDefinition, others []*apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition) {
	resources, kinds := map[string]bool{}, map[string]bool{}
	for _, o := range others {
		if o.Name == in.Name || o.Spec.Group != in.Spec.Group {
			continue
		}
		n := o.Status.AcceptedNames
		resources[n.Plural], resources[n.Singular] = true, true
		for _, s := range n.ShortNames {
			resources[s] = true
		}
		kinds[n.Kind], kinds[n.ListKind] = true, true
	}
	delete(resources, "")
	delete(kinds, "")
	cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionUnknown}
	fail := func(reason string, err error) {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionFalse, reason, err.Error()
	}
	want, have := in.Spec.Names, in.Status.AcceptedNames
	out := have
	if err := freshOrHeld(want.Plural, have.Plural, resources); err != nil {
		fail("PluralConflict", err)
	} else {
		out.Plural = want.Plural
	}
	if err := freshOrHeld(want.Singular, have.Singular, resources); err != nil {
		fail("SingularConflict", err)
	} else {
		out.Singular = want.Singular
	}
	if !slices.Equal(want.ShortNames, have.ShortNames) {
		var bad error
		for _, s := range want.ShortNames {
			if slices.Contains(have.ShortNames, s) {
				continue
			}
			if err := freshOrHeld(s, "", resources); err != nil {
				bad = err
			}
		}
		if bad != nil {
			fail("ShortNamesConflict", bad)
		} else {
			out.ShortNames = want.ShortNames
		}
	}
	if err := freshOrHeld(want.Kind, have.Kind, kinds); err != nil {
		fail("KindConflict", err)
	} else {
		out.Kind = want.Kind
	}
	if err := freshOrHeld(want.ListKind, have.ListKind, kinds); err != nil {
		fail("ListKindConflict", err)
	} else {
		out.ListKind = want.ListKind
	}
	out.Categories = want.Categories
	if cond.Status == apiextensionsv1.ConditionUnknown {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found"
	}
	return out, cond
}

func freshOrHeld(want, have string, used map[string]bool) error {
	if want == have || !used[want] {
		return nil
	}
	return fmt.Errorf("%q is already in use", want)
}

// condition returns the CRD's condition of a type (nil if absent).
func condition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

// isTrue reports whether the CRD has condition t with status True.
func isTrue(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	c := condition(crd, t)
	return c != nil && c.Status == apiextensionsv1.ConditionTrue
}

// setCondition sets a condition, keeping its transition time unless its
// status changes.
func setCondition(crd *apiextensionsv1.CustomResourceDefinition, c apiextensionsv1.CustomResourceDefinitionCondition) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	if old := condition(crd, c.Type); old != nil {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
		*old = c
		return
	}
	c.LastTransitionTime = now
	crd.Status.Conditions = append(crd.Status.Conditions, c)
}
