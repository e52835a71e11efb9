package webhook_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"skiff/server/admission/webhook"
	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/storage"
	whclient "skiff/server/webhook"
	"skiff/store"
)

// cacheSource reads the configurations from the test server's watch
// cache, as the server's lookups do, after waiting for it to be current so
// that a configuration just written is seen.
type cacheSource struct{ srv *apitest.Server }

func list[T any](ctx context.Context, s *apitest.Server, resource string) ([]*T, error) {
	if err := s.Storage.Cache().WaitCurrent(ctx); err != nil {
		return nil, err
	}
	res, _ := s.Registry.Lookup(admissionregistrationv1.GroupName, "v1", resource)
	entries, _, err := s.Storage.Cache().List(res, storage.Predicate{})
	out := make([]*T, 0, len(entries))
	for _, e := range entries {
		out = append(out, any(e.Obj).(*T))
	}
	return out, err
}

func (c *cacheSource) MutatingWebhookConfigurations(ctx context.Context) ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return list[admissionregistrationv1.MutatingWebhookConfiguration](ctx, c.srv, "mutatingwebhookconfigurations")
}

func (c *cacheSource) ValidatingWebhookConfigurations(ctx context.Context) ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return list[admissionregistrationv1.ValidatingWebhookConfiguration](ctx, c.srv, "validatingwebhookconfigurations")
}

// hookServer denies config maps named deny-*, adds a key to the others
// and warns about each.
func hookServer(t *testing.T) (*httptest.Server, []byte) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true}
		switch {
		case r.URL.Path == "/validate" && strings.HasPrefix(in.Request.Name, "deny-"):
			resp.Allowed, resp.Result = false, &metav1.Status{Code: 403, Message: "the configmap is unwanted"}
		case r.URL.Path == "/mutate":
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = []byte(`[{"op":"add","path":"/data/mutation-stage-1","value":"yes"}]`), &pt
			resp.Warnings = []string{"mutated by the test webhook"}
		}
		in.Request, in.Response = nil, resp
		_ = json.NewEncoder(w).Encode(&in)
	}))
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func start(t *testing.T) (kubernetes.Interface, *warnings) {
	t.Helper()
	src := &cacheSource{}
	var srv *apitest.Server
	srv = apitest.Start(t, apitest.Options{Admission: func(store.Store) []apiserver.Admitter {
		cfg := webhook.Config{Client: whclient.New(whclient.Config{}), Source: src}
		return []apiserver.Admitter{webhook.NewMutating(cfg), webhook.NewValidating(cfg)}
	}})
	src.srv = srv
	cfg := srv.Config(nil)
	w := &warnings{}
	cfg.WarningHandler = w
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1"}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cs, w
}

var _ rest.WarningHandler = &warnings{}

func cmRule() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
}

func cc(srv *httptest.Server, ca []byte, path string) admissionregistrationv1.WebhookClientConfig {
	u := srv.URL + path
	return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}
}

func newCM(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "1"}}
}

func TestAPI_WebhooksDenyAndMutateConfigMaps(t *testing.T) {
	ctx := context.Background()
	cs, warns := start(t)
	srv, ca := hookServer(t)
	none := admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "deny"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "deny.example.com", ClientConfig: cc(srv, ca, "/validate"), Rules: cmRule(),
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "mutate"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "mutate.example.com", ClientConfig: cc(srv, ca, "/mutate"), Rules: cmRule(),
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CoreV1().ConfigMaps("ns1").Create(ctx, newCM("deny-me"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "deny.example.com" denied the request: the configmap is unwanted`) {
		t.Fatalf("create deny-me: %v, want the webhook's 403", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns1").Get(ctx, "deny-me", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get deny-me: %v, want it not stored", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns1").Create(ctx, newCM("fine"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ConfigMaps("ns1").Get(ctx, "fine", metav1.GetOptions{})
	if err != nil || got.Data["mutation-stage-1"] != "yes" || got.Data["a"] != "1" {
		t.Fatalf("stored config map = %+v (%v), want the mutation stored", got, err)
	}
	warns.mu.Lock()
	defer warns.mu.Unlock()
	if !strings.Contains(strings.Join(warns.msgs, "\n"), "mutated by the test webhook") {
		t.Fatalf("warnings = %q, want the webhook's", warns.msgs)
	}
}

func TestAPI_UnreachableWebhook_FailurePolicyDecides(t *testing.T) {
	ctx := context.Background()
	cs, _ := start(t)
	srv, ca := hookServer(t)
	conf := cc(srv, ca, "/validate")
	srv.Close()
	none := admissionregistrationv1.SideEffectClassNone
	for _, tc := range []struct {
		policy admissionregistrationv1.FailurePolicyType
		fails  bool
	}{{admissionregistrationv1.Ignore, false}, {admissionregistrationv1.Fail, true}} {
		t.Run(string(tc.policy), func(t *testing.T) {
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "unreachable"},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "gone.example.com", ClientConfig: conf, Rules: cmRule(),
					FailurePolicy: &tc.policy, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
			if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			defer cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "unreachable", metav1.DeleteOptions{})
			_, err := cs.CoreV1().ConfigMaps("ns1").Create(ctx, newCM("cm-"+strings.ToLower(string(tc.policy))), metav1.CreateOptions{})
			if !tc.fails && err != nil {
				t.Fatalf("create: %v, want Ignore to let it through", err)
			}
			if tc.fails && (!apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `failed calling webhook "gone.example.com": failed to call webhook: Post "`+*conf.URL)) {
				t.Fatalf("create: %v, want a 500 saying the webhook could not be called", err)
			}
		})
	}
}

func TestAPI_DryRunToWebhookWithSideEffects_Refused(t *testing.T) {
	ctx := context.Background()
	cs, _ := start(t)
	srv, ca := hookServer(t)
	some := admissionregistrationv1.SideEffectClassSome
	// v1 refuses sideEffects Some (the plugin's refusal of a dry run to
	// such a webhook, reachable through configurations stored before, is
	// TestDryRun_SideEffects); a NoneOnDryRun webhook is called on dry run.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "dry"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "dry.example.com", ClientConfig: cc(srv, ca, "/validate"), Rules: cmRule(),
			SideEffects: &some, AdmissionReviewVersions: []string{"v1"}}}}
	_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "webhooks[0].sideEffects") {
		t.Fatalf("create with sideEffects Some: %v, want 422 on webhooks[0].sideEffects", err)
	}
	noneOnDryRun := admissionregistrationv1.SideEffectClassNoneOnDryRun
	vwc.Webhooks[0].SideEffects = &noneOnDryRun
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ConfigMaps("ns1").Create(ctx, newCM("deny-dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("dry-run create: %v, want the webhook called and denying", err)
	}
}

func TestAPI_InvalidMatchCondition_RefusedWithFieldPath(t *testing.T) {
	ctx := context.Background()
	cs, _ := start(t)
	srv, ca := hookServer(t)
	none := admissionregistrationv1.SideEffectClassNone
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "bad.example.com", ClientConfig: cc(srv, ca, "/mutate"), Rules: cmRule(),
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "invalid-expression-1", Expression: "... [] bad expression"}}}}}
	_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "webhooks[0].matchConditions[0].expression") || !strings.Contains(err.Error(), "compilation failed") {
		t.Fatalf("create: %v, want 422 compilation failed at webhooks[0].matchConditions[0].expression", err)
	}
}

func TestAPI_WebhookConfigurations_NotSentToWebhooks(t *testing.T) {
	ctx := context.Background()
	cs, _ := start(t)
	srv, ca := hookServer(t)
	none := admissionregistrationv1.SideEffectClassNone
	all := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}}
	// deny-* names are denied by the webhook: a configuration so named is
	// still created and deleted.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "deny-all"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "deny.example.com", ClientConfig: cc(srv, ca, "/validate"), Rules: all,
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vwc2 := vwc.DeepCopy()
	vwc2.Name = "deny-second"
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc2, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a second configuration: %v", err)
	}
	if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "deny-all", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns1").Create(ctx, newCM("deny-cm"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("create deny-cm: %v, want the remaining configuration to deny it", err)
	}
}
