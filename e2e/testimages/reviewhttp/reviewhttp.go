// Package reviewhttp is the HTTP side of the review webhooks among skiff's
// e2e test programs (admwebhook's AdmissionReview, crdconvert's
// ConversionReview): a review POSTed as JSON in, the same kind out.
package reviewhttp

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// maxBytes bounds a review body: one object and its old version, or a
// list's worth of objects to convert, never megabytes in a test.
const maxBytes = 3 << 20

// Read decodes r's body into in (a *AdmissionReview, a *ConversionReview)
// when it is a review of kind want that carries a request. When it is not
// it writes the HTTP error (405, 415 or 400) and returns false.
func Read(w http.ResponseWriter, r *http.Request, want schema.GroupVersionKind, in any) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, fmt.Sprintf("POST the %s, not %s", want.Kind, r.Method), http.StatusMethodNotAllowed)
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, fmt.Sprintf("Content-Type %q: want application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	// Every review kind names its question "request".
	var head struct {
		metav1.TypeMeta `json:",inline"`
		Request         json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		http.Error(w, "decode "+want.Kind+": "+err.Error(), http.StatusBadRequest)
		return false
	}
	if got := head.GroupVersionKind(); got != want || len(head.Request) == 0 || string(head.Request) == "null" {
		http.Error(w, fmt.Sprintf("want %s %s with a request, got %s %s", want.GroupVersion(), want.Kind, head.APIVersion, head.Kind), http.StatusBadRequest)
		return false
	}
	if err := json.Unmarshal(body, in); err != nil {
		http.Error(w, "decode "+want.Kind+": "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// Write answers with out as JSON.
func Write(w http.ResponseWriter, out any) {
	w.Header().Set("Content-Type", "application/json")
	// An error here is a caller that is gone: nothing more to tell it.
	_ = json.NewEncoder(w).Encode(out)
}
