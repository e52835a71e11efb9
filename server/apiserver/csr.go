package apiserver

import (
	"context"
	"maps"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/auth"
)

// CertificateSigningRequests split their writes three ways, as upstream's
// strategies do: the main resource may change only metadata, /status only
// the status without the approval, and /approval only the conditions. Were
// they all plain status writes, an approval would be lost (the status is
// restored on main writes) and anyone allowed /status could approve.

// csrForUpdate returns what a write to subresource sub of a CSR stores,
// built from the stored old and the client's obj; ok is false for other
// kinds.
func csrForUpdate(sub string, obj, old runtime.Object) (runtime.Object, bool) {
	n, ok := obj.(*certificatesv1.CertificateSigningRequest)
	o, ok2 := old.(*certificatesv1.CertificateSigningRequest)
	if !ok || !ok2 {
		return obj, false
	}
	fresh := n.DeepCopy()
	fresh.Spec = *o.Spec.DeepCopy()
	switch sub {
	case "status":
		fresh.Status.Conditions = statusConditions(n.Status.Conditions, o.Status.Conditions)
	case "approval":
		// Of the status only the conditions change; metadata is taken from
		// the request, as upstream's approval strategy does.
		conds := fresh.Status.Conditions
		fresh.Status = *o.Status.DeepCopy()
		fresh.Status.Conditions = conds
	default:
		fresh.Status = *o.Status.DeepCopy()
	}
	stampConditions(fresh, o)
	return fresh, true
}

// statusConditions are the conditions a /status write stores: the
// request's, in its order, with the stored Approved and Denied conditions
// kept in their places, as upstream's status strategy keeps them. A write
// that adds or removes approval conditions keeps the request's others and
// the stored approvals after them (upstream refuses it in validation).
func statusConditions(req, stored []certificatesv1.CertificateSigningRequestCondition) []certificatesv1.CertificateSigningRequestCondition {
	inPlace := true
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
		if len(conditionIndices(req, t)) != len(conditionIndices(stored, t)) {
			inPlace = false
		}
	}
	out := append([]certificatesv1.CertificateSigningRequestCondition(nil), req...)
	if inPlace {
		for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
			old := conditionIndices(stored, t)
			for i, at := range conditionIndices(out, t) {
				out[at] = stored[old[i]]
			}
		}
		return out
	}
	out = out[:0]
	for _, c := range req {
		if !isApproval(c.Type) {
			out = append(out, c)
		}
	}
	for _, c := range stored {
		if isApproval(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

func conditionIndices(conds []certificatesv1.CertificateSigningRequestCondition, t certificatesv1.RequestConditionType) []int {
	var at []int
	for i, c := range conds {
		if c.Type == t {
			at = append(at, i)
		}
	}
	return at
}

func isApproval(t certificatesv1.RequestConditionType) bool {
	return t == certificatesv1.CertificateApproved || t == certificatesv1.CertificateDenied
}

// stampConditions fills the times a client left out: lastUpdateTime now,
// lastTransitionTime kept from the same condition before, else now.
func stampConditions(n, o *certificatesv1.CertificateSigningRequest) {
	now := metav1.Now()
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		if c.Status == "" {
			c.Status = corev1.ConditionTrue
		}
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = now
		}
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		c.LastTransitionTime = now
		for _, oc := range o.Status.Conditions {
			if oc.Type == c.Type && oc.Status == c.Status && !oc.LastTransitionTime.IsZero() {
				c.LastTransitionTime = oc.LastTransitionTime
			}
		}
	}
}

// validateCSRConditions refuses what upstream refuses on any CSR update: a
// request both approved and denied, an approval, denial or failure taken
// back, and a certificate changed once issued.
func validateCSRConditions(obj, old runtime.Object) field.ErrorList {
	n, ok := obj.(*certificatesv1.CertificateSigningRequest)
	o, ok2 := old.(*certificatesv1.CertificateSigningRequest)
	if !ok || !ok2 {
		return nil
	}
	path := field.NewPath("status", "conditions")
	has := func(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
		return slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
			return c.Type == t && c.Status == corev1.ConditionTrue
		})
	}
	var errs field.ErrorList
	if has(n, certificatesv1.CertificateApproved) && has(n, certificatesv1.CertificateDenied) {
		errs = append(errs, field.Invalid(path, certificatesv1.CertificateDenied, "Approved and Denied conditions are mutually exclusive"))
	}
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if has(o, t) && !has(n, t) {
			errs = append(errs, field.Forbidden(path, "updates may not remove a condition of type "+string(t)))
		}
	}
	if len(o.Status.Certificate) > 0 && string(o.Status.Certificate) != string(n.Status.Certificate) {
		errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
	}
	return errs
}

// stampCSRRequester records who asks for a certificate. Clients cannot set
// it: approvers trust it (a node may renew its own client certificate).
func stampCSRRequester(ctx context.Context, obj runtime.Object) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return
	}
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	u := auth.UserFrom(ctx)
	if u == nil {
		return
	}
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups = u.Name, u.UID, slices.Clone(u.Groups)
	for k, v := range maps.All(u.Extra) {
		if csr.Spec.Extra == nil {
			csr.Spec.Extra = map[string]certificatesv1.ExtraValue{}
		}
		csr.Spec.Extra[k] = slices.Clone(v)
	}
}
