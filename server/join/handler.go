// Package join is the server side of joining a node: it serves the CA at
// /cacerts, exchanges a join token (or a node's still-valid client
// certificate) for the node's client and serving certificates at
// /v1-skiff/node-certs, keeps node passwords, and manages the server token
// and extra bootstrap tokens.
package join

import (
	"context"
	"crypto"
	"crypto/subtle"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"skiff/jointoken"
)

// Identities of node certificates.
const (
	NodeUserPrefix = "system:node:"
	NodesGroup     = "system:nodes"
	// DefaultCertTTL is how long node certificates are valid; agents
	// renew them at two thirds of that.
	DefaultCertTTL = 365 * 24 * time.Hour
	maxBody        = 64 << 10
)

// Config wires the join handler.
type Config struct {
	// CACert and CAKey sign node certificates; CAPEM is served at /cacerts
	// byte for byte (the token's hash is computed over it).
	CACert *x509.Certificate
	CAKey  crypto.Signer
	CAPEM  []byte
	// ServerSecret is the secret of the server token.
	ServerSecret string
	// Client reads and writes node-password and bootstrap-token Secrets in
	// kube-system.
	Client kubernetes.Interface
	// ServerAddresses are the server's own IPs: a node may put them in its
	// serving certificate only when it joins from one of them (the agent
	// running beside the server), so no remote node can get a cert for
	// the API server's address.
	ServerAddresses []net.IP
	// ClusterFiles returns the secrets every server shares (by file name),
	// served to a server joining with the server token; nil: this server
	// lets no server join.
	ClusterFiles func() (map[string][]byte, error)
	// Members adds joining servers to the embedded Raft store; nil when the
	// store is not one (SQLite, external etcd), and a join is refused.
	Members MemberAdder
	// CertTTL is the node certificates' lifetime (DefaultCertTTL if 0).
	CertTTL time.Duration
	// Now is the clock (time.Now if nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// Handler serves the join endpoints.
type Handler struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg and returns the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.CACert == nil || cfg.CAKey == nil || len(cfg.CAPEM) == 0 || cfg.Client == nil {
		return nil, errors.New("join: CACert, CAKey, CAPEM and Client are required")
	}
	if cfg.ServerSecret == "" {
		return nil, errors.New("join: ServerSecret is required")
	}
	if cfg.CertTTL == 0 {
		cfg.CertTTL = DefaultCertTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg, log: cfg.Logger}, nil
}

// Wrap serves the join paths itself, before (and without) the API
// server's authentication and authorization, and everything else with
// next.
func (h *Handler) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isJoinPath(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isJoinPath(p string) bool {
	switch p {
	case jointoken.CACertsPath, jointoken.NodeCertsPath, jointoken.ServerBootstrapPath, jointoken.ServerJoinPath:
		return true
	}
	return false
}

// ServeHTTP serves /cacerts, /v1-skiff/node-certs and the server join
// paths (servers.go).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == jointoken.CACertsPath && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Write(h.cfg.CAPEM)
	case r.URL.Path == jointoken.NodeCertsPath && r.Method == http.MethodPost:
		h.nodeCerts(w, r)
	case r.URL.Path == jointoken.ServerBootstrapPath && r.Method == http.MethodPost:
		h.serverBootstrap(w, r)
	case r.URL.Path == jointoken.ServerJoinPath && r.Method == http.MethodPost:
		h.serverJoin(w, r)
	case isJoinPath(r.URL.Path):
		writeStatus(w, apierrors.NewMethodNotSupported(nodeCertsResource, r.Method))
	default:
		writeStatus(w, apierrors.NewNotFound(nodeCertsResource, ""))
	}
}

func (h *Handler) nodeCerts(w http.ResponseWriter, r *http.Request) {
	var req jointoken.NodeCertsRequest
	if !readJSON(w, r, &req) {
		return
	}
	if errs := validation.IsDNS1123Subdomain(req.NodeName); len(errs) > 0 {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("join: node name %q is not valid: %s", req.NodeName, strings.Join(errs, "; "))))
		return
	}
	renewal, err := h.authenticate(r.Context(), r, req.NodeName)
	if err != nil {
		h.log.Info("join refused", "node", req.NodeName, "remote", r.RemoteAddr, "err", err)
		writeStatus(w, err)
		return
	}
	if !renewal {
		if err := h.checkNodePassword(r.Context(), req.NodeName, req.NodePassword); err != nil {
			h.log.Info("join refused", "node", req.NodeName, "remote", r.RemoteAddr, "err", err)
			writeStatus(w, err)
			return
		}
	}
	resp, err := h.issue(req, remoteIP(r))
	if err != nil {
		writeStatus(w, err)
		return
	}
	h.log.Info("issued node certificates", "node", req.NodeName, "remote", r.RemoteAddr, "renewal", renewal)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

// authenticate accepts a verified client certificate of the same node
// (renewal: true), the server token's secret, or a valid bootstrap token.
func (h *Handler) authenticate(ctx context.Context, r *http.Request, node string) (renewal bool, err error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		if name, ok := nodeOf(cert); ok {
			if name != node {
				return false, apierrors.NewForbidden(nodeCertsResource, node,
					fmt.Errorf("node %q may renew only its own certificates", name))
			}
			return true, nil
		}
	}
	tok, ok := jointoken.FromRequest(r)
	if !ok {
		return false, apierrors.NewUnauthorized("join: no join token: send the token's secret as basic auth node:<secret> or a bearer <id>.<secret>")
	}
	if tok.IsServer() {
		if subtle.ConstantTimeCompare([]byte(tok.Secret), []byte(h.cfg.ServerSecret)) != 1 {
			return false, apierrors.NewUnauthorized("join: the token's secret is not valid for this server")
		}
		return false, nil
	}
	return false, h.checkBootstrapToken(ctx, tok)
}

// nodeOf returns the node a client certificate is for.
func nodeOf(cert *x509.Certificate) (string, bool) {
	name, ok := strings.CutPrefix(cert.Subject.CommonName, NodeUserPrefix)
	if !ok || name == "" {
		return "", false
	}
	for _, o := range cert.Subject.Organization {
		if o == NodesGroup {
			return name, true
		}
	}
	return "", false
}

func remoteIP(r *http.Request) net.IP {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return net.ParseIP(host)
}

var nodeCertsResource = schema.GroupResource{Resource: "node-certs"}

func writeStatus(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(s.Code))
	json.NewEncoder(w).Encode(s)
}

// readJSON decodes a request body of at most maxBody bytes into v; on
// failure it answers 400 and returns false.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(body) > maxBody {
		err = errors.New("request body too large")
	}
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest("join: cannot read the request: "+err.Error()))
		return false
	}
	return true
}
