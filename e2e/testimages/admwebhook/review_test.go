package main

import (
	"bytes"
	"context"
	"encoding/json"
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

	"skiff/e2e/testimages/tlsserve/tlsservetest"
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

func TestRun_TLSFromFiles_ServesUntilCancelledEvenWithAHangingRequest(t *testing.T) {
	srv := tlsservetest.New(t, "admwebhook")
	stop := srv.Start(t, func(ctx context.Context) error {
		return Run(ctx, Config{Config: srv.Config, HangFor: time.Hour})
	})
	client := srv.CA.Client()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: request(t, configMap(nil), false)})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(srv.URL+"/deny", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out admissionv1.AdmissionReview
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || out.Response == nil || out.Response.Allowed || out.Response.UID != "u-1" {
		t.Fatalf("POST /deny over TLS: %+v %v, want a refusal for u-1", out, err)
	}

	// A request held by /hang must not hold up the shutdown: stop fails
	// the test if Run has not returned well before HangFor.
	hung := make(chan error, 1)
	go func() {
		resp, err := client.Post(srv.URL+"/hang", "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the request reach the handler
	begin := time.Now()
	stop()
	t.Logf("Run returned %v after cancel with a request in /hang", time.Since(begin).Round(time.Millisecond))
	<-hung
}
