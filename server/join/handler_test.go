package join

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"skiff/jointoken"
	"skiff/server/certs"
)

const serverSecret = "correct-horse"

type fixture struct {
	bundle *certs.Bundle
	client *fake.Clientset
	srv    *httptest.Server
	now    time.Time
}

func newFixture(t *testing.T, serverAddrs ...net.IP) *fixture {
	t.Helper()
	b, err := certs.Ensure(certs.Config{Dir: t.TempDir(), Hostname: "server"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{bundle: b, client: fake.NewClientset(), now: time.Now()}
	caCert, caKey := b.CA()
	h, err := New(Config{CACert: caCert, CAKey: caKey, CAPEM: b.CACertPEM(), ServerSecret: serverSecret,
		Client: f.client, ServerAddresses: serverAddrs, Now: func() time.Time { return f.now },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "api", http.StatusTeapot) })
	f.srv = httptest.NewUnstartedServer(h.Wrap(notFound))
	f.srv.TLS = b.ServerTLSConfig()
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// httpClient trusts the cluster CA and presents cert, if any.
func (f *fixture) httpClient(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: f.bundle.CAPool()}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
}

func csr(t *testing.T, dns []string, ips []net.IP) (*ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:admin", Organization: []string{"system:masters"}}, DNSNames: dns, IPAddresses: ips}, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

type result struct {
	code int
	msg  string
	resp jointoken.NodeCertsResponse
	key  *ecdsa.PrivateKey
}

func (f *fixture) join(t *testing.T, c *http.Client, auth func(*http.Request), node, password string, dns []string, ips []net.IP) result {
	t.Helper()
	ckey, ccsr := csr(t, nil, nil)
	_, scsr := csr(t, dns, ips)
	body, _ := json.Marshal(jointoken.NodeCertsRequest{NodeName: node, NodePassword: password, ClientCSR: ccsr, ServingCSR: scsr})
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+jointoken.NodeCertsPath, bytes.NewReader(body))
	if auth != nil {
		auth(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	r := result{code: resp.StatusCode, key: ckey}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &r.resp); err != nil {
			t.Fatal(err)
		}
	} else {
		var st metav1.Status
		json.Unmarshal(data, &st)
		r.msg = st.Message
	}
	return r
}

func serverAuth(secret string) func(*http.Request) {
	return jointoken.Token{ID: "server", Secret: secret}.SetAuth
}

func parseCert(t *testing.T, p string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(p))
	if block == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCACertsServesTheBundleWhoseHashIsTheTokens(t *testing.T) {
	f := newFixture(t)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := insecure.Get(f.srv.URL + jointoken.CACertsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, f.bundle.CACertPEM()) || jointoken.CAHash(body) != f.bundle.CAHash() {
		t.Fatalf("GET /cacerts = %d, %d bytes; want the CA bundle", resp.StatusCode, len(body))
	}
	resp2, err := insecure.Get(f.srv.URL + "/api/v1/secrets")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusTeapot {
		t.Fatalf("other paths reach the API handler: got %d", resp2.StatusCode)
	}
}

func TestServerTokenJoinIssuesNodeCertificates(t *testing.T) {
	f := newFixture(t)
	r := f.join(t, f.httpClient(nil), serverAuth(serverSecret), "node1", "pw1", []string{"node1.example", "localhost"}, []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("127.0.0.1")})
	if r.code != http.StatusOK {
		t.Fatalf("join = %d %s", r.code, r.msg)
	}
	client := parseCert(t, r.resp.ClientCert)
	if client.Subject.CommonName != "system:node:node1" || len(client.Subject.Organization) != 1 || client.Subject.Organization[0] != "system:nodes" {
		t.Errorf("client cert subject = %v; the CSR's system:admin must be ignored", client.Subject)
	}
	if got := client.NotAfter.Sub(client.NotBefore); got < 364*24*time.Hour {
		t.Errorf("client cert lifetime = %s, want about a year", got)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: f.bundle.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert does not verify as a client cert: %v", err)
	}
	serving := parseCert(t, r.resp.ServingCert)
	if err := serving.VerifyHostname("10.0.0.7"); err != nil {
		t.Error(err)
	}
	if err := serving.VerifyHostname("node1"); err != nil {
		t.Error(err)
	}
	if err := serving.VerifyHostname("node1.example"); err != nil {
		t.Error(err)
	}
	if len(serving.IPAddresses) != 1 || len(serving.DNSNames) != 2 {
		t.Errorf("serving cert SANs = %v %v; want loopback and localhost left out", serving.DNSNames, serving.IPAddresses)
	}
	if r.resp.CACert != string(f.bundle.CACertPEM()) {
		t.Error("response CA is not the bundle")
	}
	s, err := f.client.CoreV1().Secrets("kube-system").Get(context.Background(), "node1.node-password.skiff", metav1.GetOptions{})
	if err != nil || s.Type != NodePasswordSecretType || bytes.Contains(s.Data["hash"], []byte("pw1")) {
		t.Fatalf("node password secret = %+v, %v; want a hash", s, err)
	}
}

func TestJoinRefusals(t *testing.T) {
	f := newFixture(t, net.ParseIP("192.0.2.1"))
	c := f.httpClient(nil)
	if r := f.join(t, c, serverAuth(serverSecret), "taken", "first-machine", nil, nil); r.code != http.StatusOK {
		t.Fatalf("first join = %d %s", r.code, r.msg)
	}
	tests := []struct {
		name     string
		auth     func(*http.Request)
		node, pw string
		dns      []string
		ips      []net.IP
		code     int
		msg      string
	}{
		{"wrong secret", serverAuth("wrong"), "n2", "pw", nil, nil, 401, "not valid for this server"},
		{"no credentials", nil, "n2", "pw", nil, nil, 401, "no join token"},
		{"unknown bootstrap token", jointoken.Token{ID: "abcdef", Secret: "0123456789abcdef"}.SetAuth, "n2", "pw", nil, nil, 401, "does not exist"},
		{"another machine takes an existing name", serverAuth(serverSecret), "taken", "second-machine", nil, nil, 403, "node password rejected: node name taken is taken by another machine"},
		{"missing node password", serverAuth(serverSecret), "n3", "", nil, nil, 400, "nodePassword is required"},
		{"invalid node name", serverAuth(serverSecret), "Bad_Name", "pw", nil, nil, 400, "not valid"},
		{"the API server's name", serverAuth(serverSecret), "n4", "pw", []string{"kubernetes.default.svc"}, nil, 403, "may not name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.join(t, c, tt.auth, tt.node, tt.pw, tt.dns, tt.ips)
			if r.code != tt.code || !strings.Contains(r.msg, tt.msg) {
				t.Fatalf("join = %d %q, want %d containing %q", r.code, r.msg, tt.code, tt.msg)
			}
		})
	}
	t.Run("the same machine joins again", func(t *testing.T) {
		if r := f.join(t, c, serverAuth(serverSecret), "taken", "first-machine", nil, nil); r.code != http.StatusOK {
			t.Fatalf("rejoin = %d %s", r.code, r.msg)
		}
	})
}

func TestBootstrapTokens(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	full, err := CreateToken(ctx, f.client, f.bundle.CACertPEM(), time.Hour, "for the pis")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jointoken.Parse(full)
	if err != nil || tok.CAHash != f.bundle.CAHash() || tok.IsServer() {
		t.Fatalf("created token %q parses to %+v, %v", full, tok, err)
	}
	forever, err := CreateToken(ctx, f.client, f.bundle.CACertPEM(), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	c := f.httpClient(nil)
	if r := f.join(t, c, tok.SetAuth, "b1", "pw", nil, nil); r.code != http.StatusOK {
		t.Fatalf("join with a bootstrap token = %d %s", r.code, r.msg)
	}
	wrong := tok
	wrong.Secret = "0000000000000000"
	if r := f.join(t, c, wrong.SetAuth, "b2", "pw", nil, nil); r.code != http.StatusUnauthorized {
		t.Fatalf("wrong bootstrap secret = %d %s", r.code, r.msg)
	}
	list, err := ListTokens(ctx, f.client)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListTokens = %+v, %v", list, err)
	}

	f.now = f.now.Add(2 * time.Hour)
	r := f.join(t, c, tok.SetAuth, "b3", "pw", nil, nil)
	if r.code != http.StatusUnauthorized || !strings.Contains(r.msg, "expired at") {
		t.Fatalf("expired token = %d %q, want 401 expired", r.code, r.msg)
	}
	n, err := DeleteExpired(ctx, f.client, f.now)
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want 1", n, err)
	}
	list, _ = ListTokens(ctx, f.client)
	ftok, _ := jointoken.Parse(forever)
	if len(list) != 1 || list[0].ID != ftok.ID || !list[0].Expires.IsZero() {
		t.Fatalf("after cleaning: %+v, want only the token without expiry", list)
	}
	if err := DeleteToken(ctx, f.client, forever); err != nil {
		t.Fatal(err)
	}
	if err := DeleteToken(ctx, f.client, ftok.ID); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("deleting twice: %v", err)
	}
}

func TestRenewalWithTheNodesOwnClientCertificate(t *testing.T) {
	f := newFixture(t)
	r := f.join(t, f.httpClient(nil), serverAuth(serverSecret), "n1", "pw", nil, nil)
	if r.code != http.StatusOK {
		t.Fatalf("join = %d %s", r.code, r.msg)
	}
	keyDER, _ := x509.MarshalECPrivateKey(r.key)
	cert, err := tls.X509KeyPair([]byte(r.resp.ClientCert), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	withCert := f.httpClient(&cert)
	if r := f.join(t, withCert, nil, "n1", "", nil, nil); r.code != http.StatusOK {
		t.Fatalf("renewal with the client cert and no token = %d %s", r.code, r.msg)
	}
	if r := f.join(t, withCert, nil, "other", "", nil, nil); r.code != http.StatusForbidden || !strings.Contains(r.msg, "only its own") {
		t.Fatalf("renewal for another node = %d %s, want 403", r.code, r.msg)
	}
	admin, key := f.bundle.AdminCertPEM()
	adminCert, _ := tls.X509KeyPair(admin, key)
	if r := f.join(t, f.httpClient(&adminCert), nil, "n9", "pw", nil, nil); r.code != http.StatusUnauthorized {
		t.Fatalf("a non-node client cert without a token = %d %s, want 401", r.code, r.msg)
	}
}

func TestEnsureServerToken(t *testing.T) {
	const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	first, err := EnsureServerToken(dir, "", hash)
	if err != nil || first.Secret == "" || first.CAHash != hash {
		t.Fatalf("first start: %+v, %v", first, err)
	}
	data := readFile(t, ServerTokenPath(dir))
	if strings.TrimSpace(data) != first.String() {
		t.Fatalf("token file = %q, want %q", data, first.String())
	}
	again, err := EnsureServerToken(dir, "", hash)
	if err != nil || again != first {
		t.Fatalf("restart: %+v, %v; want the same token", again, err)
	}
	set, err := EnsureServerToken(dir, "my-secret", hash)
	if err != nil || set.Secret != "my-secret" {
		t.Fatalf("--token my-secret: %+v, %v", set, err)
	}
	full, err := EnsureServerToken(dir, "K10"+hash+"::server:s2", hash)
	if err != nil || full.Secret != "s2" {
		t.Fatalf("--token full: %+v, %v", full, err)
	}
	if _, err := EnsureServerToken(dir, "K10"+strings.Repeat("f", 64)+"::server:s2", hash); err == nil || !strings.Contains(err.Error(), "does not match this server's CA") {
		t.Fatalf("--token with another CA's hash: %v", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestServingSANsKeepTheServersAddressesForItsOwnMachine(t *testing.T) {
	server := net.ParseIP("192.0.2.1")
	h := &Handler{cfg: Config{ServerAddresses: []net.IP{server}}}
	req := &x509.CertificateRequest{IPAddresses: []net.IP{server}}
	if _, _, err := h.servingSANs("n", req, net.ParseIP("192.0.2.50")); err == nil || !strings.Contains(err.Error(), "is the server's") {
		t.Fatalf("a remote node claiming the server's address: %v", err)
	}
	if _, ips, err := h.servingSANs("n", req, server); err != nil || len(ips) != 1 {
		t.Fatalf("the server's own agent: %v, %v", ips, err)
	}
}
