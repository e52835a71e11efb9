package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"skiff/server/audit"
)

// audited is a context whose request is audited at level.
func audited(level audit.Level) (context.Context, *audit.Recorder) {
	rec := audit.NewRecorder(audit.RequestConfig{Level: level}, nil, audit.Event{})
	return audit.WithRecorder(context.Background(), rec), rec
}

func TestMutating_AuditAnnotations_AsUpstream(t *testing.T) {
	reg := testRegistry(t)
	patching := newReviewServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		pt := admissionv1.PatchTypeJSONPatch
		return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt, Patch: []byte(`[{"op":"add","path":"/data/b","value":"2"}]`),
			AuditAnnotations: map[string]string{"decision": "patched", "bad key!": "dropped"}}
	})
	passing := newReviewServer(t, allow)
	closed := newReviewServer(t, allow)
	closedCC := closed.clientConfig("")
	closed.srv.Close()
	ignore := admissionregistrationv1.Ignore
	hook := func(name string, cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{Name: name, ClientConfig: cc, SideEffects: &none, FailurePolicy: &ignore,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}}
	}
	src := &fakeSource{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
		mutatingConfig("a-config", hook("patch.example.com", patching.clientConfig("")), hook("pass.example.com", passing.clientConfig(""))),
		mutatingConfig("b-config", hook("down.example.com", closedCC)),
	}}
	for _, tt := range []struct {
		level     audit.Level
		wantPatch bool
	}{{audit.LevelMetadata, false}, {audit.LevelRequest, true}} {
		t.Run(string(tt.level), func(t *testing.T) {
			ctx, rec := audited(tt.level)
			if err := NewMutating(newConfig(src, reg, nil)).Admit(ctx, createCM(t, reg, configMap())); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"patch.example.com/decision":                                    "patched",
				"mutation.webhook.admission.k8s.io/round_0_index_0":             `{"configuration":"a-config","webhook":"patch.example.com","mutated":true}`,
				"mutation.webhook.admission.k8s.io/round_0_index_1":             `{"configuration":"a-config","webhook":"pass.example.com","mutated":false}`,
				"mutation.webhook.admission.k8s.io/round_0_index_2":             `{"configuration":"b-config","webhook":"down.example.com","mutated":false}`,
				"failed-open.mutation.webhook.admission.k8s.io/round_0_index_2": "down.example.com",
			}
			if tt.wantPatch {
				want["patch.webhook.admission.k8s.io/round_0_index_0"] = `{"configuration":"a-config","webhook":"patch.example.com","patch":[{"op":"add","path":"/data/b","value":"2"}],"patchType":"JSONPatch"}`
			}
			got := rec.Event().Annotations
			for k, v := range want {
				if got[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, got[k], v)
				}
			}
			if len(got) != len(want) {
				t.Errorf("annotations %v, want exactly %v", got, want)
			}
		})
	}
}

func TestValidating_AuditAnnotations_KeyedByWebhook(t *testing.T) {
	reg := testRegistry(t)
	rs := newReviewServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: false, AuditAnnotations: map[string]string{"reason": "no thanks"}}
	})
	src := &fakeSource{validating: []*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("v",
		admissionregistrationv1.ValidatingWebhook{Name: "deny.example.com", ClientConfig: rs.clientConfig(""), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}})}}
	ctx, rec := audited(audit.LevelMetadata)
	if err := NewValidating(newConfig(src, reg, nil)).Admit(ctx, createCM(t, reg, configMap())); err == nil {
		t.Fatal("the webhook's refusal was not returned")
	}
	if got := rec.Event().Annotations; len(got) != 1 || got["deny.example.com/reason"] != "no thanks" {
		t.Errorf("annotations %v, want the refusing webhook's, under its name", got)
	}
}
