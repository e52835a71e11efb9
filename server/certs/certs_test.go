package certs

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEnsureCreatesEveryFileWithTightModes(t *testing.T) {
	cfg := testConfig(t)
	b := mustEnsure(t, cfg)

	dirInfo, err := os.Stat(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := dirInfo.Mode().Perm(); got != 0o700 {
		t.Errorf("dir mode = %o, want 700", got)
	}
	files := []struct {
		name string
		mode os.FileMode
	}{
		{CACertFile, 0o644}, {CAKeyFile, 0o600},
		{ServingCertFile, 0o644}, {ServingKeyFile, 0o600},
		{AdminCertFile, 0o644}, {AdminKeyFile, 0o600},
		{SAKeyFile, 0o600}, {SAPubFile, 0o644},
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			info, err := os.Stat(filepath.Join(cfg.Dir, f.name))
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().Perm(); got != f.mode {
				t.Errorf("mode = %o, want %o", got, f.mode)
			}
		})
	}
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(files) {
		t.Errorf("dir holds %d entries, want %d (temp files left behind?)", len(entries), len(files))
	}

	ca := readCert(t, filepath.Join(cfg.Dir, CACertFile))
	if !ca.IsCA || !strings.HasPrefix(ca.Subject.CommonName, "skiff-server-ca@") {
		t.Errorf("CA: IsCA=%v CN=%q", ca.IsCA, ca.Subject.CommonName)
	}
	if life := ca.NotAfter.Sub(time.Now()); life < 9*365*24*time.Hour {
		t.Errorf("CA valid for only %s", life)
	}
	rk, ok := b.ServiceAccountKey().(*rsa.PrivateKey)
	if !ok || rk.N.BitLen() != 2048 {
		t.Fatalf("SA key = %T, want RSA 2048", b.ServiceAccountKey())
	}
	pub, err := encodePublicKeyPEM(rk.Public())
	if err != nil {
		t.Fatal(err)
	}
	if disk, _ := os.ReadFile(filepath.Join(cfg.Dir, SAPubFile)); string(disk) != string(pub) {
		t.Error("service.pub does not hold the public half of service.key")
	}
}

func TestEnsureReusesExistingPKIOnRestart(t *testing.T) {
	cfg := testConfig(t)
	first := mustEnsure(t, cfg)
	second := mustEnsure(t, cfg)

	checks := []struct {
		name        string
		first, next any
	}{
		{"CA serial", first.ca.cert.SerialNumber.String(), second.ca.cert.SerialNumber.String()},
		{"serving serial", first.serving.Leaf.SerialNumber.String(), second.serving.Leaf.SerialNumber.String()},
		{"admin cert", string(first.adminCert), string(second.adminCert)},
		{"CA hash", first.CAHash(), second.CAHash()},
		{"SA key equal", true, first.saKey.(*rsa.PrivateKey).Equal(second.saKey)},
	}
	for _, c := range checks {
		if c.first != c.next {
			t.Errorf("%s changed across restart: %v -> %v", c.name, c.first, c.next)
		}
	}
}

func TestEnsureReissuesServingCertWhenTLSSANsAreAdded(t *testing.T) {
	cfg := testConfig(t)
	before := mustEnsure(t, cfg)

	cfg.ExtraSANs = []string{"api.example.com", " 203.0.113.7 ", ""}
	after := mustEnsure(t, cfg)
	if after.serving.Leaf.SerialNumber.Cmp(before.serving.Leaf.SerialNumber) == 0 {
		t.Fatal("serving cert was not re-issued for new SANs")
	}
	if after.ca.cert.SerialNumber.Cmp(before.ca.cert.SerialNumber) != 0 {
		t.Error("CA changed")
	}
	if !after.serving.Leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(before.serving.Leaf.PublicKey) {
		t.Error("serving key changed; re-issue must keep the key")
	}
	if string(after.adminCert) != string(before.adminCert) {
		t.Error("admin cert re-issued although it still fits")
	}
	for _, name := range []string{"api.example.com", "203.0.113.7", "node1"} {
		if err := after.serving.Leaf.VerifyHostname(name); err != nil {
			t.Errorf("re-issued cert does not cover %s: %v", name, err)
		}
	}

	cfg.ExtraSANs = []string{"api.example.com"}
	again := mustEnsure(t, cfg)
	if again.serving.Leaf.SerialNumber.Cmp(after.serving.Leaf.SerialNumber) != 0 {
		t.Error("dropping a SAN re-issued the cert; a covered set must be kept")
	}
}

func TestEnsureRenewsLeafCertsWithin90DaysOfExpiry(t *testing.T) {
	tests := []struct {
		name      string
		later     time.Duration
		wantRenew bool
	}{
		{"200 days in, 165 left: kept", 200 * 24 * time.Hour, false},
		{"280 days in, 85 left: renewed", 280 * 24 * time.Hour, true},
		{"past expiry: renewed", 400 * 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fixedClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
			cfg := testConfig(t)
			cfg.Now = clock.Now
			before := mustEnsure(t, cfg)
			clock.t = clock.t.Add(tt.later)
			after := mustEnsure(t, cfg)

			servingRenewed := after.serving.Leaf.SerialNumber.Cmp(before.serving.Leaf.SerialNumber) != 0
			adminRenewed := string(after.adminCert) != string(before.adminCert)
			if servingRenewed != tt.wantRenew || adminRenewed != tt.wantRenew {
				t.Fatalf("renewed serving=%v admin=%v, want %v", servingRenewed, adminRenewed, tt.wantRenew)
			}
			if after.ca.cert.SerialNumber.Cmp(before.ca.cert.SerialNumber) != 0 {
				t.Error("CA changed")
			}
			if tt.wantRenew {
				if got := after.serving.Leaf.NotAfter.Sub(clock.t); got < 364*24*time.Hour {
					t.Errorf("renewed serving cert valid for %s, want ~1y", got)
				}
				_, err := after.serving.Leaf.Verify(x509.VerifyOptions{Roots: after.CAPool(), CurrentTime: clock.t})
				if err != nil {
					t.Errorf("renewed cert does not verify at %s: %v", clock.t, err)
				}
			}
		})
	}
}

func TestServingCertVerifiesForEveryExpectedName(t *testing.T) {
	cfg := testConfig(t)
	cfg.ClusterDomain = "corp.internal"
	cfg.ExtraSANs = []string{"skiff.example.com", "198.51.100.4", "fd00::10"}
	b := mustEnsure(t, cfg)
	leaf := b.ServingCertificate().Leaf

	tests := []struct {
		name string
		ok   bool
	}{
		{"node1", true}, {"localhost", true}, {"kubernetes", true},
		{"kubernetes.default", true}, {"kubernetes.default.svc", true},
		{"kubernetes.default.svc.corp.internal", true},
		{"127.0.0.1", true}, {"::1", true}, {"192.168.1.10", true}, {"10.43.0.1", true},
		{"skiff.example.com", true}, {"198.51.100.4", true}, {"fd00::10", true},
		{"kubernetes.default.svc.cluster.local", false},
		{"evil.example.com", false}, {"10.43.0.2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{Roots: b.CAPool(), DNSName: tt.name})
			if (err == nil) != tt.ok {
				t.Errorf("Verify(%s) err=%v, want ok=%v", tt.name, err, tt.ok)
			}
		})
	}
}

func TestAdminCertIsSystemAdminInSystemMasters(t *testing.T) {
	b := mustEnsure(t, testConfig(t))
	certPEM, keyPEM := b.AdminCertPEM()
	cert := parsePEMCert(t, certPEM)
	if cert.Subject.CommonName != "system:admin" {
		t.Errorf("CN = %q", cert.Subject.CommonName)
	}
	if len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:masters" {
		t.Errorf("O = %q", cert.Subject.Organization)
	}
	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("ExtKeyUsage = %v, want [ClientAuth]", cert.ExtKeyUsage)
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: b.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Errorf("admin cert does not verify as a client cert: %v", err)
	}
	keyPair(t, certPEM, keyPEM)
}

func TestEnsureRefusesToReplaceAHalfPresentCA(t *testing.T) {
	tests := []struct {
		name    string
		removed string
	}{
		{"key missing", CAKeyFile},
		{"cert missing", CACertFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			mustEnsure(t, cfg)
			if err := os.Remove(filepath.Join(cfg.Dir, tt.removed)); err != nil {
				t.Fatal(err)
			}
			if _, err := Ensure(cfg); err == nil || !strings.Contains(err.Error(), "only one of") {
				t.Fatalf("Ensure err = %v, want refusal", err)
			}
			if _, err := os.Stat(filepath.Join(cfg.Dir, tt.removed)); err == nil {
				t.Error("Ensure recreated the missing half of the CA")
			}
		})
	}
}

func TestEnsureReissuesLeafCertsWhenTheCAIsReplaced(t *testing.T) {
	cfg := testConfig(t)
	old := mustEnsure(t, cfg)
	for _, f := range []string{CACertFile, CAKeyFile} {
		if err := os.Remove(filepath.Join(cfg.Dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	b := mustEnsure(t, cfg)
	if b.CAHash() == old.CAHash() {
		t.Fatal("CA was not regenerated")
	}
	if _, err := b.serving.Leaf.Verify(x509.VerifyOptions{Roots: b.CAPool(), DNSName: "localhost"}); err != nil {
		t.Errorf("serving cert not re-issued by the new CA: %v", err)
	}
	certPEM, _ := b.AdminCertPEM()
	_, err := parsePEMCert(t, certPEM).Verify(x509.VerifyOptions{Roots: b.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Errorf("admin cert not re-issued by the new CA: %v", err)
	}
}

func TestEnsureRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"no dir", func(c *Config) { c.Dir = "" }},
		{"tls-san with a space", func(c *Config) { c.ExtraSANs = []string{"bad name"} }},
		{"tls-san URL", func(c *Config) { c.ExtraSANs = []string{"https://x.example.com"} }},
		{"tls-san empty label", func(c *Config) { c.ExtraSANs = []string{"a..b"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			tt.mutate(&cfg)
			if _, err := Ensure(cfg); err == nil {
				t.Fatal("Ensure succeeded, want error")
			}
		})
	}
}

func TestEnsureFailsOnCorruptKeyInsteadOfReplacingIt(t *testing.T) {
	cfg := testConfig(t)
	mustEnsure(t, cfg)
	path := filepath.Join(cfg.Dir, SAKeyFile)
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(cfg); err == nil {
		t.Fatal("Ensure accepted a corrupt service.key")
	}
	if data, _ := os.ReadFile(path); string(data) != "garbage" {
		t.Error("corrupt key was overwritten")
	}
}

func TestCAHashIsSHA256OfServedBundle(t *testing.T) {
	cfg := testConfig(t)
	b := mustEnsure(t, cfg)
	disk, err := os.ReadFile(filepath.Join(cfg.Dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(disk)
	if got, want := b.CAHash(), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("CAHash = %s, want sha256(server-ca.crt) %s", got, want)
	}
	if string(b.CACertPEM()) != string(disk) {
		t.Error("CACertPEM differs from server-ca.crt bytes")
	}
	if len(b.CAHash()) != 64 {
		t.Errorf("CAHash length %d, want 64", len(b.CAHash()))
	}
}

func TestCAHashOfMultiCertBundleHashesTheRootDER(t *testing.T) {
	root, err := newAuthority(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	interKey, err := newECKey()
	if err != nil {
		t.Fatal(err)
	}
	serial, err := newSerial()
	if err != nil {
		t.Fatal(err)
	}
	interTmpl := &x509.Certificate{
		SerialNumber: serial, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	interTmpl.Subject.CommonName = "intermediate"
	interDER, err := x509.CreateCertificate(rand.Reader, interTmpl, root.cert, interKey.Public(), root.key)
	if err != nil {
		t.Fatal(err)
	}
	rootPEM := encodeCertPEM(root.cert.Raw)
	tests := []struct {
		name   string
		bundle []byte
		hashed []byte
	}{
		{"intermediate then root: root DER", append(encodeCertPEM(interDER), rootPEM...), root.cert.Raw},
		{"single root: file bytes", rootPEM, rootPEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum := sha256.Sum256(tt.hashed)
			if got := caHash(tt.bundle); got != hex.EncodeToString(sum[:]) {
				t.Errorf("caHash = %s, want %x", got, sum)
			}
		})
	}
}

func TestIssuedCertsCarryTheRequestedIdentity(t *testing.T) {
	b := mustEnsure(t, testConfig(t))
	t.Run("client cert for a node", func(t *testing.T) {
		certPEM, keyPEM, err := b.IssueClientCert("system:node:node2", []string{"system:nodes"}, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		keyPair(t, certPEM, keyPEM)
		c := parsePEMCert(t, certPEM)
		if c.Subject.CommonName != "system:node:node2" || len(c.Subject.Organization) != 1 || c.Subject.Organization[0] != "system:nodes" {
			t.Errorf("subject = %v", c.Subject)
		}
		if d := time.Until(c.NotAfter); d > 25*time.Hour || d < 23*time.Hour {
			t.Errorf("valid for %s, want ~24h", d)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: b.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Error(err)
		}
	})
	t.Run("serving cert for a kubelet", func(t *testing.T) {
		ip := net.ParseIP("192.168.1.20")
		certPEM, keyPEM, err := b.IssueServingCert("node2", []string{"node2"}, []net.IP{ip}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		keyPair(t, certPEM, keyPEM)
		c := parsePEMCert(t, certPEM)
		for _, name := range []string{"node2", "192.168.1.20"} {
			if _, err := c.Verify(x509.VerifyOptions{Roots: b.CAPool(), DNSName: name}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
	t.Run("non-positive ttl is refused", func(t *testing.T) {
		if _, _, err := b.IssueClientCert("x", nil, 0); err == nil {
			t.Error("ttl 0 accepted")
		}
	})
	t.Run("ttl beyond the CA is capped at the CA's expiry", func(t *testing.T) {
		certPEM, _, err := b.IssueClientCert("x", nil, 20*365*24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if c := parsePEMCert(t, certPEM); c.NotAfter.After(b.ca.cert.NotAfter) {
			t.Errorf("leaf expires %s after CA %s", c.NotAfter, b.ca.cert.NotAfter)
		}
	})
}
