package webhook

import (
	"context"
	"encoding/json"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/apiserver"
	"skiff/server/audit"
)

// laterPlugin is a reinvocable plugin after the webhooks that changes the
// object on the first pass, as a MutatingAdmissionPolicy reinvoked there
// or another plugin would.
type laterPlugin struct{ mutate func(cm *corev1.ConfigMap) }

func (laterPlugin) Reinvocable() {}

func (p laterPlugin) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	if p.mutate == nil || a.Reinvocation.IsReinvoke() {
		return nil
	}
	p.mutate(a.Object.(*corev1.ConfigMap))
	a.Reinvocation.SetShouldReinvoke()
	return nil
}

func addLabelB(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"b": "yes"} }

func TestMutating_ReinvocationPass_CallsWhatUpstreamCalls(t *testing.T) {
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	never := admissionregistrationv1.NeverReinvocationPolicy
	type hookSpec struct {
		name     string
		policy   admissionregistrationv1.ReinvocationPolicyType
		patch    string            // its JSON patch ("" answers allowed, unchanged)
		selector map[string]string // object selector
	}
	cases := []struct {
		name      string
		hooks     []hookSpec // one configuration each, called in this order
		later     func(cm *corev1.ConfigMap)
		wantCalls map[string]int
	}{
		{name: "IfNeeded webhook is called again after a later plugin changed the object",
			hooks: []hookSpec{{name: "w", policy: ifNeeded}}, later: addLabelB, wantCalls: map[string]int{"w": 2}},
		{name: "Never webhook is not called again",
			hooks: []hookSpec{{name: "w", policy: never}}, later: addLabelB, wantCalls: map[string]int{"w": 1}},
		{name: "nothing changed: called once",
			hooks: []hookSpec{{name: "w", policy: ifNeeded}}, wantCalls: map[string]int{"w": 1}},
		{name: "its own change does not call it again",
			hooks: []hookSpec{{name: "w", policy: ifNeeded, patch: `[{"op":"add","path":"/data/w","value":"1"}]`}}, wantCalls: map[string]int{"w": 1}},
		{name: "IfNeeded webhook is called again after a later webhook's patch, without other plugins",
			hooks:     []hookSpec{{name: "a", policy: ifNeeded}, {name: "b", policy: never, patch: `[{"op":"add","path":"/data/b","value":"2"}]`}},
			wantCalls: map[string]int{"a": 2, "b": 1}},
		{name: "a webhook first matched on the reinvocation pass is not called",
			hooks: []hookSpec{{name: "a", policy: ifNeeded}, {name: "b", policy: ifNeeded, selector: map[string]string{"b": "yes"}}},
			later: addLabelB, wantCalls: map[string]int{"a": 2, "b": 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := testRegistry(t)
			src := &fakeSource{}
			servers := map[string]*reviewServer{}
			for i, hs := range tc.hooks {
				answer := allow
				if hs.patch != "" {
					answer = jsonPatch(hs.patch)
				}
				rs := newReviewServer(t, answer)
				servers[hs.name] = rs
				policy := hs.policy
				h := admissionregistrationv1.MutatingWebhook{Name: hs.name + ".example.com", ClientConfig: rs.clientConfig(""), SideEffects: &none,
					ReinvocationPolicy: &policy, AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}}
				if hs.selector != nil {
					h.ObjectSelector = &metav1.LabelSelector{MatchLabels: hs.selector}
				}
				src.mutating = append(src.mutating, mutatingConfig(string(rune('a'+i))+"-config", h))
			}
			chain := []apiserver.Admitter{NewMutating(newConfig(src, reg, nil)), laterPlugin{tc.later}}
			cm := configMap()
			if err := apiserver.AdmitMutating(context.Background(), chain, createCM(t, reg, cm)); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.wantCalls {
				reqs := servers[name].requests()
				if len(reqs) != want {
					t.Errorf("webhook %s called %d times, want %d", name, len(reqs), want)
					continue
				}
				if want == 2 && tc.later != nil {
					var seen corev1.ConfigMap
					if err := json.Unmarshal(reqs[1].Object.Raw, &seen); err != nil || seen.Labels["b"] != "yes" {
						t.Errorf("webhook %s was called again with %s, want the later plugin's change", name, reqs[1].Object.Raw)
					}
				}
			}
		})
	}
}

func TestMutating_ReinvocationPass_AuditedAsRoundOne(t *testing.T) {
	reg := testRegistry(t)
	rs := newReviewServer(t, allow)
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	src := &fakeSource{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("cfg",
		admissionregistrationv1.MutatingWebhook{Name: "w.example.com", ClientConfig: rs.clientConfig(""), SideEffects: &none,
			ReinvocationPolicy: &ifNeeded, AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}})}}
	ctx, rec := audited(audit.LevelMetadata)
	chain := []apiserver.Admitter{NewMutating(newConfig(src, reg, nil)), laterPlugin{addLabelB}}
	if err := apiserver.AdmitMutating(ctx, chain, createCM(t, reg, configMap())); err != nil {
		t.Fatal(err)
	}
	got := rec.Event().Annotations
	for _, k := range []string{"mutation.webhook.admission.k8s.io/round_0_index_0", "mutation.webhook.admission.k8s.io/round_1_index_0"} {
		if want := `{"configuration":"cfg","webhook":"w.example.com","mutated":false}`; got[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, got[k], want)
		}
	}
}

func TestMutating_OutsideTheChain_OnePass(t *testing.T) {
	// Admitted alone (no Reinvocation), the plugin has no second round of
	// its own: upstream's webhooks are reinvoked by the chain only.
	reg := testRegistry(t)
	first := newReviewServer(t, allow)
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	src := &fakeSource{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
		mutatingConfig("a", admissionregistrationv1.MutatingWebhook{Name: "a.example.com", ClientConfig: first.clientConfig(""), SideEffects: &none,
			ReinvocationPolicy: &ifNeeded, AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}}),
		mutatingConfig("b", admissionregistrationv1.MutatingWebhook{Name: "b.example.com", ClientConfig: newReviewServer(t, jsonPatch(`[{"op":"add","path":"/data/b","value":"2"}]`)).clientConfig(""),
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}}),
	}}
	if err := NewMutating(newConfig(src, reg, nil)).Admit(context.Background(), createCM(t, reg, configMap())); err != nil {
		t.Fatal(err)
	}
	if n := len(first.requests()); n != 1 {
		t.Errorf("a.example.com called %d times, want 1", n)
	}
}
