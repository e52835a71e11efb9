package stream

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNew_ServingCertificateIsReloadedWhenRenewedOnDisk(t *testing.T) {
	pki := newTestPKI(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	write := func(cn string, mod time.Time) {
		c, k := pki.issue(t, cn, true)
		if err := os.WriteFile(certFile, c, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, k, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(certFile, mod, mod)
		os.Chtimes(keyFile, mod, mod)
	}
	write("first", time.Now().Add(-time.Hour))
	s, err := New(Config{CertFile: certFile, KeyFile: keyFile, ClientCA: pki.pool(), Pods: &fakePods{}, Runtime: &fakeRuntime{}})
	if err != nil {
		t.Fatal(err)
	}
	cn := func() string {
		c, err := s.TLSConfig().GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(c.Certificate[0])
		return leaf.Subject.CommonName
	}
	if got := cn(); got != "first" {
		t.Fatalf("serving %q, want first", got)
	}
	write("renewed", time.Now())
	if got := cn(); got != "renewed" {
		t.Fatalf("serving %q after renewal, want renewed", got)
	}
	os.WriteFile(keyFile, []byte("half-written"), 0o600)
	os.Chtimes(keyFile, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	if got := cn(); got != "renewed" {
		t.Fatalf("serving %q during a broken rotation, want the last good one", got)
	}
}

func TestNew_RequiresItsCollaborators(t *testing.T) {
	pki := newTestPKI(t)
	if _, err := New(Config{ClientCA: pki.pool(), Pods: &fakePods{}, Runtime: &fakeRuntime{}}); err == nil {
		t.Fatal("New without a serving certificate succeeded")
	}
	if _, err := New(Config{CertFile: "x", KeyFile: "y", Pods: &fakePods{}, Runtime: &fakeRuntime{}}); err == nil {
		t.Fatal("New without a client CA succeeded")
	}
}
