package policy_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"skiff/server/admission/policy"
	"skiff/server/admission/webhook"
	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/validation"
	whclient "skiff/server/webhook"
	"skiff/store"
)

func (l cacheLookups) MutatingWebhookConfigurations(ctx context.Context) ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	objs, err := l.list(ctx, "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "", nil)
	var out []*admissionregistrationv1.MutatingWebhookConfiguration
	for _, o := range objs {
		out = append(out, o.(*admissionregistrationv1.MutatingWebhookConfiguration))
	}
	return out, err
}

func (l cacheLookups) ValidatingWebhookConfigurations(context.Context) ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return nil, nil
}

// reinvokeHooks answers /add-b by labelling the config map b=yes and
// /read-p by copying its annotation p (what the policy wrote) into
// annotation w; it counts the calls per path and config map.
type reinvokeHooks struct {
	mu    sync.Mutex
	calls map[string]int // "<path> <name>"
}

func (h *reinvokeHooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(in.Request.Object.Raw, &cm); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.calls[r.URL.Path+" "+in.Request.Name]++
	h.mu.Unlock()
	var patch []map[string]any
	switch {
	case r.URL.Path == "/add-b" && cm.Labels == nil:
		patch = []map[string]any{{"op": "add", "path": "/metadata/labels", "value": map[string]string{"b": "yes"}}}
	case r.URL.Path == "/add-b":
		patch = []map[string]any{{"op": "add", "path": "/metadata/labels/b", "value": "yes"}}
	case r.URL.Path == "/read-p" && cm.Annotations == nil:
		patch = []map[string]any{{"op": "add", "path": "/metadata/annotations", "value": map[string]string{"w": ""}}}
	case r.URL.Path == "/read-p":
		patch = []map[string]any{{"op": "add", "path": "/metadata/annotations/w", "value": cm.Annotations["p"]}}
	}
	raw, _ := json.Marshal(patch)
	pt := admissionv1.PatchTypeJSONPatch
	in.Response = &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true, Patch: raw, PatchType: &pt}
	in.Request = nil
	_ = json.NewEncoder(w).Encode(&in)
}

func (h *reinvokeHooks) count(path, name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[path+" "+name]
}

func startPolicyAndWebhooks(t *testing.T) kubernetes.Interface {
	t.Helper()
	hooks := registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource}
	var srv *apitest.Server
	srv = apitest.Start(t, apitest.Options{Resources: registry.Policies(hooks), Admission: func(store.Store) []apiserver.Admitter {
		l := cacheLookups{&srv}
		// The server's order: the policies, then the webhooks.
		return []apiserver.Admitter{policy.NewMutating(l),
			webhook.NewMutating(webhook.Config{Client: whclient.New(whclient.Config{}), Source: l, Namespaces: l})}
	}})
	return kubernetes.NewForConfigOrDie(rest.CopyConfig(srv.Config(nil)))
}

// Through the API server, a MutatingAdmissionPolicy and mutating webhooks
// reinvoke each other: the policy (IfNeeded) runs again and sees the
// label a webhook added after it, and the IfNeeded webhook called before
// that rerun is called again and sees what the policy then wrote.
func TestReinvocation_PolicyAndWebhooks_ThroughTheAPIServer(t *testing.T) {
	for _, tc := range []struct {
		reinvoke            admissionregistrationv1.ReinvocationPolicyType
		wantP               string
		wantReadCalls       int
		wantAddCalls        int
		wantW, wantLabelB   string
		description, prefix string
	}{
		{admissionregistrationv1.IfNeededReinvocationPolicy, "saw-b", 2, 1, "saw-b", "yes", "IfNeeded policy", "ifneeded"},
		{admissionregistrationv1.NeverReinvocationPolicy, "no-b", 1, 1, "no-b", "yes", "Never policy", "never"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := startPolicyAndWebhooks(t)
			rh := &reinvokeHooks{calls: map[string]int{}}
			hs := httptest.NewTLSServer(rh)
			defer hs.Close()
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
			createMutatingWebhooks(ctx, t, c, hs.URL, ca)
			createSawBPolicy(ctx, t, c, tc.reinvoke)
			if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The policy takes effect once the plugin's cache has it: retry
			// with new names until a config map shows the policy's mark.
			for i := 0; ; i++ {
				name := fmt.Sprintf("%s-%d", tc.prefix, i)
				cm, err := c.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if cm.Annotations["p"] == "" {
					if ctx.Err() != nil {
						t.Fatalf("the policy never applied: %v", cm.Annotations)
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				t.Logf("policy applied after %d attempts", i+1)
				if cm.Annotations["p"] != tc.wantP || cm.Annotations["w"] != tc.wantW || cm.Labels["b"] != tc.wantLabelB {
					t.Errorf("annotations %v labels %v, want p=%s w=%s b=%s", cm.Annotations, cm.Labels, tc.wantP, tc.wantW, tc.wantLabelB)
				}
				if n := rh.count("/read-p", name); n != tc.wantReadCalls {
					t.Errorf("IfNeeded webhook called %d times, want %d", n, tc.wantReadCalls)
				}
				if n := rh.count("/add-b", name); n != tc.wantAddCalls {
					t.Errorf("Never webhook called %d times, want %d", n, tc.wantAddCalls)
				}
				return
			}
		})
	}
}

// createMutatingWebhooks makes "a-add-b" (Never) and "b-read-p"
// (IfNeeded), called in that order.
func createMutatingWebhooks(ctx context.Context, t *testing.T, c kubernetes.Interface, url string, ca []byte) {
	t.Helper()
	none := admissionregistrationv1.SideEffectClassNone
	for _, h := range []struct {
		name, path string
		reinvoke   admissionregistrationv1.ReinvocationPolicyType
	}{{"a-add-b", "/add-b", admissionregistrationv1.NeverReinvocationPolicy}, {"b-read-p", "/read-p", admissionregistrationv1.IfNeededReinvocationPolicy}} {
		u := url + h.path
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: h.name},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: h.name + ".example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca},
				SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: &h.reinvoke,
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}}}
		if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createSawBPolicy makes a policy writing annotation p: whether the config
// map has label b.
func createSawBPolicy(ctx context.Context, t *testing.T, c kubernetes.Interface, reinvoke admissionregistrationv1.ReinvocationPolicyType) {
	t.Helper()
	p := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "saw-b"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{annotations: {"p": has(object.metadata.labels) && "b" in object.metadata.labels ? "saw-b" : "no-b"}}}`}}},
			ReinvocationPolicy: reinvoke,
		}}
	if _, err := c.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "saw-b"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: p.Name}}
	if _, err := c.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
