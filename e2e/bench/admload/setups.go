package main

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// setup is one admission configuration the creates are timed under.
type setup struct {
	Key   string `json:"key"`
	Title string `json:"title"`
	// What is in force: the mutating webhook, the validating webhook, the
	// ValidatingAdmissionPolicy, a ResourceQuota in the namespace.
	Mutating   bool `json:"mutating_webhook"`
	Validating bool `json:"validating_webhook"`
	VAP        bool `json:"validating_admission_policy"`
	Quota      bool `json:"resource_quota"`
}

// allSetups are the configurations, the baseline first.
func allSetups() []setup {
	return []setup{
		{Key: "none", Title: "no webhook"},
		{Key: "validating", Title: "1 validating webhook", Validating: true},
		{Key: "mut+val", Title: "1 mutating + 1 validating webhook", Mutating: true, Validating: true},
		{Key: "vap", Title: "1 ValidatingAdmissionPolicy", VAP: true},
		{Key: "quota", Title: "ResourceQuota count/configmaps", Quota: true},
	}
}

// Names of the cluster objects the setups make.
const (
	mutatingName   = "admload-mutating"
	validatingName = "admload-validating"
	policyName     = "admload-vap"
	quotaName      = "admload-quota"
	quotaResource  = corev1.ResourceName("count/configmaps")
	// policyRule refuses a ConfigMap of 100 keys or more; the timed ones
	// have two, the probe bigKeys.
	policyRule = "!has(object.data) || object.data.size() < 100"
	bigKeys    = 100
)

// configMapRules match ConfigMap creates.
func configMapRules() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
}

func hookClient(h *hookServer, path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(h.URL + path), CABundle: h.CA}
}

// Both webhooks fail closed, so a webhook that cannot be reached shows as
// errors in the figures instead of as a fast, skipped call.
func validatingConfig(h *hookServer) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: validatingName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validate.admload.skiff.dev",
			ClientConfig:            hookClient(h, validatePath),
			Rules:                   configMapRules(),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
}

func mutatingConfig(h *hookServer) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: mutatingName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mutate.admload.skiff.dev",
			ClientConfig:            hookClient(h, mutatePath),
			Rules:                   configMapRules(),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
}

func policy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	rules := configMapRules()
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rules[0]}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: policyRule,
				Message:    fmt.Sprintf("a ConfigMap may hold fewer than %d keys", bigKeys),
			}},
		},
	}
}

func policyBinding() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}

func quotaObject(hard int64) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: quotaName},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{quotaResource: *resource.NewQuantity(hard, resource.DecimalSI)}},
	}
}

// applyCluster creates the cluster-wide objects of s (webhook
// configurations, policy and binding); the quota is per namespace and
// made by the verification, which needs to set it up in steps.
func applyCluster(ctx context.Context, cs kubernetes.Interface, h *hookServer, s setup) error {
	ar := cs.AdmissionregistrationV1()
	if s.Mutating {
		if _, err := ar.MutatingWebhookConfigurations().Create(ctx, mutatingConfig(h), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create MutatingWebhookConfiguration: %w", err)
		}
	}
	if s.Validating {
		if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, validatingConfig(h), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ValidatingWebhookConfiguration: %w", err)
		}
	}
	if s.VAP {
		if _, err := ar.ValidatingAdmissionPolicies().Create(ctx, policy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ValidatingAdmissionPolicy: %w", err)
		}
		if _, err := ar.ValidatingAdmissionPolicyBindings().Create(ctx, policyBinding(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ValidatingAdmissionPolicyBinding: %w", err)
		}
	}
	return nil
}

// removeCluster deletes every cluster-wide object any setup makes, so the
// next setup starts from none whatever ran before; absent ones are fine.
func removeCluster(ctx context.Context, cs kubernetes.Interface) error {
	ar := cs.AdmissionregistrationV1()
	var errs []error
	del := func(what string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s: %w", what, err))
		}
	}
	o := metav1.DeleteOptions{}
	del("MutatingWebhookConfiguration", ar.MutatingWebhookConfigurations().Delete(ctx, mutatingName, o))
	del("ValidatingWebhookConfiguration", ar.ValidatingWebhookConfigurations().Delete(ctx, validatingName, o))
	del("ValidatingAdmissionPolicyBinding", ar.ValidatingAdmissionPolicyBindings().Delete(ctx, policyName, o))
	del("ValidatingAdmissionPolicy", ar.ValidatingAdmissionPolicies().Delete(ctx, policyName, o))
	return errors.Join(errs...)
}
