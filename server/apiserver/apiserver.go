// Package apiserver serves the Kubernetes REST API over the registry and
// storage: authentication, authorization, discovery and the resource verbs.
package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"skiff/server/audit"
	"skiff/server/auth"
	"skiff/server/registry"
	"skiff/server/storage"
)

// Authenticator identifies the caller of a request.
type Authenticator interface {
	// Authenticate returns the caller, nil (and no error) when the request
	// carries no credentials, or an error when its credentials are invalid.
	Authenticate(r *http.Request) (*auth.User, error)
}

// Authorizer decides whether a request may proceed.
type Authorizer interface {
	// Authorize reports whether the attributes are allowed, and why.
	Authorize(ctx context.Context, a auth.Attributes) (allowed bool, reason string, err error)
}

// Config wires the API server.
type Config struct {
	Registry      *registry.Registry
	Storage       *storage.Storage
	Authenticator Authenticator
	Authorizer    Authorizer
	Version       version.Info
	Logger        *slog.Logger
	// MaxBodyBytes caps request bodies (default 3 MiB, as upstream).
	MaxBodyBytes int64
	// Metrics, if set, records request counts and latencies.
	Metrics *Metrics
	// Tokens issues service-account tokens for serviceaccounts/token
	// (optional: without it the subresource is not served).
	Tokens TokenIssuer
	// MinTokenExpiration is the shortest token lifetime a TokenRequest may
	// ask for (upstream: 10 minutes; tests lower it).
	MinTokenExpiration time.Duration
	// Rules lists a user's rules for SelfSubjectRulesReview (optional).
	Rules RulesResolver
	// Admission plugins, run in order on every write after defaulting.
	Admission []Admitter
	// Health checks reported by /healthz, /livez and /readyz.
	Checks []Check
	// Extra non-resource handlers mounted on the router (e.g. /openapi/).
	Extra map[string]http.Handler
	// Kubelet forwards pods/log, exec, attach and portforward to the
	// agents (optional: without it they answer 503).
	Kubelet *KubeletProxy
	// FlowControl admits each request by priority and fairness (optional).
	FlowControl FlowControl
	// AuditPolicy decides what the audit log records of each request, and
	// AuditSink takes the events (audit.go); without both nothing is
	// audited, as upstream without --audit-policy-file.
	AuditPolicy *audit.Policy
	AuditSink   audit.Sink
}

// Check is one named health check.
type Check struct {
	Name string
	// Ready checks count only for /readyz; others count for all three.
	ReadyOnly bool
	Check     func(ctx context.Context) error
}

// Server is the API server's HTTP handler.
type Server struct {
	cfg    Config
	proto  runtime.Decoder
	fields *fieldManagers
	reg    *registry.Registry
	st     *storage.Storage
	log    *slog.Logger
	// agg serves the group-versions of extension API servers (aggregated.go).
	agg atomic.Pointer[aggregatorBox]
}

// New builds the API server.
func New(cfg Config) (*Server, error) {
	if cfg.Registry == nil || cfg.Storage == nil || cfg.Authenticator == nil || cfg.Authorizer == nil {
		return nil, fmt.Errorf("apiserver: Registry, Storage, Authenticator and Authorizer are required")
	}
	if cfg.MinTokenExpiration == 0 {
		cfg.MinTokenExpiration = 10 * time.Minute
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 3 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("apiserver: scheme: %w", err)
	}
	// The extension API kinds, so that their protobuf bodies (and the
	// DeleteOptions clients send in their group) decode.
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("apiserver: scheme: %w", err)
	}
	if err := apiregistrationv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("apiserver: scheme: %w", err)
	}
	return &Server{cfg: cfg, proto: protobuf.NewSerializer(scheme, scheme), fields: newFieldManagers(scheme, cfg.Registry),
		reg: cfg.Registry, st: cfg.Storage, log: cfg.Logger}, nil
}

// Handler is the whole API: health, version, discovery and resources.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.auditInit, s.instrument, s.recoverPanics, s.authenticate, s.audit, s.impersonate, s.flowControl, s.authorize)
	r.Get("/healthz", s.health(false))
	r.Get("/livez", s.health(false))
	r.Get("/readyz", s.health(true))
	r.Get("/healthz/*", s.health(false))
	r.Get("/livez/*", s.health(false))
	r.Get("/readyz/*", s.health(true))
	r.Get("/version", func(w http.ResponseWriter, req *http.Request) { writeJSON(w, req, http.StatusOK, s.cfg.Version) })
	r.Get("/api", s.serveAPIVersions)
	r.Get("/apis", s.serveAPIGroups)
	for path, h := range s.cfg.Extra {
		r.Handle(path, h)
	}
	r.HandleFunc("/api/*", s.serveAPI)
	r.HandleFunc("/apis/*", s.serveAPI)
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, req, apierrors.NewNotFound(schema.GroupResource{}, ""))
	})
	return r
}

// recoverPanics turns a panic into a 500 Status: no panic reaches a client
// as a dropped connection, and the stack goes to the log.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				writeError(w, r, apierrors.NewInternalError(fmt.Errorf("%v", p)))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// serveAPI routes /api/... and /apis/...: discovery documents or resources.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	if s.serveRemote(w, r) { // aggregated.go
		return
	}
	info := parseRequest(r)
	if info.Resource {
		s.serveResource(w, r, info)
		return
	}
	parts := splitPath(r.URL.Path)
	switch {
	// "/api/" and "/apis/" are "/api" and "/apis" (kubectl proxy users
	// and its conformance test ask with the slash).
	case len(parts) == 1 && parts[0] == "api" && r.Method == http.MethodGet:
		s.serveAPIVersions(w, r)
	case len(parts) == 1 && parts[0] == "apis" && r.Method == http.MethodGet:
		s.serveAPIGroups(w, r)
	case len(parts) == 2 && parts[0] == "api" && r.Method == http.MethodGet:
		s.serveResourceList(w, r, "", parts[1])
	case len(parts) == 2 && parts[0] == "apis" && r.Method == http.MethodGet:
		s.serveAPIGroup(w, r, parts[1])
	case len(parts) == 3 && parts[0] == "apis" && r.Method == http.MethodGet:
		s.serveResourceList(w, r, parts[1], parts[2])
	default:
		writeError(w, r, apierrors.NewNotFound(schema.GroupResource{}, ""))
	}
}

// health serves /healthz, /livez and /readyz with upstream's output: "ok",
// or per-check lines with ?verbose, and 500 when a check fails.
func (s *Server) health(ready bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		failed := false
		for _, c := range s.cfg.Checks {
			if c.ReadyOnly && !ready {
				continue
			}
			if err := c.Check(r.Context()); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, err)
			} else {
				fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, verbose := r.URL.Query()["verbose"]
		name := strings.TrimPrefix(r.URL.Path, "/")
		switch {
		case failed:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", b.String(), name)
		case verbose:
			fmt.Fprintf(w, "%s%s check passed\n", b.String(), name)
		default:
			fmt.Fprint(w, "ok")
		}
	}
}
