package apiserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (h *harness) do(t *testing.T, method, path, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestErrors_BadInput_IsAStatusWithTheRightCodeAndField(t *testing.T) {
	h := newHarness(t)
	const cms = "/api/v1/namespaces/default/configmaps"
	h.do(t, http.MethodPost, cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"exists"}}`)
	code, body := h.do(t, http.MethodGet, cms+"/exists", "", "")
	if code != 200 {
		t.Fatalf("setup: %d %s", code, body)
	}
	var cur struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	json.Unmarshal([]byte(body), &cur)
	h.do(t, http.MethodPut, cms+"/exists", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"exists"},"data":{"a":"1"}}`)

	big := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"` + strings.Repeat("x", 3<<20) + `"}}`
	cases := []struct {
		name, method, path, ctype, body string
		code                            int
		reason                          metav1.StatusReason
		mention                         string
	}{
		{"malformed JSON", "POST", cms, "application/json", `{"apiVersion":`, 400, metav1.StatusReasonBadRequest, "cannot be handled"},
		{"malformed YAML", "POST", cms, "application/yaml", "kind: [", 400, metav1.StatusReasonBadRequest, "YAML"},
		{"invalid object", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}`, 422, metav1.StatusReasonInvalid, "spec.containers[0].image"},
		{"invalid name", "POST", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_Valid"}}`, 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"unknown field, strict", "POST", cms + "?fieldValidation=Strict", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"u"},"bogus":1}`, 400, metav1.StatusReasonBadRequest, `unknown field "bogus"`},
		{"wrong kind", "POST", cms, "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"w"}}`, 400, metav1.StatusReasonBadRequest, "does not match"},
		{"body over 3 MiB", "POST", cms, "application/json", big, 413, metav1.StatusReasonRequestEntityTooLarge, "limit"},
		{"stale resourceVersion", "PUT", cms + "/exists", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"exists","resourceVersion":"` + cur.Metadata.ResourceVersion + `"},"data":{"a":"2"}}`, 409, metav1.StatusReasonConflict, "has been modified"},
		{"already exists", "POST", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"exists"}}`, 409, metav1.StatusReasonAlreadyExists, "already exists"},
		{"not found", "GET", cms + "/nope", "", "", 404, metav1.StatusReasonNotFound, `"nope" not found`},
		{"missing namespace", "POST", "/api/v1/namespaces/nowhere/configmaps", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, 404, metav1.StatusReasonNotFound, "nowhere"},
		{"unsupported patch type", "PATCH", cms + "/exists", "text/plain", `x`, 415, metav1.StatusReasonUnsupportedMediaType, "text/plain"},
		{"bad label selector", "GET", cms + "?labelSelector=a%20in%20(", "", "", 400, metav1.StatusReasonBadRequest, "unable to parse"},
		{"unsupported field selector", "GET", cms + "?fieldSelector=spec.nope%3Dx", "", "", 400, metav1.StatusReasonBadRequest, "field label not supported"},
		{"bad JSON patch", "PATCH", cms + "/exists", "application/json-patch+json", `[{"op":"nope"}]`, 400, metav1.StatusReasonBadRequest, "patch"},
		{"name mismatch", "PUT", cms + "/exists", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}`, 400, metav1.StatusReasonBadRequest, "does not match the name"},
		{"unknown resource", "GET", "/api/v1/widgets", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"bad resourceVersion", "GET", cms + "?resourceVersion=abc&resourceVersionMatch=Exact", "", "", 400, metav1.StatusReasonBadRequest, "resource version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := h.do(t, c.method, c.path, c.ctype, c.body)
			var st metav1.Status
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatalf("body is not a Status: %v: %.200s", err, body)
			}
			if code != c.code || int(st.Code) != c.code || st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure {
				t.Fatalf("got HTTP %d, Status %+v; want %d", code, st, c.code)
			}
			if st.Reason != c.reason {
				t.Fatalf("reason %q, want %q (%s)", st.Reason, c.reason, st.Message)
			}
			if !strings.Contains(st.Message, c.mention) {
				t.Fatalf("message does not mention %q: %s", c.mention, st.Message)
			}
			if c.code == 422 && (st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field == "" || !strings.Contains(c.mention, st.Details.Causes[0].Field)) {
				t.Fatalf("422 without the offending field in details.causes: %+v", st.Details)
			}
		})
	}
	// Nothing was lost: the object that failed updates kept its last value.
	if code, body := h.do(t, http.MethodGet, cms+"/exists", "", ""); code != 200 || !strings.Contains(body, `"a":"1"`) {
		t.Fatalf("after the failed writes: %d %s", code, body)
	}
}
