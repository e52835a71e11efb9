package conversion

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"skiff/server/webhook"
)

const (
	group = "stable.example.com"
	v1    = group + "/v1"
	v2    = group + "/v2"
)

func testCRD(conv *apiextensionsv1.CustomResourceConversion) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true},
				{Name: "v2", Served: true},
			},
			Conversion: conv,
		},
	}
}

// widget is a v1 object in the shape of the e2e test's: hostPort splits
// into host and port at v2.
func widget(name, apiVersion string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": "Widget",
		"metadata": map[string]any{
			"name": name, "namespace": "ns", "uid": "uid-" + name, "resourceVersion": "7",
			"labels": map[string]any{"app": "w"}, "finalizers": []any{"keep"},
		},
	}}
	if apiVersion == v1 {
		u.Object["hostPort"] = "localhost:8080"
	} else {
		u.Object["host"], u.Object["port"] = "localhost", "8080"
	}
	return u
}

// convertV1ToV2 is what agnhost's crdconvert does for the e2e test.
func convertV1ToV2(u map[string]any) {
	if hp, ok := u["hostPort"].(string); ok {
		host, port, _ := strings.Cut(hp, ":")
		u["host"], u["port"] = host, port
		delete(u, "hostPort")
	}
}

// reviewServer is a conversion webhook over TLS; mutate changes its
// answer, calls records the requests it got.
type reviewServer struct {
	srv   *httptest.Server
	ca    []byte
	mu    sync.Mutex
	calls []apiextensionsv1.ConversionRequest
}

func startWebhook(t *testing.T, mutate func(r *apiextensionsv1.ConversionReview)) *reviewServer {
	t.Helper()
	rs := &reviewServer{}
	rs.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review apiextensionsv1.ConversionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		rs.mu.Lock()
		rs.calls = append(rs.calls, *review.Request)
		rs.mu.Unlock()
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, raw := range review.Request.Objects {
			var u map[string]any
			if err := json.Unmarshal(raw.Raw, &u); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if review.Request.DesiredAPIVersion == v2 {
				convertV1ToV2(u)
			}
			u["apiVersion"] = review.Request.DesiredAPIVersion
			b, _ := json.Marshal(u)
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
		}
		out := &apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
		if mutate != nil {
			mutate(out)
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(rs.srv.Close)
	rs.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rs.srv.Certificate().Raw})
	return rs
}

func (rs *reviewServer) conversion(reviewVersions ...string) *apiextensionsv1.CustomResourceConversion {
	if len(reviewVersions) == 0 {
		reviewVersions = []string{"v1", "v1beta1"}
	}
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(rs.srv.URL + "/crdconvert"), CABundle: rs.ca},
			ConversionReviewVersions: reviewVersions,
		},
	}
}

func (rs *reviewServer) requests() []apiextensionsv1.ConversionRequest {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]apiextensionsv1.ConversionRequest(nil), rs.calls...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newConverter(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) Converter {
	t.Helper()
	c, err := New(crd, webhook.New(webhook.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNone_Convert_ChangesOnlyAPIVersion(t *testing.T) {
	for name, conv := range map[string]*apiextensionsv1.CustomResourceConversion{
		"no conversion":  nil,
		"strategy None":  {Strategy: apiextensionsv1.NoneConverter},
		"strategy empty": {},
	} {
		t.Run(name, func(t *testing.T) {
			c := newConverter(t, testCRD(conv))
			in := widget("a", v1)
			before := in.DeepCopy()
			out, err := c.Convert(ctxT(t), in, v2)
			if err != nil {
				t.Fatal(err)
			}
			want := before.DeepCopy()
			want.SetAPIVersion(v2)
			if !reflect.DeepEqual(out.Object, want.Object) {
				t.Errorf("converted = %v, want %v", out.Object, want.Object)
			}
			if !reflect.DeepEqual(in.Object, before.Object) {
				t.Errorf("input changed to %v", in.Object)
			}
			out.SetLabels(map[string]string{"changed": "yes"})
			if in.GetLabels()["changed"] != "" {
				t.Error("output shares its metadata with the input")
			}
		})
	}
}

func TestConvert_VersionNotInCRD_InternalError(t *testing.T) {
	c := newConverter(t, testCRD(nil))
	cases := []struct {
		name string
		obj  *unstructured.Unstructured
		to   string
		msg  string
	}{
		{"to an unknown version", widget("a", v1), group + "/v3", "to an invalid group/version: stable.example.com/v3"},
		{"from an unknown version", widget("a", "other.example.com/v1"), v2, "from an invalid group/version: other.example.com/v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Convert(ctxT(t), tc.obj, tc.to)
			if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error = %v, want an internal error saying %q", err, tc.msg)
			}
		})
	}
}

func TestWebhook_Convert_SendsReviewAndReturnsConvertedObject(t *testing.T) {
	rs := startWebhook(t, nil)
	c := newConverter(t, testCRD(rs.conversion()))
	out, err := c.Convert(ctxT(t), widget("a", v1), v2)
	if err != nil {
		t.Fatal(err)
	}
	want := widget("a", v2)
	if !reflect.DeepEqual(out.Object, want.Object) {
		t.Errorf("converted = %v, want %v", out.Object, want.Object)
	}
	reqs := rs.requests()
	if len(reqs) != 1 || reqs[0].DesiredAPIVersion != v2 || reqs[0].UID == "" || len(reqs[0].Objects) != 1 {
		t.Fatalf("webhook got %+v, want one request for %s with a uid and one object", reqs, v2)
	}
	if _, err := c.Convert(ctxT(t), widget("b", v1), v2); err != nil {
		t.Fatal(err)
	}
	if reqs := rs.requests(); reqs[0].UID == reqs[1].UID {
		t.Errorf("two reviews share the uid %s, want a fresh one each", reqs[0].UID)
	}
}

func TestWebhook_ConvertList_OneReviewForObjectsNotAtTheVersion(t *testing.T) {
	rs := startWebhook(t, nil)
	c := newConverter(t, testCRD(rs.conversion()))
	in := []*unstructured.Unstructured{widget("a", v1), widget("b", v2), widget("c", v1)}
	out, err := c.ConvertList(ctxT(t), in, v2)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b", "c"} {
		if want := widget(name, v2); !reflect.DeepEqual(out[i].Object, want.Object) {
			t.Errorf("item %d = %v, want %v", i, out[i].Object, want.Object)
		}
	}
	reqs := rs.requests()
	if len(reqs) != 1 {
		t.Fatalf("webhook got %d requests, want 1", len(reqs))
	}
	var names []string
	for _, raw := range reqs[0].Objects {
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			t.Fatal(err)
		}
		names = append(names, u.GetName())
	}
	if !reflect.DeepEqual(names, []string{"a", "c"}) {
		t.Errorf("webhook was sent %v, want [a c] (b is already at %s)", names, v2)
	}
	out[1].SetName("changed")
	if in[1].GetName() != "b" {
		t.Error("an object already at the version is returned shared with the input")
	}

	if _, err := c.ConvertList(ctxT(t), []*unstructured.Unstructured{widget("d", v2)}, v2); err != nil {
		t.Fatal(err)
	}
	if n := len(rs.requests()); n != 1 {
		t.Errorf("a list already at the version made %d requests in all, want still 1", n)
	}
}

func TestWebhook_ConvertedMetadata_OnlyLabelsAndAnnotationsKept(t *testing.T) {
	rs := startWebhook(t, func(r *apiextensionsv1.ConversionReview) {
		for i, raw := range r.Response.ConvertedObjects {
			var u map[string]any
			_ = json.Unmarshal(raw.Raw, &u)
			md := u["metadata"].(map[string]any)
			md["labels"] = map[string]any{"app": "w", "converted": "true"}
			md["annotations"] = map[string]any{"note": "v2"}
			md["resourceVersion"] = "999"
			md["finalizers"] = []any{"other"}
			md["generation"] = 5
			b, _ := json.Marshal(u)
			r.Response.ConvertedObjects[i].Raw = b
		}
	})
	c := newConverter(t, testCRD(rs.conversion()))
	out, err := c.Convert(ctxT(t), widget("a", v1), v2)
	if err != nil {
		t.Fatal(err)
	}
	want := widget("a", v2)
	want.SetLabels(map[string]string{"app": "w", "converted": "true"})
	want.SetAnnotations(map[string]string{"note": "v2"})
	if !reflect.DeepEqual(out.Object["metadata"], want.Object["metadata"]) {
		t.Errorf("metadata = %v, want %v", out.Object["metadata"], want.Object["metadata"])
	}
}

func TestWebhook_BadAnswers_InternalErrorSayingWhy(t *testing.T) {
	editObjects := func(edit func(u map[string]any)) func(r *apiextensionsv1.ConversionReview) {
		return func(r *apiextensionsv1.ConversionReview) {
			for i, raw := range r.Response.ConvertedObjects {
				var u map[string]any
				_ = json.Unmarshal(raw.Raw, &u)
				edit(u)
				b, _ := json.Marshal(u)
				r.Response.ConvertedObjects[i].Raw = b
			}
		}
	}
	const prefix = "conversion webhook for stable.example.com/v1, Kind=Widget "
	cases := []struct {
		name   string
		mutate func(r *apiextensionsv1.ConversionReview)
		msg    string
	}{
		{"wrong uid", func(r *apiextensionsv1.ConversionReview) { r.Response.UID = "not-yours" }, `failed: expected response.uid=`},
		{"no response", func(r *apiextensionsv1.ConversionReview) { r.Response = nil }, "failed: no response provided"},
		{"wrong kind of review", func(r *apiextensionsv1.ConversionReview) { r.Kind = "AdmissionReview" }, "failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview"},
		{"failure with a message", func(r *apiextensionsv1.ConversionReview) {
			r.Response.Result = metav1.Status{Status: metav1.StatusFailure, Message: "cannot convert widgets today"}
		}, "failed: cannot convert widgets today"},
		{"failure without a message", func(r *apiextensionsv1.ConversionReview) {
			r.Response.Result = metav1.Status{Status: metav1.StatusFailure}
		}, "failed: response.result.status was 'Failure', not 'Success'"},
		{"missing objects", func(r *apiextensionsv1.ConversionReview) { r.Response.ConvertedObjects = nil }, "returned 0 objects, expected 1"},
		{"name changed", editObjects(func(u map[string]any) { u["metadata"].(map[string]any)["name"] = "other" }), "invalid converted object at index 0: must have the same name: a != other"},
		{"uid changed", editObjects(func(u map[string]any) { u["metadata"].(map[string]any)["uid"] = "x" }), "must have the same UID"},
		{"namespace changed", editObjects(func(u map[string]any) { u["metadata"].(map[string]any)["namespace"] = "x" }), "must have the same namespace"},
		{"wrong apiVersion", editObjects(func(u map[string]any) { u["apiVersion"] = v1 }), "invalid groupVersion (expected stable.example.com/v2, received stable.example.com/v1)"},
		{"kind changed", editObjects(func(u map[string]any) { u["kind"] = "Gadget" }), "invalid kind (expected Widget, received Gadget)"},
		{"metadata removed", editObjects(func(u map[string]any) { delete(u, "metadata") }), "must have the same name: a != "},
		{"invalid label", editObjects(func(u map[string]any) {
			u["metadata"].(map[string]any)["labels"] = map[string]any{"bad key!": "x"}
		}), "metadata.labels"},
		{"label not a string", editObjects(func(u map[string]any) {
			u["metadata"].(map[string]any)["labels"] = map[string]any{"app": 3}
		}), "metadata.labels[app] must be a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs := startWebhook(t, tc.mutate)
			c := newConverter(t, testCRD(rs.conversion()))
			out, err := c.Convert(ctxT(t), widget("a", v1), v2)
			if err == nil {
				t.Fatalf("conversion succeeded with %v, want an error", out)
			}
			if !apierrors.IsInternalError(err) {
				t.Errorf("error %v is not an internal API error", err)
			}
			if !strings.Contains(err.Error(), prefix) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q%q", err, prefix, tc.msg)
			}
		})
	}
}

func TestWebhook_UnusableWebhook_InternalErrorSayingWhy(t *testing.T) {
	release := make(chan struct{})
	garbage := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "garbage") }))
	t.Cleanup(garbage.Close)
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(slow.Close)
	// Before slow.Close (cleanups run last first): Close waits for the
	// handler.
	t.Cleanup(func() { close(release) })
	refused := httptest.NewTLSServer(http.NotFoundHandler())
	refused.Close()
	ca := func(s *httptest.Server) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	}
	cases := []struct {
		name string
		srv  *httptest.Server
		ctx  func(t *testing.T) context.Context
		kind error
		msg  string
	}{
		{"garbage answer", garbage, ctxT, webhook.ErrUndecodable, "cannot decode the webhook's response"},
		{"refused connection", refused, ctxT, webhook.ErrUnreachable, "connection refused"},
		{"no answer before the deadline", slow, func(t *testing.T) context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			t.Cleanup(cancel)
			return ctx
		}, webhook.ErrTimeout, "context deadline exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conv := &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(tc.srv.URL + "/crdconvert"), CABundle: ca(tc.srv)},
					ConversionReviewVersions: []string{"v1"},
				},
			}
			c := newConverter(t, testCRD(conv))
			_, err := c.Convert(tc.ctx(t), widget("a", v1), v2)
			if !apierrors.IsInternalError(err) {
				t.Fatalf("error %v is not an internal API error", err)
			}
			const prefix = "conversion webhook for stable.example.com/v1, Kind=Widget failed: Post "
			if !strings.Contains(err.Error(), prefix) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q...%q", err, prefix, tc.msg)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %q does not wrap %v", err, tc.kind)
			}
		})
	}
}

func TestWebhook_OnlyV1beta1Accepted_SendsV1beta1Review(t *testing.T) {
	var got apiextensionsv1beta1.ConversionReview
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = apiextensionsv1beta1.ConversionReview{}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil || got.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		var objs []runtime.RawExtension
		for _, raw := range got.Request.Objects {
			var u map[string]any
			_ = json.Unmarshal(raw.Raw, &u)
			u["apiVersion"] = got.Request.DesiredAPIVersion
			b, _ := json.Marshal(u)
			objs = append(objs, runtime.RawExtension{Raw: b})
		}
		// No kind and no uid: upstream never checked them in v1beta1.
		_ = json.NewEncoder(w).Encode(apiextensionsv1beta1.ConversionReview{Response: &apiextensionsv1beta1.ConversionResponse{
			Result: metav1.Status{Status: metav1.StatusSuccess}, ConvertedObjects: objs,
		}})
	}))
	t.Cleanup(srv.Close)
	conv := &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{
				URL: ptr.To(srv.URL), CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
			},
			ConversionReviewVersions: []string{"v1beta1"},
		},
	}
	c := newConverter(t, testCRD(conv))
	out, err := c.Convert(ctxT(t), widget("a", v1), v2)
	if err != nil {
		t.Fatal(err)
	}
	if got.APIVersion != "apiextensions.k8s.io/v1beta1" || got.Kind != "ConversionReview" || got.Request.UID == "" {
		t.Errorf("webhook got %s %s uid %q, want a v1beta1 ConversionReview with a uid", got.APIVersion, got.Kind, got.Request.UID)
	}
	if out.GetAPIVersion() != v2 {
		t.Errorf("converted apiVersion = %s, want %s", out.GetAPIVersion(), v2)
	}
}

func TestNew_UnusableConversion_Error(t *testing.T) {
	cases := []struct {
		name   string
		conv   *apiextensionsv1.CustomResourceConversion
		client *webhook.Client
		msg    string
	}{
		{"unknown strategy", &apiextensionsv1.CustomResourceConversion{Strategy: "Magic"}, webhook.New(webhook.Config{}), `unknown conversion strategy "Magic"`},
		{"webhook without clientConfig", &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"}}}, webhook.New(webhook.Config{}), "without a webhook clientConfig"},
		{"no review version we speak", &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://h")}, ConversionReviewVersions: []string{"v2"},
		}}, webhook.New(webhook.Config{}), "no supported conversion review versions"},
		{"no client", &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://h")}, ConversionReviewVersions: []string{"v1"},
		}}, nil, "needs a webhook client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(testCRD(tc.conv), tc.client)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error = %v, want one saying %q", err, tc.msg)
			}
		})
	}
}
