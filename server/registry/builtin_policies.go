package registry

import admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

// Policies returns the rows of admissionregistration.k8s.io/v1
// ValidatingAdmissionPolicy (cluster-scoped, generation counted, a status
// subresource whose writes keep the metadata as upstream's status
// strategy), ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy and
// MutatingAdmissionPolicyBinding, which the policy admission plugins
// (server/admission/policy) enforce. Upstream gives them
// the api-extensions category and no short names.
func Policies(h Hooks) []*Resource {
	const group = "admissionregistration.k8s.io"
	rows := []*Resource{
		with(row[admissionregistrationv1.ValidatingAdmissionPolicy, admissionregistrationv1.ValidatingAdmissionPolicyList](group, "v1", "validatingadmissionpolicies", "validatingadmissionpolicy", "ValidatingAdmissionPolicy", clusterScope),
			statusOnly, statusKeepsMeta, generation, categories("api-extensions")),
		with(row[admissionregistrationv1.ValidatingAdmissionPolicyBinding, admissionregistrationv1.ValidatingAdmissionPolicyBindingList](group, "v1", "validatingadmissionpolicybindings", "validatingadmissionpolicybinding", "ValidatingAdmissionPolicyBinding", clusterScope),
			generation, categories("api-extensions")),
		// MutatingAdmissionPolicy (v1 since 1.36) has no status.
		with(row[admissionregistrationv1.MutatingAdmissionPolicy, admissionregistrationv1.MutatingAdmissionPolicyList](group, "v1", "mutatingadmissionpolicies", "mutatingadmissionpolicy", "MutatingAdmissionPolicy", clusterScope),
			generation, categories("api-extensions")),
		with(row[admissionregistrationv1.MutatingAdmissionPolicyBinding, admissionregistrationv1.MutatingAdmissionPolicyBindingList](group, "v1", "mutatingadmissionpolicybindings", "mutatingadmissionpolicybinding", "MutatingAdmissionPolicyBinding", clusterScope),
			generation, categories("api-extensions")),
	}
	for _, r := range rows {
		r.Default, r.Validate, r.ValidateUpdate = h.Default, h.Validate, h.ValidateUpdate
		r.ValidateSubresource = h.ValidateSubresource
	}
	return rows
}
