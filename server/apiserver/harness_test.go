package apiserver_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
	"skiff/server/storage"
)

// testAdmin authenticates every request as a cluster admin: these tests
// exercise the REST semantics, not authentication (the e2e tests do that
// through real certificates).
type testAdmin struct{}

func (testAdmin) Authenticate(r *http.Request) (*auth.User, error) {
	return &auth.User{Name: "admin", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}, nil
}

// harness is an API server over a real SQLite store, on a local HTTP port.
type harness struct {
	srv    *httptest.Server
	cache  *storage.Cache
	client kubernetes.Interface
	cfg    *rest.Config
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	s := apitest.Start(t, apitest.Options{Authenticator: testAdmin{}})
	srv := httptest.NewServer(s.API.Handler())
	cfg := &rest.Config{Host: srv.URL, QPS: -1, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	h := &harness{srv: srv, cache: s.Storage.Cache(), client: kubernetes.NewForConfigOrDie(cfg), cfg: cfg}
	h.createNamespace(t, "default")
	return h
}

func (h *harness) createNamespace(t *testing.T, name string) {
	t.Helper()
	body := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + name + `"}}`
	code, out := h.do(t, http.MethodPost, "/api/v1/namespaces", "application/json", body)
	if code != http.StatusCreated {
		t.Fatalf("create namespace %s: %d %s", name, code, out)
	}
}
