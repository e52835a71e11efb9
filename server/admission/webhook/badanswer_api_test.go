package webhook_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// badHookServer answers /garbage with a body that is no AdmissionReview
// and /immutable with a patch changing an immutable ConfigMap's data.
func badHookServer(t *testing.T) (*httptest.Server, []byte) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/garbage" {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>not a review</html>"))
			return
		}
		var in admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true}
		if in.Request.Operation == admissionv1.Update {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = []byte(`[{"op":"replace","path":"/data/a","value":"changed"}]`), &pt
		}
		in.Request, in.Response = nil, resp
		_ = json.NewEncoder(w).Encode(&in)
	}))
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// A webhook's bad answer reaches the caller as a clear Status and nothing
// is written: a body that is not an AdmissionReview (500 naming the
// webhook), a patch of an immutable field (422 from validation after the
// mutation, the stored object unchanged).
func TestAPI_BadWebhookAnswers_ClearStatusNothingWritten(t *testing.T) {
	ctx := context.Background()
	cs, _ := start(t)
	srv, ca := badHookServer(t)
	none := admissionregistrationv1.SideEffectClassNone
	ops := func(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		r := cmRule()
		r[0].Operations = ops
		return r
	}
	garbage := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "garbage"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "garbage.example.com", ClientConfig: cc(srv, ca, "/garbage"), Rules: ops(admissionregistrationv1.Create),
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"hook": "garbage"}}}}}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, garbage, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := newCM("garbled")
	cm.Labels = map[string]string{"hook": "garbage"}
	_, err := cs.CoreV1().ConfigMaps("ns1").Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `failed calling webhook "garbage.example.com"`) {
		t.Fatalf("create with a garbage answer: %v, want a 500 naming the webhook", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns1").Get(ctx, "garbled", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get garbled: %v, want it not stored", err)
	}

	frozen := newCM("frozen")
	frozen.Immutable = ptr.To(true)
	if _, err := cs.CoreV1().ConfigMaps("ns1").Create(ctx, frozen, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	immutable := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "immutable"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "immutable.example.com", ClientConfig: cc(srv, ca, "/immutable"), Rules: ops(admissionregistrationv1.Update),
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, immutable, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	live, err := cs.CoreV1().ConfigMaps("ns1").Get(ctx, "frozen", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live.Labels = map[string]string{"touched": "yes"}
	_, err = cs.CoreV1().ConfigMaps("ns1").Update(ctx, live, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "field is immutable") {
		t.Fatalf("update patched by the webhook: %v, want 422 field is immutable", err)
	}
	after, err := cs.CoreV1().ConfigMaps("ns1").Get(ctx, "frozen", metav1.GetOptions{})
	if err != nil || after.Data["a"] != "1" || after.Labels["touched"] != "" || after.ResourceVersion != live.ResourceVersion {
		t.Fatalf("stored after the refused update: %+v (%v), want it unchanged", after, err)
	}
}
