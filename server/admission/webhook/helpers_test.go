package webhook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/webhook"
)

// fakeSource holds the configurations the plugins see.
type fakeSource struct {
	mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
	validating []*admissionregistrationv1.ValidatingWebhookConfiguration
}

func (f *fakeSource) MutatingWebhookConfigurations(context.Context) ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return append([]*admissionregistrationv1.MutatingWebhookConfiguration(nil), f.mutating...), nil
}

func (f *fakeSource) ValidatingWebhookConfigurations(context.Context) ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return append([]*admissionregistrationv1.ValidatingWebhookConfiguration(nil), f.validating...), nil
}

type fakeNamespaces map[string]map[string]string

func (f fakeNamespaces) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	l, ok := f[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	ns := &corev1.Namespace{}
	ns.Name, ns.Labels = name, l
	return ns, nil
}

func testRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	reg, err := registry.New(registry.Builtin(registry.Hooks{Default: defaults.Apply})...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func resource(t *testing.T, reg *registry.Registry, group, version, name string) *registry.Resource {
	t.Helper()
	res, ok := reg.Lookup(group, version, name)
	if !ok {
		t.Fatalf("%s/%s %s is not registered", group, version, name)
	}
	return res
}

// reviewServer is a TLS webhook answering each review with answer's
// response (the uid filled in) and recording the requests.
type reviewServer struct {
	srv *httptest.Server
	ca  []byte

	mu   sync.Mutex
	reqs []*admissionv1.AdmissionRequest
	kind string // the review's apiVersion
}

func newReviewServer(t *testing.T, answer func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) *reviewServer {
	t.Helper()
	rs := &reviewServer{}
	rs.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in review
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rs.mu.Lock()
		rs.reqs = append(rs.reqs, in.Request)
		rs.kind = in.APIVersion
		rs.mu.Unlock()
		resp := answer(in.Request)
		if resp != nil && resp.UID == "" {
			resp.UID = in.Request.UID
		}
		_ = json.NewEncoder(w).Encode(review{TypeMeta: in.TypeMeta, Response: resp})
	}))
	t.Cleanup(rs.srv.Close)
	rs.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rs.srv.Certificate().Raw})
	return rs
}

func (rs *reviewServer) requests() []*admissionv1.AdmissionRequest {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]*admissionv1.AdmissionRequest(nil), rs.reqs...)
}

func (rs *reviewServer) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	u := rs.srv.URL + path
	return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: rs.ca}
}

func allow(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true}
}

func jsonPatch(patch string) func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		pt := admissionv1.PatchTypeJSONPatch
		return &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(patch), PatchType: &pt}
	}
}

// rule is a webhook rule for ops on group/version resources.
func rule(ops []admissionregistrationv1.OperationType, group, version string, resources ...string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{Operations: ops,
		Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: resources}}
}

var (
	allOps     = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
	createOnly = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	none       = admissionregistrationv1.SideEffectClassNone
	some       = admissionregistrationv1.SideEffectClassSome
)

func validatingConfig(name string, hooks ...admissionregistrationv1.ValidatingWebhook) *admissionregistrationv1.ValidatingWebhookConfiguration {
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: hooks}
	c.Name = name
	return c
}

func mutatingConfig(name string, hooks ...admissionregistrationv1.MutatingWebhook) *admissionregistrationv1.MutatingWebhookConfiguration {
	c := &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: hooks}
	c.Name = name
	return c
}

func newConfig(src *fakeSource, reg *registry.Registry, ns fakeNamespaces) Config {
	return Config{Client: webhook.New(webhook.Config{}), Source: src, Namespaces: ns, Resources: reg}
}
