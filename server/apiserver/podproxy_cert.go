package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The API server's client certificate for the agents.
const (
	KubeletClientCN       = "system:kube-apiserver-kubelet-client"
	KubeletClientCertFile = "client-kube-apiserver-kubelet.crt"
	KubeletClientKeyFile  = "client-kube-apiserver-kubelet.key"
)

// ClientCertIssuer signs client certificates (certs.Bundle does).
type ClientCertIssuer interface {
	// IssueClientCert signs a certificate with a new key for user cn in
	// groups, valid for ttl.
	IssueClientCert(cn string, groups []string, ttl time.Duration) (certPEM, keyPEM []byte, err error)
}

// KubeletClientCert keeps the API server's client certificate for the
// agents (CN system:kube-apiserver-kubelet-client, no groups) in Dir:
// reused while it chains to Roots and has more than a third of its life
// left, re-issued and rewritten otherwise. Get is safe for concurrent use
// and cheap: use it as KubeletClientConfig.ClientCertificate.
type KubeletClientCert struct {
	Dir    string
	Issuer ClientCertIssuer
	Roots  *x509.CertPool
	// TTL of new certificates (default one year).
	TTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu   sync.Mutex
	cert *tls.Certificate
}

// Get returns the current certificate, renewing it when due.
func (k *KubeletClientCert) Get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now
	if k.Now != nil {
		now = k.Now
	}
	if k.cert != nil && k.good(k.cert, now()) {
		return k.cert, nil
	}
	certPath, keyPath := filepath.Join(k.Dir, KubeletClientCertFile), filepath.Join(k.Dir, KubeletClientKeyFile)
	// Missing, unreadable or stale files are replaced below.
	if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && k.good(&c, now()) {
		k.cert = &c
		return k.cert, nil
	}
	ttl := k.TTL
	if ttl == 0 {
		ttl = 365 * 24 * time.Hour
	}
	certPEM, keyPEM, err := k.Issuer.IssueClientCert(KubeletClientCN, nil, ttl)
	if err != nil {
		return nil, fmt.Errorf("issue the kubelet client certificate: %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	if err := writeAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	k.cert = &c
	return k.cert, nil
}

// good reports that c is ours, chains to Roots and is not due for renewal.
func (k *KubeletClientCert) good(c *tls.Certificate, now time.Time) bool {
	if len(c.Certificate) == 0 {
		return false
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil || leaf.Subject.CommonName != KubeletClientCN {
		return false
	}
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter.Add(-life/3)) {
		return false
	}
	if k.Roots != nil {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: k.Roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			return false
		}
	}
	return true
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
