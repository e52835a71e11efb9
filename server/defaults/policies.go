package defaults

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// applyPolicies sets the defaults of the Validating- and
// MutatingAdmissionPolicies and their bindings as upstream's v1 defaulters: failure
// policy Fail; match resources Equivalent with everything-selectors;
// rules of every scope. It reports whether obj is one of them.
func applyPolicies(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		if o == nil {
			return true
		}
		if o.Spec.FailurePolicy == nil {
			p := admissionregistrationv1.Fail
			o.Spec.FailurePolicy = &p
		}
		setMatchResources(o.Spec.MatchConstraints)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		if o != nil {
			setMatchResources(o.Spec.MatchResources)
		}
	case *admissionregistrationv1.MutatingAdmissionPolicy:
		if o == nil {
			return true
		}
		if o.Spec.FailurePolicy == nil {
			p := admissionregistrationv1.Fail
			o.Spec.FailurePolicy = &p
		}
		setMatchResources(o.Spec.MatchConstraints)
	case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
		if o != nil {
			setMatchResources(o.Spec.MatchResources)
		}
	default:
		return false
	}
	return true
}

func setMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		p := admissionregistrationv1.Equivalent
		m.MatchPolicy = &p
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				s := admissionregistrationv1.AllScopes
				rules[i].Scope = &s
			}
		}
	}
}
