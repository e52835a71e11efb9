package aggregator

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"skiff/server/auth"
)

func TestSetIdentity_ClientSentHeaders_ReplacedByCaller(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/apis/g/v", nil)
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Impersonate-User", "root")
	req.Header.Set("X-Remote-User", "mallory")
	req.Header.Add("X-Remote-Group", "system:masters")
	req.Header.Set("X-Remote-Extra-Scopes", "all")
	req.Header.Set("Accept", "application/json")
	u := &auth.User{Name: "alice", UID: "u-1", Groups: []string{"dev", "system:authenticated"},
		Extra: map[string][]string{"scopes.example.com/Team": {"a", "b"}}}
	setIdentity(req, u)
	want := map[string][]string{
		"X-Remote-User":  {"alice"},
		"X-Remote-Uid":   {"u-1"},
		"X-Remote-Group": {"dev", "system:authenticated"},
		// Keys are escaped as upstream: "/" becomes %2F.
		"X-Remote-Extra-Scopes.example.com%2fteam": {"a", "b"},
		"Accept": {"application/json"},
	}
	for k, v := range want {
		if got := req.Header.Values(k); !slices.Equal(got, v) {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	for _, gone := range []string{"Authorization", "Impersonate-User", "X-Remote-Extra-Scopes"} {
		if v := req.Header.Values(gone); len(v) > 0 {
			t.Errorf("%s = %q, want it removed", gone, v)
		}
	}
}

func TestProxyHandler_Available_ForwardsWithIdentityAndFrontProxyCert(t *testing.T) {
	type seen struct {
		Path, Query, User string
		Groups            []string
		ClientCN          string
	}
	b := newBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{Path: r.URL.Path, Query: r.URL.RawQuery, User: r.Header.Get("X-Remote-User"), Groups: r.Header.Values("X-Remote-Group")}
		if len(r.TLS.PeerCertificates) > 0 {
			s.ClientCN = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		json.NewEncoder(w).Encode(s)
	}))
	api := remoteAPIService(b.caBundle)
	setCondition(api, newCondition(apiregistrationv1.ConditionTrue, "Passed", "all checks passed"))
	p := &proxyHandler{api: api, resolver: listers(t, sampleService(), sampleSlice(true)), transports: b.transports(), log: slog.New(slog.DiscardHandler)}
	req := httptest.NewRequest(http.MethodGet, "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders?limit=5", nil)
	req.Header.Set("X-Remote-User", "mallory")
	req = req.WithContext(auth.WithUser(req.Context(), &auth.User{Name: "alice", Groups: []string{"dev", "system:authenticated"}}))
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var got seen
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := seen{Path: "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders", Query: "limit=5", User: "alice",
		Groups: []string{"dev", "system:authenticated"}, ClientCN: "front-proxy-client"}
	if got.Path != want.Path || got.Query != want.Query || got.User != want.User || !slices.Equal(got.Groups, want.Groups) || got.ClientCN != want.ClientCN {
		t.Errorf("backend saw %+v, want %+v", got, want)
	}
	if addrs := b.addresses(); len(addrs) != 1 || addrs[0] != "10.42.0.7:443" {
		t.Errorf("dialled %v, want the pod's address and target port 10.42.0.7:443", addrs)
	}
}

func TestProxyHandler_Unusable_Answers503Status(t *testing.T) {
	b := newBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the backend was reached") }))
	unavailable := remoteAPIService(b.caBundle)
	setCondition(unavailable, newCondition(apiregistrationv1.ConditionFalse, "MissingEndpoints", "x"))
	noEndpoints := remoteAPIService(b.caBundle)
	setCondition(noEndpoints, newCondition(apiregistrationv1.ConditionTrue, "Passed", "all checks passed"))
	tests := []struct {
		name string
		api  *apiregistrationv1.APIService
		res  resolver
	}{
		{"not available", unavailable, listers(t, sampleService(), sampleSlice(true))},
		{"available but no ready endpoint now", noEndpoints, listers(t, sampleService(), sampleSlice(false))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &proxyHandler{api: tt.api, resolver: tt.res, transports: b.transports(), log: slog.New(slog.DiscardHandler)}
			req := httptest.NewRequest(http.MethodGet, "/apis/wardle.example.com/v1alpha1", nil)
			req = req.WithContext(auth.WithUser(req.Context(), &auth.User{Name: "alice"}))
			rec := httptest.NewRecorder()
			p.ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Body)
			var st metav1.Status
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if rec.Code != http.StatusServiceUnavailable || st.Kind != "Status" || st.Code != http.StatusServiceUnavailable || st.Reason != metav1.StatusReasonServiceUnavailable {
				t.Errorf("got %d %+v, want a 503 Status", rec.Code, st)
			}
		})
	}
}
