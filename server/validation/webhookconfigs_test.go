package validation

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func validWebhookConfig() *admissionregistrationv1.ValidatingWebhookConfiguration {
	url := "https://webhook.example.com/validate"
	none := admissionregistrationv1.SideEffectClassNone
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps", "pods/status"}}}},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1", "v1beta1"},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "prod", Expression: "object.metadata.namespace == 'production'"}},
		}}}
}

func TestValidate_WebhookConfiguration_UpstreamRules(t *testing.T) {
	cases := []struct {
		name    string
		change  func(c *admissionregistrationv1.ValidatingWebhookConfiguration)
		wantErr string // field path and message fragment; empty: valid
	}{
		{"valid", func(*admissionregistrationv1.ValidatingWebhookConfiguration) {}, ""},
		{"name with two segments", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { c.Webhooks[0].Name = "example.com" },
			"webhooks[0].name: Invalid value: \"example.com\": should be a domain with at least three segments separated by dots"},
		{"duplicate names", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks = append(c.Webhooks, c.Webhooks[0])
		}, "webhooks[1].name: Duplicate value"},
		{"missing sideEffects", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { c.Webhooks[0].SideEffects = nil },
			"webhooks[0].sideEffects: Required value"},
		{"no review versions", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].AdmissionReviewVersions = nil
		},
			"webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"},
		{"http URL", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			u := "http://webhook.example.com"
			c.Webhooks[0].ClientConfig.URL = &u
		}, "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme"},
		{"both URL and service", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}
		}, "webhooks[0].clientConfig: Required value: exactly one of url or service is required"},
		{"star with other operations", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{"*", "CREATE"}
		}, "webhooks[0].rules[0].operations: Invalid value"},
		{"timeout over 30s", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			t := int32(31)
			c.Webhooks[0].TimeoutSeconds = &t
		}, "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"},
		{"match condition that does not compile", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].MatchConditions[0].Expression = "... [] bad expression"
		}, "webhooks[0].matchConditions[0].expression: Invalid value: \"... [] bad expression\": compilation failed"},
		{"match condition of another type", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].MatchConditions[0].Expression = "'a string'"
		}, "webhooks[0].matchConditions[0].expression: Invalid value: \"'a string'\": must evaluate to bool"},
		{"match condition without name", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].MatchConditions[0].Name = ""
		},
			"webhooks[0].matchConditions[0].name: Required value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validWebhookConfig()
			tc.change(c)
			errs := Validate(c)
			if tc.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("errors = %v, want none", errs)
				}
				return
			}
			if !strings.Contains(errs.ToAggregate().Error(), tc.wantErr) {
				t.Fatalf("errors = %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}

func TestValidate_MutatingWebhookConfiguration_ReinvocationPolicy(t *testing.T) {
	url := "https://webhook.example.com/mutate"
	none := admissionregistrationv1.SideEffectClassNone
	bad := admissionregistrationv1.ReinvocationPolicyType("Always")
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: &bad}}}
	if errs := Validate(c); !strings.Contains(errs.ToAggregate().Error(), "webhooks[0].reinvocationPolicy: Unsupported value") {
		t.Fatalf("errors = %v", errs)
	}
}
