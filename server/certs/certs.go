// Package certs makes and keeps the server's TLS identity under
// <data-dir>/server/tls, the k3s way: one cluster CA signs the API serving
// cert and every client cert, and all of it is created on first start and
// reused (and renewed where needed) on every later one.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"skiff/jointoken"
)

// File names inside Config.Dir (the k3s names where k3s has one).
const (
	CACertFile      = "server-ca.crt"
	CAKeyFile       = "server-ca.key"
	ServingCertFile = "serving-kube-apiserver.crt"
	ServingKeyFile  = "serving-kube-apiserver.key"
	AdminCertFile   = "client-admin.crt"
	AdminKeyFile    = "client-admin.key"
	SAKeyFile       = "service.key"
	SAPubFile       = "service.pub"
)

// Identities baked into the managed certificates.
const (
	AdminUser         = "system:admin"
	AdminGroup        = "system:masters"
	servingCommonName = "skiff-apiserver"
	// DefaultClusterDomain is used when Config.ClusterDomain is empty.
	DefaultClusterDomain = "cluster.local"
	// saKeyBits: RSA 2048, see ensureServiceAccountKey.
	saKeyBits = 2048
)

// Config says where the PKI lives and which names the server answers to.
type Config struct {
	// Dir is <data-dir>/server/tls.
	Dir string
	// Hostname goes into the serving cert; empty means os.Hostname().
	Hostname string
	// Addresses are the node's IPs.
	Addresses []net.IP
	// ServiceIP is the first IP of the service CIDR; nil means 10.43.0.1.
	ServiceIP net.IP
	// ClusterDomain defaults to cluster.local.
	ClusterDomain string
	// ExtraSANs are --tls-san values: DNS names or IP literals.
	ExtraSANs []string
	// Now is the clock, for tests; nil means time.Now.
	Now func() time.Time
}

// Bundle is the loaded PKI. It is immutable once Ensure returns, so it is
// safe for concurrent use.
type Bundle struct {
	ca        *authority
	caPEM     []byte
	serving   tls.Certificate
	adminCert []byte
	adminKey  []byte
	saKey     crypto.Signer
}

func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		return c, errors.New("certs: Config.Dir is required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("certs: hostname: %w", err)
		}
		c.Hostname = h
	}
	c.ClusterDomain = strings.Trim(c.ClusterDomain, ".")
	if c.ClusterDomain == "" {
		c.ClusterDomain = DefaultClusterDomain
	}
	if c.ServiceIP == nil {
		c.ServiceIP = net.IPv4(10, 43, 0, 1)
	}
	return c, nil
}

// Ensure loads the PKI from cfg.Dir, creating whatever is missing and
// re-issuing the serving and admin certs when they no longer fit (new SANs,
// another CA, near expiry). Keys are kept across re-issues.
func Ensure(cfg Config) (*Bundle, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, dirMode); err != nil {
		return nil, fmt.Errorf("certs: create %s: %w", cfg.Dir, err)
	}
	if err := os.Chmod(cfg.Dir, dirMode); err != nil {
		return nil, fmt.Errorf("certs: chmod %s: %w", cfg.Dir, err)
	}
	ca, caPEM, err := ensureCA(cfg.Dir, cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("certs: CA: %w", err)
	}
	b := &Bundle{ca: ca, caPEM: caPEM}
	if err := b.ensureServing(cfg); err != nil {
		return nil, fmt.Errorf("certs: serving certificate: %w", err)
	}
	if err := b.ensureAdmin(cfg.Dir); err != nil {
		return nil, fmt.Errorf("certs: admin certificate: %w", err)
	}
	if b.saKey, err = ensureServiceAccountKey(cfg.Dir); err != nil {
		return nil, fmt.Errorf("certs: service-account key: %w", err)
	}
	return b, nil
}

// ensureCA loads the CA or creates it when neither file exists. A lone
// cert or key is an error: regenerating would silently invalidate every
// credential the cluster has handed out.
func ensureCA(dir string, now func() time.Time) (*authority, []byte, error) {
	return ensureNamedCA(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile), "skiff-server-ca", now)
}

// ensureNamedCA is ensureCA for the CA at certPath and keyPath, named
// <name>@<unix time> when it is made.
func ensureNamedCA(certPath, keyPath, name string, now func() time.Time) (*authority, []byte, error) {
	p, err := loadPair(certPath, keyPath)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case p.cert != nil && p.key != nil:
		if err := validateCA(p.cert, p.key); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", certPath, err)
		}
		return &authority{cert: p.cert, key: p.key, now: now}, p.certPEM, nil
	case p.cert != nil || p.key != nil:
		return nil, nil, fmt.Errorf("only one of %s and %s exists; restore the other or remove both", certPath, keyPath)
	}
	ca, err := newNamedAuthority(name, now)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := encodeKeyPEM(ca.key)
	if err != nil {
		return nil, nil, err
	}
	certPEM := encodeCertPEM(ca.cert.Raw)
	// Key first: a crash between the writes leaves a lone key, which the
	// next start reports instead of trusting a cert it cannot sign with.
	if err := writeFileAtomic(keyPath, keyPEM, keyMode); err != nil {
		return nil, nil, err
	}
	if err := writeFileAtomic(certPath, certPEM, certMode); err != nil {
		return nil, nil, err
	}
	return ca, certPEM, nil
}

// ensureLeaf returns the cert/key at certPath/keyPath, re-issuing the cert
// (with the same key) when it is missing, from another CA, for another key,
// near expiry, or not fits().
func (b *Bundle) ensureLeaf(certPath, keyPath string, spec leafSpec, fits func(*x509.Certificate) bool) (certPEM, keyPEM []byte, err error) {
	p, err := loadPair(certPath, keyPath)
	if err != nil {
		return nil, nil, err
	}
	if p.key == nil {
		key, err := newECKey()
		if err != nil {
			return nil, nil, err
		}
		if p.keyPEM, err = encodeKeyPEM(key); err != nil {
			return nil, nil, err
		}
		if err := writeFileAtomic(keyPath, p.keyPEM, keyMode); err != nil {
			return nil, nil, err
		}
		p.key, p.cert = key, nil
	}
	if p.cert != nil && b.ca.issued(p.cert) && keyMatches(p.cert, p.key) &&
		!b.ca.dueForRenewal(p.cert) && fits(p.cert) {
		return p.certPEM, p.keyPEM, nil
	}
	certPEM, err = b.ca.sign(spec, p.key.Public())
	if err != nil {
		return nil, nil, err
	}
	if err := writeFileAtomic(certPath, certPEM, certMode); err != nil {
		return nil, nil, err
	}
	return certPEM, p.keyPEM, nil
}

func (b *Bundle) ensureServing(cfg Config) error {
	dns, ips, err := servingSANs(cfg)
	if err != nil {
		return err
	}
	spec := leafSpec{cn: servingCommonName, dns: dns, ips: ips,
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, ttl: leafValidity}
	certPEM, keyPEM, err := b.ensureLeaf(filepath.Join(cfg.Dir, ServingCertFile), filepath.Join(cfg.Dir, ServingKeyFile),
		spec, func(c *x509.Certificate) bool { return coversSANs(c, dns, ips) })
	if err != nil {
		return err
	}
	b.serving, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("load serving key pair: %w", err)
	}
	return nil
}

func (b *Bundle) ensureAdmin(dir string) error {
	spec := leafSpec{cn: AdminUser, orgs: []string{AdminGroup},
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, ttl: leafValidity}
	fits := func(c *x509.Certificate) bool {
		return c.Subject.CommonName == AdminUser &&
			len(c.Subject.Organization) == 1 && c.Subject.Organization[0] == AdminGroup
	}
	var err error
	b.adminCert, b.adminKey, err = b.ensureLeaf(filepath.Join(dir, AdminCertFile), filepath.Join(dir, AdminKeyFile), spec, fits)
	return err
}

// ensureServiceAccountKey loads or creates the token signing key. New keys
// are RSA 2048 (RS256): OIDC requires relying parties to support RS256 and
// some workload-identity consumers accept nothing else, while ECDSA would
// only buy shorter tokens. An operator-supplied ECDSA key is kept as is.
func ensureServiceAccountKey(dir string) (crypto.Signer, error) {
	keyPath, pubPath := filepath.Join(dir, SAKeyFile), filepath.Join(dir, SAPubFile)
	key, _, err := loadKey(keyPath)
	if err != nil {
		return nil, err
	}
	if key == nil {
		rk, err := rsa.GenerateKey(rand.Reader, saKeyBits)
		if err != nil {
			return nil, fmt.Errorf("generate RSA key: %w", err)
		}
		keyPEM, err := encodeKeyPEM(rk)
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(keyPath, keyPEM, keyMode); err != nil {
			return nil, err
		}
		key = rk
	}
	switch key.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey:
	default:
		return nil, fmt.Errorf("%s: key type %T cannot sign tokens; use RSA or ECDSA", keyPath, key)
	}
	pubPEM, err := encodePublicKeyPEM(key.Public())
	if err != nil {
		return nil, err
	}
	// Rewrite the public half whenever it disagrees, so verifiers reading
	// service.pub never trust a stale key.
	have, err := readOptional(pubPath)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(have, pubPEM) {
		if err := writeFileAtomic(pubPath, pubPEM, certMode); err != nil {
			return nil, err
		}
	}
	return key, nil
}

// CACertPEM returns the CA bundle exactly as stored in server-ca.crt. Serve
// these bytes at /cacerts: CAHash is computed over them.
func (b *Bundle) CACertPEM() []byte { return bytes.Clone(b.caPEM) }

// CAPool returns a pool trusting every certificate in the CA bundle.
func (b *Bundle) CAPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.caPEM)
	return pool
}

// ServingCertificate is the API server's certificate and key.
func (b *Bundle) ServingCertificate() tls.Certificate { return b.serving }

// AdminCertPEM is the system:admin client certificate and key.
func (b *Bundle) AdminCertPEM() (cert, key []byte) {
	return bytes.Clone(b.adminCert), bytes.Clone(b.adminKey)
}

// ServiceAccountKey signs service-account tokens; its Public() verifies them.
func (b *Bundle) ServiceAccountKey() crypto.Signer { return b.saKey }

// IssueClientCert signs a client certificate with a fresh key for user cn in
// groups (the Organization field) valid for ttl.
func (b *Bundle) IssueClientCert(cn string, groups []string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	return b.ca.issueWithNewKey(leafSpec{cn: cn, orgs: groups,
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, ttl: ttl})
}

// IssueServingCert signs a serving certificate with a fresh key for the
// given names, valid for ttl.
func (b *Bundle) IssueServingCert(cn string, dnsNames []string, ips []net.IP, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	return b.ca.issueWithNewKey(leafSpec{cn: cn, dns: dnsNames, ips: ips,
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, ttl: ttl})
}

// CAHash is the <hash> of a K10<hash>::server:<secret> join token: what
// k3s computes over the bytes served at /cacerts. For a single-cert bundle
// (what Ensure creates) that is the hex SHA-256 of the PEM bytes as they
// are; for a multi-cert bundle, of the DER of the root the first cert
// chains to, so renewing an intermediate keeps join tokens valid.
func (b *Bundle) CAHash() string { return caHash(b.caPEM) }

// CA is the cluster CA's certificate and key, for the controller that
// signs approved CertificateSigningRequests.
func (b *Bundle) CA() (*x509.Certificate, crypto.Signer) { return b.ca.cert, b.ca.key }

// caHash is jointoken.CAHash: agents compute the hash with the same code.
func caHash(bundle []byte) string { return jointoken.CAHash(bundle) }

// ServerTLSConfig is the API server's TLS config: client certs are optional
// (tokens authenticate too) but verified against the CA when presented.
func (b *Bundle) ServerTLSConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{b.serving},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    b.CAPool(),
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

// IssuePeerCert signs a certificate with a fresh key that serves and
// dials, for the members of the embedded store (their Raft transport
// verifies both ends against the cluster CA).
func (b *Bundle) IssuePeerCert(cn string, ips []net.IP, dnsNames []string, ttl time.Duration) (tls.Certificate, error) {
	certPEM, keyPEM, err := b.ca.issueWithNewKey(leafSpec{cn: cn, dns: dnsNames, ips: ips,
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, ttl: ttl})
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// SharedFiles are the files of Dir every server of a cluster must hold
// alike: the CAs with their keys and the service-account key. A joining
// server receives them before Ensure makes the rest.
func SharedFiles() []string {
	return []string{CACertFile, CAKeyFile, SAKeyFile, FrontProxyCACertFile, FrontProxyCAKeyFile}
}
