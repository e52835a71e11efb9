package images

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"sigs.k8s.io/yaml"
)

// Registries is a parsed k3s-style registries.yaml:
//
//	mirrors:
//	  docker.io:
//	    endpoint: ["https://mirror:5000"]
//	configs:
//	  "mirror:5000":
//	    auth: {username: u, password: p}
//	    tls: {insecure_skip_verify: true, ca_file: /ca.pem}
//
// A mirror named "*" applies to every registry without its own entry.
type Registries struct {
	Mirrors map[string]Mirror         `json:"mirrors"`
	Configs map[string]RegistryConfig `json:"configs"`

	mu sync.Mutex
	// transports are reused across pulls, per endpoint host.
	transports map[string]*http.Transport
}

// Mirror lists the endpoints tried, in order, before the registry itself.
type Mirror struct {
	Endpoints []string `json:"endpoint"`
}

// RegistryConfig is the login and TLS settings of one registry host
// (host[:port], as in an endpoint URL or an image name).
type RegistryConfig struct {
	Auth *AuthConfig `json:"auth"`
	TLS  *TLSConfig  `json:"tls"`
}

// AuthConfig is a registry login.
type AuthConfig struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"` // base64 "username:password"
	IdentityToken string `json:"identitytoken"`
}

// TLSConfig is the client TLS of one registry host.
type TLSConfig struct {
	CAFile             string `json:"ca_file"`
	CertFile           string `json:"cert_file"`
	KeyFile            string `json:"key_file"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify"`
}

// LoadRegistries reads a registries.yaml; an empty path or a missing file
// gives an empty configuration.
func LoadRegistries(path string) (*Registries, error) {
	regs := &Registries{}
	if path == "" {
		return regs, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return regs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("images: registries file: %w", err)
	}
	if err := yaml.Unmarshal(b, regs); err != nil {
		return nil, fmt.Errorf("images: registries file %s: %w", path, err)
	}
	for name, m := range regs.Mirrors {
		for _, ep := range m.Endpoints {
			if _, err := parseEndpoint(ep); err != nil {
				return nil, fmt.Errorf("images: registries file %s: mirror %s: %w", path, name, err)
			}
		}
	}
	return regs, nil
}

// parseEndpoint parses a mirror endpoint URL; the registry API path /v2
// is appended to its path.
func parseEndpoint(ep string) (*url.URL, error) {
	if !strings.Contains(ep, "://") {
		ep = "https://" + ep
	}
	u, err := url.Parse(ep)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", ep, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: want http(s)://host[:port][/path]", ep)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/v2") {
		u.Path += "/v2"
	}
	return u, nil
}

// defaultHost is where the registry of an image name is reached without a
// mirror.
func defaultHost(registry string) string {
	if registry == "docker.io" {
		return "registry-1.docker.io"
	}
	return registry
}

// isDockerHub reports whether host is one of Docker Hub's names.
func isDockerHub(host string) bool {
	switch host {
	case "docker.io", "index.docker.io", "registry-1.docker.io":
		return true
	}
	return false
}

// credentialHost reduces a pull-secret registry key ("https://index.docker.io/v1/",
// "registry:5000") to host[:port].
func credentialHost(registry string) string {
	h := registry
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	if i := strings.Index(h, "/"); i >= 0 {
		h = h[:i]
	}
	return h
}

// sameHost reports whether two registry host names are the same registry.
func sameHost(a, b string) bool {
	return a == b || isDockerHub(a) && isDockerHub(b)
}

// hosts returns the RegistryHosts function of a pull: the mirrors of the
// image's registry (or of "*"), then the registry itself. creds are the
// pod's pull secrets; registries.yaml logins are the fallback.
func (r *Registries) hosts(creds []Credential) docker.RegistryHosts {
	return func(registry string) ([]docker.RegistryHost, error) {
		var endpoints []*url.URL
		m, ok := r.Mirrors[registry]
		if !ok {
			m = r.Mirrors["*"]
		}
		for _, ep := range m.Endpoints {
			u, err := parseEndpoint(ep)
			if err != nil {
				return nil, err
			}
			endpoints = append(endpoints, u)
		}
		upstream := &url.URL{Scheme: "https", Host: defaultHost(registry), Path: "/v2"}
		if local, _ := docker.MatchLocalhost(upstream.Host); local {
			upstream.Scheme = "http" // as Docker: a registry on localhost speaks plain HTTP
		}
		endpoints = append(endpoints, upstream)
		out := make([]docker.RegistryHost, 0, len(endpoints))
		for _, u := range endpoints {
			h, err := r.registryHost(u, registry, creds)
			if err != nil {
				return nil, err
			}
			out = append(out, h)
		}
		return out, nil
	}
}

// registryHost configures TLS and login for one endpoint.
func (r *Registries) registryHost(u *url.URL, registry string, creds []Credential) (docker.RegistryHost, error) {
	cfg, ok := r.Configs[u.Host]
	if !ok {
		cfg = r.Configs[registry]
	}
	tlsCfg, err := cfg.TLS.clientConfig()
	if err != nil {
		return docker.RegistryHost{}, fmt.Errorf("registry %s: %w", u.Host, err)
	}
	hc := &http.Client{Transport: r.transport(u.Host, tlsCfg)}
	// host is the registry host that asks for a login: the pod's pull
	// secrets for that host win over registries.yaml.
	login := func(host string) (string, string, error) {
		for _, c := range creds {
			if sameHost(credentialHost(c.Registry), host) {
				return c.Username, c.Password, nil
			}
		}
		return cfg.Auth.credentials()
	}
	return docker.RegistryHost{
		Client:       hc,
		Authorizer:   docker.NewDockerAuthorizer(docker.WithAuthClient(hc), docker.WithAuthCreds(login)),
		Host:         u.Host,
		Scheme:       u.Scheme,
		Path:         u.Path,
		Capabilities: docker.HostCapabilityPull | docker.HostCapabilityResolve,
	}, nil
}

// transport returns the shared transport of an endpoint host.
func (r *Registries) transport(host string, tlsCfg *tls.Config) *http.Transport {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.transports[host]; ok {
		return t
	}
	if r.transports == nil {
		r.transports = map[string]*http.Transport{}
	}
	t := docker.DefaultHTTPTransport(tlsCfg)
	r.transports[host] = t
	return t
}

// credentials returns the login of an auth block ("" when none).
func (a *AuthConfig) credentials() (string, string, error) {
	switch {
	case a == nil:
		return "", "", nil
	case a.IdentityToken != "":
		return "", a.IdentityToken, nil
	case a.Username != "" || a.Password != "":
		return a.Username, a.Password, nil
	case a.Auth != "":
		b, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return "", "", fmt.Errorf("registry auth: %w", err)
		}
		user, pass, ok := strings.Cut(string(b), ":")
		if !ok {
			return "", "", errors.New("registry auth: want base64 of username:password")
		}
		return user, pass, nil
	}
	return "", "", nil
}

// clientConfig builds the client TLS configuration (nil: defaults).
func (t *TLSConfig) clientConfig() (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no certificate found", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
