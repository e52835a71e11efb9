package main

import (
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"skiff/e2e/testimages/testpki"
)

func TestHandler_Paths(t *testing.T) {
	fp := testpki.NewCA(t, "front-proxy-ca")
	proxy := fp.Issue(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	var auth atomic.Pointer[RequestHeaderConfig]
	auth.Store(mustParse(t, authConfigMap(fp, `["front-proxy-client"]`)))
	h := Handler(&auth, []types.NamespacedName{{Namespace: "default", Name: "echo"}, {Namespace: "team", Name: "one"}, {Namespace: "team", Name: "two"}})
	const base = "/apis/wardle.skiff.test/v1alpha1"
	cases := []struct {
		name, method, path string
		cert               bool
		code               int
		kind               string
		// items are the names a list holds; name the object a get returns.
		items []string
		name2 string
	}{
		{"health without a certificate", http.MethodGet, "/healthz", false, 200, "", nil, ""},
		{"readyz once configured", http.MethodGet, "/readyz", false, 200, "", nil, ""},
		{"discovery needs the proxy", http.MethodGet, "/apis", false, 401, "Status", nil, ""},
		{"group list", http.MethodGet, "/apis", true, 200, "APIGroupList", nil, ""},
		{"group", http.MethodGet, "/apis/wardle.skiff.test", true, 200, "APIGroup", nil, ""},
		{"resource list", http.MethodGet, base, true, 200, "APIResourceList", nil, ""},
		{"other group", http.MethodGet, "/apis/other.test", true, 404, "Status", nil, ""},
		{"core API not served", http.MethodGet, "/api/v1", true, 404, "Status", nil, ""},
		{"list all namespaces", http.MethodGet, base + "/flunders", true, 200, "FlunderList", []string{"echo", "one", "two"}, ""},
		{"list one namespace", http.MethodGet, base + "/namespaces/team/flunders", true, 200, "FlunderList", []string{"one", "two"}, ""},
		{"list empty namespace", http.MethodGet, base + "/namespaces/empty/flunders", true, 200, "FlunderList", []string{}, ""},
		{"get", http.MethodGet, base + "/namespaces/team/flunders/two", true, 200, "Flunder", nil, "two"},
		{"get in the wrong namespace", http.MethodGet, base + "/namespaces/default/flunders/two", true, 404, "Status", nil, ""},
		{"create is not served", http.MethodPost, base + "/namespaces/team/flunders", true, 405, "Status", nil, ""},
		{"delete is not served", http.MethodDelete, base + "/namespaces/team/flunders/one", true, 405, "Status", nil, ""},
		{"unknown resource", http.MethodGet, base + "/namespaces/team/widgets", true, 404, "Status", nil, ""},
		{"list without the proxy", http.MethodGet, base + "/flunders", false, 401, "Status", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := proxied(tc.path, nil)
			if tc.cert {
				r = proxied(tc.path, &proxy)
			}
			r.Method = tc.method
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, w.Code, w.Body, tc.code)
			}
			if tc.kind == "" {
				return
			}
			var obj struct {
				Kind     string
				Code     int
				Items    []Flunder
				Metadata metav1.ObjectMeta
				Status   json.RawMessage
			}
			if err := json.Unmarshal(w.Body.Bytes(), &obj); err != nil {
				t.Fatalf("body %s: %v", w.Body, err)
			}
			if obj.Kind != tc.kind || (tc.kind == "Status" && obj.Code != tc.code) {
				t.Fatalf("body %s, want a %s", w.Body, tc.kind)
			}
			if tc.items != nil {
				names := []string{}
				for _, it := range obj.Items {
					names = append(names, it.Name)
					if it.Status.Caller.Username != "alice" {
						t.Errorf("item %s caller %+v, want alice", it.Name, it.Status.Caller)
					}
				}
				if !reflect.DeepEqual(names, tc.items) {
					t.Errorf("items %v, want %v", names, tc.items)
				}
			}
			if tc.name2 != "" {
				var st FlunderStatus
				if err := json.Unmarshal(obj.Status, &st); err != nil {
					t.Fatal(err)
				}
				c := st.Caller
				if obj.Metadata.Name != tc.name2 || c.Username != "alice" || c.UID != "uid-1" || len(c.Groups) != 2 || c.Extra["example.com/team"][0] != "blue" {
					t.Errorf("got %s, want %s read by alice with her groups and extra", w.Body, tc.name2)
				}
			}
		})
	}
}

func TestHandler_ResourceList_Discovery(t *testing.T) {
	rl := resourceList()
	if rl.GroupVersion != "wardle.skiff.test/v1alpha1" || len(rl.APIResources) != 1 {
		t.Fatalf("%+v", rl)
	}
	r := rl.APIResources[0]
	if r.Name != "flunders" || r.Kind != "Flunder" || !r.Namespaced || !reflect.DeepEqual([]string(r.Verbs), []string{"get", "list"}) {
		t.Errorf("resource %+v, want namespaced flunders with get and list", r)
	}
}

func TestHandler_Readyz_UnavailableUntilConfigured(t *testing.T) {
	var auth atomic.Pointer[RequestHeaderConfig]
	w := httptest.NewRecorder()
	Handler(&auth, nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("readyz before the ConfigMap is read: %d, want 503", w.Code)
	}
}

func TestParseFlunders(t *testing.T) {
	got, err := parseFlunders("default/echo, team/one,")
	if err != nil || !reflect.DeepEqual(got, []types.NamespacedName{{Namespace: "default", Name: "echo"}, {Namespace: "team", Name: "one"}}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"echo", "/echo", "ns/", "a/b/c"} {
		if _, err := parseFlunders(bad); err == nil {
			t.Errorf("parseFlunders(%q) accepted", bad)
		}
	}
}
