package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/e2e/testimages/testpki"
)

func request(t *testing.T, obj map[string]any, dry bool) *admissionv1.AdmissionRequest {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &admissionv1.AdmissionRequest{
		UID: "u-1", Operation: admissionv1.Create, Name: "cm", Namespace: "ns", DryRun: &dry,
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Object:   runtime.RawExtension{Raw: b},
	}
}

func configMap(meta map[string]any) map[string]any {
	m := map[string]any{"name": "cm", "namespace": "ns"}
	for k, v := range meta {
		m[k] = v
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": m, "data": map[string]any{"k": "v"}}
}

// post sends req to path and returns the decoded review.
func post(t *testing.T, srv *httptest.Server, path string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionReview {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Post(srv.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: status %d", path, resp.StatusCode)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil || out.Response.UID != req.UID {
		t.Fatalf("POST %s: %+v, want a v1 AdmissionReview answering %s", path, out, req.UID)
	}
	return &out
}

func TestHandler_EachPath_AnswersItsBehaviour(t *testing.T) {
	srv := httptest.NewServer(Handler(time.Minute, nil))
	defer srv.Close()
	cases := []struct {
		path        string
		dry         bool
		wantAllowed bool
		wantCode    int32
		wantMessage string
		wantWarning string
	}{
		{"/allow", false, true, 0, "", ""},
		{"/deny", false, false, http.StatusForbidden, `admwebhook refuses CREATE configmaps "cm" dryRun=false`, ""},
		{"/warn", true, true, 0, "", `admwebhook saw CREATE configmaps "cm" dryRun=true`},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			resp := post(t, srv, tc.path, request(t, configMap(nil), tc.dry)).Response
			if resp.Allowed != tc.wantAllowed || resp.Patch != nil {
				t.Errorf("allowed %t patch %s, want allowed %t and no patch", resp.Allowed, resp.Patch, tc.wantAllowed)
			}
			var code int32
			var msg string
			if resp.Result != nil {
				code, msg = resp.Result.Code, resp.Result.Message
			}
			if code != tc.wantCode || msg != tc.wantMessage {
				t.Errorf("result %d %q, want %d %q", code, msg, tc.wantCode, tc.wantMessage)
			}
			if got := strings.Join(resp.Warnings, "\n"); got != tc.wantWarning {
				t.Errorf("warnings %q, want %q", got, tc.wantWarning)
			}
		})
	}
}

func TestMutate_PatchAddsLabelAndDryRunAnnotation_WithOrWithoutMaps(t *testing.T) {
	cases := []struct {
		name   string
		meta   map[string]any
		dry    bool
		labels map[string]any
		annots map[string]any
	}{
		{"no maps", nil, false,
			map[string]any{MutatedLabel: "true"}, map[string]any{DryRunAnnotation: "false"}},
		{"existing maps kept", map[string]any{"labels": map[string]any{"a": "b"}, "annotations": map[string]any{"c": "d"}}, true,
			map[string]any{"a": "b", MutatedLabel: "true"}, map[string]any{"c": "d", DryRunAnnotation: "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := request(t, configMap(tc.meta), tc.dry)
			resp := mutate(context.Background(), req)
			if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("response %+v, want allowed with a JSONPatch", resp)
			}
			patch, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatal(err)
			}
			out, err := patch.Apply(req.Object.Raw)
			if err != nil {
				t.Fatalf("apply %s: %v", resp.Patch, err)
			}
			var got struct {
				Metadata struct{ Labels, Annotations map[string]any }
				Data     map[string]any
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Metadata.Labels, tc.labels) || !reflect.DeepEqual(got.Metadata.Annotations, tc.annots) {
				t.Errorf("patched labels %v annotations %v, want %v %v", got.Metadata.Labels, got.Metadata.Annotations, tc.labels, tc.annots)
			}
			if got.Data["k"] != "v" {
				t.Errorf("patch changed data: %s", out)
			}
		})
	}
}

func TestMutate_NoObject_AllowedWithoutPatch(t *testing.T) {
	req := &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Delete}
	if resp := mutate(context.Background(), req); !resp.Allowed || resp.Patch != nil {
		t.Fatalf("response %+v, want allowed without a patch", resp)
	}
}

func TestHang_CallerGivesUp_ReturnsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	resp := hang(time.Hour)(ctx, &admissionv1.AdmissionRequest{})
	if !resp.Allowed {
		t.Fatalf("response %+v, want allowed", resp)
	}
	// Bounded by the test's own timeout, not judged by the clock.
	t.Logf("hang returned %v after the caller's 50ms deadline began", time.Since(begin).Round(time.Millisecond))
}

func TestServe_BadRequests_HTTPErrors(t *testing.T) {
	good, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &admissionv1.AdmissionRequest{UID: "u"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, contentType, body string
		want                            int
	}{
		{"GET", http.MethodGet, "application/json", "", http.StatusMethodNotAllowed},
		{"wrong content type", http.MethodPost, "text/plain", string(good), http.StatusUnsupportedMediaType},
		{"not JSON", http.MethodPost, "application/json", "{", http.StatusBadRequest},
		{"no request", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest},
		{"v1beta1 review", http.MethodPost, "application/json", strings.Replace(string(good), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), http.StatusBadRequest},
		{"good review", http.MethodPost, "application/json; charset=utf-8", string(good), http.StatusOK},
	}
	srv := httptest.NewServer(Handler(time.Minute, nil))
	defer srv.Close()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+"/allow", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tc.contentType)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func TestRun_TLSFromFiles_ServesUntilCancelledEvenWithAHangingRequest(t *testing.T) {
	ca := testpki.NewCA(t, "webhook-ca")
	certFile, keyFile := testpki.WritePair(t, t.TempDir(), ca.Issue(t, "admwebhook", x509.ExtKeyUsageServerAuth))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{CertFile: certFile, KeyFile: keyFile, Listener: ln, HangFor: time.Hour})
	}()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}, Timeout: 10 * time.Second}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: request(t, configMap(nil), false)})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post("https://"+ln.Addr().String()+"/deny", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out admissionv1.AdmissionReview
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || out.Response == nil || out.Response.Allowed || out.Response.UID != "u-1" {
		t.Fatalf("POST /deny over TLS: %+v %v, want a refusal for u-1", out, err)
	}

	// A request held by /hang must not hold up the shutdown.
	hung := make(chan error, 1)
	go func() {
		resp, err := client.Post("https://"+ln.Addr().String()+"/hang", "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the request reach the handler
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("Run did not return 8s after cancel with a request in /hang")
	}
	<-hung
}
