package certs

import (
	"bytes"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsureFrontProxy_FreshDir_ClientCertChainsToItsOwnCAOnly(t *testing.T) {
	cfg := testConfig(t)
	cluster := mustEnsure(t, cfg)
	fp, err := EnsureFrontProxy(cfg)
	if err != nil {
		t.Fatalf("EnsureFrontProxy: %v", err)
	}
	leaf, err := x509.ParseCertificate(fp.ClientCertificate().Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != FrontProxyClientName {
		t.Errorf("CN = %q, want %q", leaf.Subject.CommonName, FrontProxyClientName)
	}
	ca := readCert(t, filepath.Join(cfg.Dir, FrontProxyCACertFile))
	if !strings.HasPrefix(ca.Subject.CommonName, "skiff-request-header-ca@") {
		t.Errorf("front-proxy CA CN = %q", ca.Subject.CommonName)
	}
	opts := x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	opts.Roots = x509.NewCertPool()
	opts.Roots.AppendCertsFromPEM(fp.CACertPEM())
	if _, err := leaf.Verify(opts); err != nil {
		t.Errorf("client cert does not verify against the front-proxy CA: %v", err)
	}
	opts.Roots = cluster.CAPool()
	if _, err := leaf.Verify(opts); err == nil {
		t.Error("client cert verifies against the cluster CA: the two CAs must be separate")
	}
}

func TestEnsureFrontProxy_Restart_ReusesCAAndCert(t *testing.T) {
	cfg := testConfig(t)
	first, err := EnsureFrontProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := EnsureFrontProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.CACertPEM(), second.CACertPEM()) {
		t.Error("CA changed across restarts")
	}
	if !bytes.Equal(first.ClientCertificate().Certificate[0], second.ClientCertificate().Certificate[0]) {
		t.Error("client certificate re-issued on a restart with nothing to change")
	}
}
