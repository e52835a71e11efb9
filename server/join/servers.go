package join

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"skiff/jointoken"
	"skiff/store"
)

// MemberAdder adds a server to the embedded store (a *raft.Store).
type MemberAdder interface {
	AddVoter(ctx context.Context, id, addr string) error
}

// ErrServerJoin is wrapped by the errors of FetchClusterFiles and
// RequestMembership that the answering server gave.
var ErrServerJoin = errors.New("the server refused the join")

// authenticateServer accepts only the server token's secret: the answers
// hold the CA key.
func (h *Handler) authenticateServer(r *http.Request) error {
	tok, ok := jointoken.FromRequest(r)
	if !ok || !tok.IsServer() {
		return apierrors.NewUnauthorized("join: a server joins with the server token (K10<hash>::server:<secret>)")
	}
	if subtle.ConstantTimeCompare([]byte(tok.Secret), []byte(h.cfg.ServerSecret)) != 1 {
		return apierrors.NewUnauthorized("join: the token's secret is not valid for this server")
	}
	return nil
}

func (h *Handler) serverBootstrap(w http.ResponseWriter, r *http.Request) {
	if err := h.authenticateServer(r); err != nil {
		h.log.Info("server bootstrap refused", "remote", r.RemoteAddr, "err", err)
		writeStatus(w, err)
		return
	}
	if h.cfg.ClusterFiles == nil || h.cfg.Members == nil {
		writeStatus(w, apierrors.NewBadRequest("join: this server runs no embedded cluster store: start the first server with --cluster-init (or share an external --datastore-endpoint)"))
		return
	}
	files, err := h.cfg.ClusterFiles()
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	h.log.Info("served the cluster secrets to a joining server", "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(jointoken.ServerBootstrapResponse{Files: files})
}

func (h *Handler) serverJoin(w http.ResponseWriter, r *http.Request) {
	if err := h.authenticateServer(r); err != nil {
		h.log.Info("server join refused", "remote", r.RemoteAddr, "err", err)
		writeStatus(w, err)
		return
	}
	if h.cfg.Members == nil {
		writeStatus(w, apierrors.NewBadRequest("join: this server runs no embedded cluster store: start the first server with --cluster-init"))
		return
	}
	var req jointoken.ServerJoinRequest
	if !readJSON(w, r, &req) {
		return
	}
	if errs := validation.IsDNS1123Subdomain(req.Name); len(errs) > 0 {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("join: member name %q is not valid: %s", req.Name, strings.Join(errs, "; "))))
		return
	}
	if _, port, err := net.SplitHostPort(req.Address); err != nil || port == "" {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("join: member address %q is not host:port", req.Address)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := h.cfg.Members.AddVoter(ctx, req.Name, req.Address); err != nil {
		h.log.Warn("adding a server to the cluster failed", "member", req.Name, "address", req.Address, "err", err)
		if errors.Is(err, store.ErrUnavailable) {
			st := apierrors.NewServiceUnavailable("join: the cluster cannot add a member now (no leader or no quorum): " + err.Error())
			writeStatus(w, st)
			return
		}
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	h.log.Info("added a server to the cluster", "member", req.Name, "address", req.Address, "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success","code":200}` + "\n"))
}

// StatusError is a server's refusal; it wraps ErrServerJoin.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

func (e *StatusError) Unwrap() error { return ErrServerJoin }

// ClusterClient is a joining server's side of the server join protocol.
type ClusterClient struct {
	ServerURL string
	Token     jointoken.Token
	// Timeout bounds each request (30 s if 0).
	Timeout time.Duration
	caPEM   []byte
}

// FetchClusterFiles verifies the server's CA against the token's hash,
// then fetches the secrets the cluster's servers share.
func (c *ClusterClient) FetchClusterFiles(ctx context.Context) (map[string][]byte, error) {
	if c.Token.CAHash == "" {
		return nil, errors.New("join: a server joins with the full server token (K10<hash>::server:<secret>): the hash pins the cluster's CA")
	}
	ca, err := jointoken.FetchVerifiedCA(ctx, c.ServerURL, c.Token.CAHash, c.timeout())
	if err != nil {
		return nil, err
	}
	c.caPEM = ca
	var resp jointoken.ServerBootstrapResponse
	if err := c.post(ctx, jointoken.ServerBootstrapPath, struct{}{}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Files) == 0 {
		return nil, fmt.Errorf("join: %s sent no cluster files: %w", c.ServerURL, &StatusError{Code: http.StatusOK, Message: "no files"})
	}
	return resp.Files, nil
}

// RequestMembership asks the server to add this server's member; caPEM
// verifies the server (the cluster CA, as fetched or already on disk).
func (c *ClusterClient) RequestMembership(ctx context.Context, caPEM []byte, name, addr string) error {
	c.caPEM = caPEM
	return c.post(ctx, jointoken.ServerJoinPath, jointoken.ServerJoinRequest{Name: name, Address: addr}, nil)
}

func (c *ClusterClient) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 30 * time.Second
}

func (c *ClusterClient) post(ctx context.Context, path string, body, out any) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.caPEM) {
		return errors.New("join: no CA to verify the server with")
	}
	client := &http.Client{Timeout: c.timeout(), Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		Proxy:           http.ProxyFromEnvironment,
	}}
	defer client.CloseIdleConnections()
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.ServerURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	c.Token.SetAuth(req)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("join: %s: %w", c.ServerURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("join: %s: %w", c.ServerURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		var st struct{ Message string }
		if json.Unmarshal(data, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		return fmt.Errorf("join: %s answered: %w", c.ServerURL, &StatusError{Code: resp.StatusCode, Message: msg})
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("join: %s: bad answer: %w", c.ServerURL, err)
	}
	return nil
}
