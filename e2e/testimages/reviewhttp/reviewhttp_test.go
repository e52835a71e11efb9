package reviewhttp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// testReview stands for a review type: TypeMeta and a payload.
type testReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *string `json:"request,omitempty"`
}

var testKind = schema.GroupVersionKind{Group: "test.skiff", Version: "v1", Kind: "TestReview"}

func TestRead_RequestShapes_ErrorStatusOrDecoded(t *testing.T) {
	const good = `{"apiVersion":"test.skiff/v1","kind":"TestReview","request":"r"}`
	cases := []struct {
		name, method, contentType, body string
		want                            int
		wantMessage                     string
	}{
		{"GET", http.MethodGet, "application/json", "", http.StatusMethodNotAllowed, "POST the TestReview, not GET"},
		{"wrong content type", http.MethodPost, "text/plain", good, http.StatusUnsupportedMediaType, `Content-Type "text/plain": want application/json`},
		{"no content type", http.MethodPost, "", good, http.StatusUnsupportedMediaType, `Content-Type "": want application/json`},
		{"too large", http.MethodPost, "application/json", `{"x":"` + strings.Repeat("a", maxBytes) + `"}`, http.StatusBadRequest, "read body: "},
		{"not JSON", http.MethodPost, "application/json", "{", http.StatusBadRequest, "decode TestReview: "},
		{"other version", http.MethodPost, "application/json", strings.Replace(good, "/v1", "/v2", 1), http.StatusBadRequest, "want test.skiff/v1 TestReview with a request, got test.skiff/v2 TestReview"},
		{"other kind", http.MethodPost, "application/json", strings.Replace(good, `"TestReview"`, `"Other"`, 1), http.StatusBadRequest, "want test.skiff/v1 TestReview with a request, got test.skiff/v1 Other"},
		{"no request", http.MethodPost, "application/json", `{"apiVersion":"test.skiff/v1","kind":"TestReview"}`, http.StatusBadRequest, "want test.skiff/v1 TestReview with a request, got test.skiff/v1 TestReview"},
		{"null request", http.MethodPost, "application/json", `{"apiVersion":"test.skiff/v1","kind":"TestReview","request":null}`, http.StatusBadRequest, "want test.skiff/v1 TestReview with a request"},
		{"request of the wrong type", http.MethodPost, "application/json", `{"apiVersion":"test.skiff/v1","kind":"TestReview","request":1}`, http.StatusBadRequest, "decode TestReview: "},
		{"good, with a charset", http.MethodPost, "application/json; charset=utf-8", good, http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/review", strings.NewReader(tc.body))
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			w := httptest.NewRecorder()
			var in testReview
			ok := Read(w, r, testKind, &in)
			if ok != (tc.want == http.StatusOK) || w.Code != tc.want {
				t.Fatalf("Read = %t, status %d %q; want status %d", ok, w.Code, w.Body, tc.want)
			}
			if !strings.HasPrefix(w.Body.String(), tc.wantMessage) {
				t.Errorf("message %q, want it to start %q", w.Body, tc.wantMessage)
			}
			if ok && (in.Request == nil || *in.Request != "r") {
				t.Errorf("decoded %+v, want request r", in)
			}
		})
	}
}

func TestWrite_JSONWithContentType(t *testing.T) {
	w := httptest.NewRecorder()
	Write(w, testReview{TypeMeta: metav1.TypeMeta{APIVersion: "test.skiff/v1", Kind: "TestReview"}})
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if got, want := w.Body.String(), `{"kind":"TestReview","apiVersion":"test.skiff/v1"}`+"\n"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
}
