package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The front-proxy PKI (k3s's file names): a CA of its own, which extension
// API servers trust to vouch for the X-Remote-* identity headers, and the
// client certificate the API server presents when it proxies to them. It is
// separate from the cluster CA so that a client certificate the cluster CA
// issued to a user can never pass for the proxy.
const (
	FrontProxyCACertFile     = "request-header-ca.crt"
	FrontProxyCAKeyFile      = "request-header-ca.key"
	FrontProxyClientCertFile = "client-auth-proxy.crt"
	FrontProxyClientKeyFile  = "client-auth-proxy.key"
	// FrontProxyClientName is the client certificate's CN, the one name
	// extension API servers are told to accept (requestheader-allowed-names).
	FrontProxyClientName = "front-proxy-client"
)

// FrontProxy is the loaded front-proxy PKI; immutable, so safe for
// concurrent use.
type FrontProxy struct {
	caPEM  []byte
	client tls.Certificate
}

// EnsureFrontProxy loads the front-proxy CA and client certificate from
// cfg.Dir, making what is missing and re-issuing the client certificate
// when it no longer fits (another CA, near expiry), as Ensure does for the
// cluster PKI.
func EnsureFrontProxy(cfg Config) (*FrontProxy, error) {
	if cfg.Dir == "" {
		return nil, errors.New("certs: Config.Dir is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, dirMode); err != nil {
		return nil, fmt.Errorf("certs: create %s: %w", cfg.Dir, err)
	}
	ca, caPEM, err := ensureNamedCA(filepath.Join(cfg.Dir, FrontProxyCACertFile), filepath.Join(cfg.Dir, FrontProxyCAKeyFile), "skiff-request-header-ca", cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("certs: front-proxy CA: %w", err)
	}
	spec := leafSpec{cn: FrontProxyClientName, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, ttl: leafValidity}
	fits := func(c *x509.Certificate) bool {
		return c.Subject.CommonName == FrontProxyClientName && len(c.Subject.Organization) == 0
	}
	// ensureLeaf signs with the bundle's CA: a bundle of the front-proxy CA
	// alone issues the proxy's certificate with the same renewal rules.
	signer := &Bundle{ca: ca}
	certPEM, keyPEM, err := signer.ensureLeaf(filepath.Join(cfg.Dir, FrontProxyClientCertFile), filepath.Join(cfg.Dir, FrontProxyClientKeyFile), spec, fits)
	if err != nil {
		return nil, fmt.Errorf("certs: front-proxy client certificate: %w", err)
	}
	client, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certs: load front-proxy client key pair: %w", err)
	}
	return &FrontProxy{caPEM: caPEM, client: client}, nil
}

// CACertPEM is the front-proxy CA: what extension API servers read as
// requestheader-client-ca-file.
func (f *FrontProxy) CACertPEM() []byte { return bytes.Clone(f.caPEM) }

// ClientCertificate is the certificate the API server presents to
// extension API servers.
func (f *FrontProxy) ClientCertificate() tls.Certificate { return f.client }
