package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"skiff/server/auth"
	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/server/validation"
	"skiff/store/sqlite"
)

// testAdmin authenticates every request as a cluster admin: these tests
// exercise the REST semantics, not authentication (the e2e tests do that
// through real certificates).
type testAdmin struct{}

func (testAdmin) Authenticate(r *http.Request) (*auth.User, error) {
	return &auth.User{Name: "admin", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}, nil
}

type allowAll struct{}

func (allowAll) Authorize(context.Context, auth.Attributes) (bool, string, error) {
	return true, "", nil
}

// harness is an API server over a real SQLite store, on a local HTTP port.
type harness struct {
	srv    *httptest.Server
	st     *sqlite.Store
	cache  *storage.Cache
	client kubernetes.Interface
	cfg    *rest.Config
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Builtin(registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate})...)
	if err != nil {
		t.Fatal(err)
	}
	objects := storage.New(st, reg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		objects.Cache().Run(ctx, nil)
	}()
	api, err := New(Config{Registry: reg, Storage: objects, Authenticator: testAdmin{}, Authorizer: allowAll{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	cfg := &rest.Config{Host: srv.URL, QPS: -1, Timeout: 30 * time.Second}
	client := kubernetes.NewForConfigOrDie(cfg)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		<-done
		st.Close()
	})
	h := &harness{srv: srv, st: st, cache: objects.Cache(), client: client, cfg: cfg}
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
