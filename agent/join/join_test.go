package join

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"skiff/jointoken"
)

// fakeServer speaks the join protocol with its own CA.
type fakeServer struct {
	srv    *httptest.Server
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	secret string
	ttl    time.Duration

	mu        sync.Mutex
	certCalls int // requests to /v1-skiff/node-certs
	renewals  int // of those, authenticated by a client certificate
	passwords []string
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{secret: "s3cret", ttl: time.Hour}
	f.caCert, f.caKey, f.caPEM = newCA(t)
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	servingPEM := f.signPEM(t, &x509.Certificate{Subject: pkix.Name{CommonName: "server"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	pool := x509.NewCertPool()
	pool.AddCert(f.caCert)
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{servingPEM}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) signPEM(t *testing.T, tmpl *x509.Certificate) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der := f.sign(tmpl, key.Public())
	kder, _ := x509.MarshalECPrivateKey(key)
	c, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fakeServer) sign(tmpl *x509.Certificate, pub any) []byte {
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore = time.Now()
	tmpl.NotAfter = time.Now().Add(f.ttl)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.caCert, pub, f.caKey)
	if err != nil {
		panic(err)
	}
	return der
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case jointoken.CACertsPath:
		w.Write(f.caPEM)
		return
	case jointoken.NodeCertsPath:
	default:
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.certCalls++
	var req jointoken.NodeCertsRequest
	json.NewDecoder(r.Body).Decode(&req)
	byCert := r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && r.TLS.PeerCertificates[0].Subject.CommonName == "system:node:"+req.NodeName
	if byCert {
		f.renewals++
	} else if tok, ok := jointoken.FromRequest(r); !ok || tok.Secret != f.secret {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"join: the token's secret is not valid for this server","code":401}`))
		return
	} else {
		f.passwords = append(f.passwords, req.NodePassword)
	}
	subject := pkix.Name{CommonName: "system:node:" + req.NodeName, Organization: []string{"system:nodes"}}
	parse := func(p string) *x509.CertificateRequest {
		b, _ := pem.Decode([]byte(p))
		c, _ := x509.ParseCertificateRequest(b.Bytes)
		return c
	}
	cc, sc := parse(req.ClientCSR), parse(req.ServingCSR)
	client := f.sign(&x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, cc.PublicKey)
	serving := f.sign(&x509.Certificate{Subject: subject, DNSNames: sc.DNSNames, IPAddresses: sc.IPAddresses, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, sc.PublicKey)
	json.NewEncoder(w).Encode(jointoken.NodeCertsResponse{
		ClientCert:  string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: client})),
		ServingCert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serving})),
		CACert:      string(f.caPEM),
	})
}

func (f *fakeServer) counts() (calls, renewals int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.certCalls, f.renewals
}

func (f *fakeServer) token(secret string) string {
	return jointoken.Token{CAHash: jointoken.CAHash(f.caPEM), ID: "server", Secret: secret}.String()
}

func testConfig(t *testing.T, f *fakeServer, token string) Config {
	return Config{ServerURL: f.srv.URL, Token: token, NodeName: "node1", DataDir: t.TempDir(),
		NodeIPs: []net.IP{net.ParseIP("10.0.0.9")}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestJoinStoresCredentialsForTheNode(t *testing.T) {
	f := newFakeServer(t)
	cfg := testConfig(t, f, f.token(f.secret))
	c, err := Join(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{c.ClientKeyFile: 0o600, c.ServingKeyFile: 0o600, c.ClientCertFile: 0o644,
		c.CACertFile: 0o644, c.Kubeconfig: 0o600, filepath.Join(CertsDir(cfg.DataDir), PasswordFile): 0o600, filepath.Join(CertsDir(cfg.DataDir), TokenFile): 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: %v, mode %v; want %v", path, err, st.Mode().Perm(), mode)
		}
	}
	kc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil || kc.Host != f.srv.URL || kc.CertFile != c.ClientCertFile {
		t.Fatalf("kubeconfig: %+v, %v", kc, err)
	}
	serving, _ := c.GetCertificate(nil)
	if err := serving.Leaf.VerifyHostname("10.0.0.9"); err != nil {
		t.Errorf("serving cert: %v", err)
	}
	if err := serving.Leaf.VerifyHostname("node1"); err != nil {
		t.Errorf("serving cert: %v", err)
	}
	if string(c.CAPEM) != string(f.caPEM) {
		t.Error("CAPEM is not the server's CA")
	}
}

func TestJoinRefusesAServerWhoseCADoesNotMatchTheToken(t *testing.T) {
	f := newFakeServer(t)
	_, _, otherCA := newCA(t)
	token := jointoken.Token{CAHash: jointoken.CAHash(otherCA), ID: "server", Secret: f.secret}.String()
	cfg := testConfig(t, f, token)
	_, err := Join(context.Background(), cfg)
	if !errors.Is(err, ErrCAMismatch) || !strings.Contains(err.Error(), "does not match the token's hash") || !strings.Contains(err.Error(), "refusing to trust "+f.srv.URL) {
		t.Fatalf("Join = %v, want a CA mismatch", err)
	}
	if calls, _ := f.counts(); calls != 0 {
		t.Fatalf("%d requests reached %s: the secret was sent to an untrusted server", calls, jointoken.NodeCertsPath)
	}
	entries, err := os.ReadDir(cfg.DataDir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("data dir after a refused join: %v %v; want nothing written", entries, err)
	}
}

func TestJoinErrors(t *testing.T) {
	f := newFakeServer(t)
	tests := []struct {
		name, token, want string
		is                error
	}{
		{"wrong secret", f.token("wrong"), "join: the server refused the token (401 Unauthorized): join: the token's secret is not valid", ErrUnauthorized},
		{"bare secret without a CA hash", "s3cret", "has no CA hash", nil},
		{"malformed token", "K10abc::server:x", "invalid join token", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Join(context.Background(), testConfig(t, f, tt.token))
			if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("Join = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestRestartReusesStoredCertificatesAndKeepsThePassword(t *testing.T) {
	f := newFakeServer(t)
	cfg := testConfig(t, f, f.token(f.secret))
	if _, err := Join(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := Join(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if calls, _ := f.counts(); calls != 1 {
		t.Fatalf("%d certificate requests after a restart, want 1 (stored certs reused)", calls)
	}
	// Lost certificates: the node joins again, with the same password.
	os.Remove(filepath.Join(CertsDir(cfg.DataDir), ClientCertFile))
	if _, err := Join(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.passwords) != 2 || f.passwords[0] == "" || f.passwords[0] != f.passwords[1] {
		t.Fatalf("passwords sent = %q, want the same non-empty one twice", f.passwords)
	}
}

func TestRenewLoopRenewsWithTheClientCertificate(t *testing.T) {
	f := newFakeServer(t)
	f.ttl = 3 * time.Second
	cfg := testConfig(t, f, f.token(f.secret))
	renewed := make(chan struct{}, 10)
	cfg.OnRenew = func() { renewed <- struct{}{} }
	c, err := Join(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := c.GetClientCertificate(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); c.RenewLoop(ctx) }()
	select {
	case <-renewed:
	case <-ctx.Done():
		t.Fatal("no renewal within 20 s of a 3 s certificate")
	}
	cancel()
	<-done
	if _, renewals := f.counts(); renewals < 1 {
		t.Fatal("the renewal did not authenticate with the client certificate")
	}
	second, _ := c.GetClientCertificate(nil)
	if second.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 {
		t.Fatal("the client certificate in use was not replaced")
	}
	onDisk, _ := os.ReadFile(c.ClientCertFile)
	b, _ := pem.Decode(onDisk)
	if cert, _ := x509.ParseCertificate(b.Bytes); cert.SerialNumber.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Fatal("the renewed certificate was not stored")
	}
}
