// Package join is the agent side of joining a server: it checks the
// server's CA against the hash in the join token before trusting it,
// exchanges the token's secret for the node's client and serving
// certificates, keeps them under <data-dir>/agent/certs, and renews them
// before they expire.
package join

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"skiff/jointoken"
)

// Sentinel errors, wrapped by what Join and Renew return.
var (
	// ErrCAMismatch: the server's CA is not the one the token names.
	ErrCAMismatch = jointoken.ErrCAMismatch
	// ErrUnauthorized: the server refused the token (401).
	ErrUnauthorized = errors.New("the server refused the token")
	// ErrForbidden: the server refused the node (403), e.g. its name is
	// taken by another machine.
	ErrForbidden = errors.New("the server refused the node")
)

// File names under <data-dir>/agent/certs.
const (
	CACertFile      = "ca.crt"
	ClientCertFile  = "client.crt"
	ClientKeyFile   = "client.key"
	ServingCertFile = "serving.crt"
	ServingKeyFile  = "serving.key"
	PasswordFile    = "node-password"
	TokenFile       = "token"
	KubeconfigFile  = "kubeconfig"
)

// Config says whom to join and as what.
type Config struct {
	// ServerURL is https://host:port of a server.
	ServerURL string
	// Token is the join token, K10<hash>::server:<secret> or
	// K10<hash>::<id>.<secret>.
	Token string
	// NodeName is the node's name.
	NodeName string
	// DataDir is the agent's data directory (<DataDir>/agent/certs).
	DataDir string
	// NodeIPs and DNSNames go into the serving certificate (the node name
	// always does).
	NodeIPs  []net.IP
	DNSNames []string
	// OnRenew, if set, is called after RenewLoop stored new certificates.
	OnRenew func()
	// Timeout bounds each HTTP request (default 30 s).
	Timeout time.Duration
	// Now is the clock (time.Now if nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// Credentials are the node's stored certificates.
type Credentials struct {
	// CAPEM is the cluster CA bundle (PEM) the token vouched for.
	CAPEM string
	// Paths of the stored files.
	CACertFile, ClientCertFile, ClientKeyFile, ServingCertFile, ServingKeyFile string
	// Kubeconfig is a kubeconfig for system:node:<name> at ServerURL that
	// names the files above (so it sees renewed certificates).
	Kubeconfig string
	NodeName   string
	ServerURL  string

	cfg   Config
	token jointoken.Token
	dir   string
	mu    sync.Mutex
	cur   *pairs
}

// pairs are the loaded key pairs and when they expire.
type pairs struct {
	client, serving tls.Certificate
	clientX509      *x509.Certificate
	servingX509     *x509.Certificate
}

func (c Config) withDefaults() (Config, jointoken.Token, error) {
	u, err := url.Parse(c.ServerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return c, jointoken.Token{}, fmt.Errorf("join: server URL %q: want https://host:port", c.ServerURL)
	}
	if c.NodeName == "" || c.DataDir == "" {
		return c, jointoken.Token{}, errors.New("join: NodeName and DataDir are required")
	}
	tok, err := jointoken.Parse(c.Token)
	if err != nil {
		return c, jointoken.Token{}, fmt.Errorf("join: %w", err)
	}
	if tok.CAHash == "" {
		return c, jointoken.Token{}, fmt.Errorf("join: the token has no CA hash, so the server cannot be verified: use the full K10<hash>::... token (cat <data-dir>/server/token on the server)")
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, tok, nil
}

// CertsDir is where the node's certificates are kept.
func CertsDir(dataDir string) string { return filepath.Join(dataDir, "agent", "certs") }

// Join returns the node's credentials: the stored ones when they are for
// this node and this server CA and not yet due for renewal, else new ones
// from the server. A server whose CA does not match the token's hash is
// refused before any secret is sent, and nothing is written then.
func Join(ctx context.Context, cfg Config) (*Credentials, error) {
	cfg, tok, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dir := CertsDir(cfg.DataDir)
	c := &Credentials{cfg: cfg, token: tok, dir: dir, NodeName: cfg.NodeName, ServerURL: cfg.ServerURL,
		CACertFile: filepath.Join(dir, CACertFile), ClientCertFile: filepath.Join(dir, ClientCertFile),
		ClientKeyFile: filepath.Join(dir, ClientKeyFile), ServingCertFile: filepath.Join(dir, ServingCertFile),
		ServingKeyFile: filepath.Join(dir, ServingKeyFile), Kubeconfig: filepath.Join(dir, KubeconfigFile)}
	if stored, caPEM := c.loadStored(); stored != nil {
		c.CAPEM, c.cur = string(caPEM), stored
		if cfg.Now().Before(c.renewAt()) {
			cfg.Logger.Info("reusing stored node certificates", "node", cfg.NodeName, "renew-at", c.renewAt().Format(time.RFC3339))
			return c, c.writeConfigFiles()
		}
		err := c.Renew(ctx)
		if err == nil {
			return c, nil
		}
		cfg.Logger.Warn("renewing stored node certificates failed; joining with the token", "err", err)
	}
	caPEM, err := fetchVerifiedCA(ctx, cfg, tok)
	if err != nil {
		return nil, err
	}
	c.CAPEM = string(caPEM)
	if err := c.renewWithToken(ctx); err != nil {
		return nil, err
	}
	cfg.Logger.Info("joined", "server", cfg.ServerURL, "node", cfg.NodeName)
	return c, nil
}

// renewAt is two thirds into the shorter-lived certificate's life.
func (c *Credentials) renewAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := func(x *x509.Certificate) time.Time {
		return x.NotBefore.Add(x.NotAfter.Sub(x.NotBefore) * 2 / 3)
	}
	a, b := at(c.cur.clientX509), at(c.cur.servingX509)
	if b.Before(a) {
		return b
	}
	return a
}

// RenewAt is when RenewLoop will next renew the certificates.
func (c *Credentials) RenewAt() time.Time { return c.renewAt() }

// GetClientCertificate serves the current client certificate, for
// tls.Config.GetClientCertificate.
func (c *Credentials) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cert := c.cur.client
	return &cert, nil
}

// GetCertificate serves the current serving certificate, for
// tls.Config.GetCertificate (the agent's port 10250).
func (c *Credentials) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cert := c.cur.serving
	return &cert, nil
}

// RenewLoop renews the certificates two thirds into their life until ctx
// ends, retrying failures with back-off (1 s doubling to 5 min).
func (c *Credentials) RenewLoop(ctx context.Context) {
	backoff := time.Second
	for {
		wait := c.renewAt().Sub(c.cfg.Now())
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if err := c.Renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			c.cfg.Logger.Warn("renewing node certificates failed", "err", err, "retry-in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, 5*time.Minute)
			continue
		}
		backoff = time.Second
		c.cfg.Logger.Info("renewed node certificates", "node", c.NodeName, "next", c.renewAt().Format(time.RFC3339))
		if c.cfg.OnRenew != nil {
			c.cfg.OnRenew()
		}
	}
}

// Renew gets new certificates now: authenticated by the current client
// certificate while it is valid, else (or when the server refuses it) by
// the token and node password.
func (c *Credentials) Renew(ctx context.Context) error {
	c.mu.Lock()
	valid := c.cur != nil && c.cfg.Now().Before(c.cur.clientX509.NotAfter)
	c.mu.Unlock()
	if !valid {
		return c.renewWithToken(ctx)
	}
	res, err := c.request(ctx, authClientCert, "")
	if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden) {
		// The server no longer takes this certificate: the token and
		// node password decide.
		c.cfg.Logger.Warn("renewal with the client certificate refused; using the token", "err", err)
		return c.renewWithToken(ctx)
	}
	if err != nil {
		return err
	}
	return c.store(res, "")
}

// renewWithToken gets certificates with the token's secret and the node
// password (made on the first join and kept).
func (c *Credentials) renewWithToken(ctx context.Context) error {
	password, err := ensurePassword(c.dir)
	if err != nil {
		return err
	}
	res, err := c.request(ctx, authToken, password)
	if err != nil {
		return err
	}
	return c.store(res, c.token.String())
}
