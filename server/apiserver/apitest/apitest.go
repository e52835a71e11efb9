// Package apitest starts a real API server over a SQLite store in a
// temporary directory, for the tests of the parts that talk to it
// (controllers, admission): fakes cannot tell whether the server really
// behaves as they assume. Authentication and authorization are left out
// (everyone is allowed): those have tests of their own.
package apitest

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"skiff/server/apiserver"
	"skiff/server/audit"
	"skiff/server/auth"
	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/server/validation"
	"skiff/store"
	"skiff/store/sqlite"
)

// Options adjust the server.
type Options struct {
	// Admission makes the admission plugins to run, given the store (none
	// by default).
	Admission func(st store.Store) []apiserver.Admitter
	// Authenticator for network requests (none by default: in-process
	// requests through Config carry their user).
	Authenticator apiserver.Authenticator
	// Logger for the server (warnings to the test log by default).
	Logger *slog.Logger
	// Authorizer decides requests (everyone is allowed by default).
	Authorizer apiserver.Authorizer
	// Tokens issues service-account tokens (none by default: the token
	// subresource is not served).
	Tokens apiserver.TokenIssuer
	// Resources are served besides the built-ins (rows not yet in
	// registry.Builtin, such as CustomResourceDefinitions').
	Resources []*registry.Resource
	// AuditPolicy and AuditSink turn the audit log on (off by default).
	AuditPolicy *audit.Policy
	AuditSink   audit.Sink
}

// Server is a running API server and what it stands on.
type Server struct {
	API      *apiserver.Server
	Storage  *storage.Storage
	Registry *registry.Registry
	Store    *sqlite.Store
}

type allowAll struct{}

func (allowAll) Authorize(context.Context, auth.Attributes) (bool, string, error) {
	return true, "", nil
}

type nobody struct{}

func (nobody) Authenticate(*http.Request) (*auth.User, error) { return nil, nil }

// Start starts a server that stops when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	rows := registry.Builtin(registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource})
	reg, err := registry.New(append(rows, opts.Resources...)...)
	if err != nil {
		t.Fatal(err)
	}
	objects := storage.New(st, reg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		objects.Cache().Run(ctx, nil)
	}()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var plugins []apiserver.Admitter
	if opts.Admission != nil {
		plugins = opts.Admission(st)
	}
	authn := opts.Authenticator
	if authn == nil {
		authn = nobody{}
	}
	var authz apiserver.Authorizer = allowAll{}
	if opts.Authorizer != nil {
		authz = opts.Authorizer
	}
	api, err := apiserver.New(apiserver.Config{Registry: reg, Storage: objects, Authenticator: authn, Authorizer: authz, Tokens: opts.Tokens, Admission: plugins, Logger: log,
		AuditPolicy: opts.AuditPolicy, AuditSink: opts.AuditSink})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		st.Close()
	})
	return &Server{API: api, Storage: objects, Registry: reg, Store: st}
}

// Config is a client-go config reaching the server in-process as user
// (system:kube-controller-manager when nil), as the control loops do.
func (s *Server) Config(user *auth.User) *rest.Config {
	if user == nil {
		user = &auth.User{Name: "system:kube-controller-manager", Groups: []string{auth.GroupAuthenticated}}
	}
	return &rest.Config{Host: "http://skiff.internal", Transport: s.API.Transport(user), RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
}
