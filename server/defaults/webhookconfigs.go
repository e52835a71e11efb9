package defaults

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// applyWebhookConfigs sets upstream's v1 defaults on Mutating- and
// ValidatingWebhookConfigurations (failurePolicy Fail, matchPolicy
// Equivalent, empty selectors, a 10s timeout, rule scope "*", service
// port 443, reinvocationPolicy Never); it reports whether obj is one.
func applyWebhookConfigs(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		if o == nil {
			return true
		}
		for i := range o.Webhooks {
			w := &o.Webhooks[i]
			setWebhookCommon(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules, &w.ClientConfig)
			if w.ReinvocationPolicy == nil {
				p := admissionregistrationv1.NeverReinvocationPolicy
				w.ReinvocationPolicy = &p
			}
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		if o == nil {
			return true
		}
		for i := range o.Webhooks {
			w := &o.Webhooks[i]
			setWebhookCommon(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules, &w.ClientConfig)
		}
	default:
		return false
	}
	return true
}

func setWebhookCommon(fp **admissionregistrationv1.FailurePolicyType, mp **admissionregistrationv1.MatchPolicyType, ns, objSel **metav1.LabelSelector,
	timeout **int32, rules []admissionregistrationv1.RuleWithOperations, cc *admissionregistrationv1.WebhookClientConfig) {
	if *fp == nil {
		v := admissionregistrationv1.Fail
		*fp = &v
	}
	if *mp == nil {
		v := admissionregistrationv1.Equivalent
		*mp = &v
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
	}
	if *objSel == nil {
		*objSel = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		v := int32(10)
		*timeout = &v
	}
	for i := range rules {
		if rules[i].Scope == nil {
			v := admissionregistrationv1.AllScopes
			rules[i].Scope = &v
		}
	}
	if s := cc.Service; s != nil && s.Port == nil {
		v := int32(443)
		s.Port = &v
	}
}
