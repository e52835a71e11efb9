package certs

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testConfig is a node named node1 at 192.168.1.10 with the default
// service IP, writing into a fresh directory.
func testConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		Dir:           filepath.Join(t.TempDir(), "server", "tls"),
		Hostname:      "node1",
		Addresses:     []net.IP{net.ParseIP("192.168.1.10")},
		ServiceIP:     net.ParseIP("10.43.0.1"),
		ClusterDomain: "cluster.local",
	}
}

func mustEnsure(t *testing.T, cfg Config) *Bundle {
	t.Helper()
	b, err := Ensure(cfg)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return b
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	certs, err := parseCertsPEM(data)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return certs[0]
}

func parsePEMCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := parseCertsPEM(certPEM)
	if err != nil {
		t.Fatalf("parse cert: %v", err)
	}
	return certs[0]
}

// fixedClock returns a settable clock for renewal tests.
type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

func keyPair(t *testing.T, certPEM, keyPEM []byte) tls.Certificate {
	t.Helper()
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("X509KeyPair: %v", err)
	}
	return kp
}
