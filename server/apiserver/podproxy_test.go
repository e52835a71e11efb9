package apiserver_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
)

// proxyCA is a throwaway cluster CA.
type proxyCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newProxyCA(t *testing.T) *proxyCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &proxyCA{cert: cert, key: key}
}

func (ca *proxyCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func (ca *proxyCA) sign(cn string, ttl time.Duration, server bool) (certPEM, keyPEM []byte, err error) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(ttl), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// IssueClientCert makes proxyCA an apiserver.ClientCertIssuer.
func (ca *proxyCA) IssueClientCert(cn string, _ []string, ttl time.Duration) ([]byte, []byte, error) {
	return ca.sign(cn, ttl, false)
}

// kubeletCall is what the fake agent saw.
type kubeletCall struct {
	path, query, clientCN, authorization string
}

// fakeKubelet is an HTTPS server standing in for an agent: it requires a
// client certificate from the CA, records requests, answers logs with
// "log line", echoes upgraded connections, and rejects plain exec
// requests as the kubelet does.
type fakeKubelet struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []kubeletCall
}

func startFakeKubelet(t *testing.T, ca *proxyCA) *fakeKubelet {
	t.Helper()
	fk := &fakeKubelet{}
	fk.srv = httptest.NewUnstartedServer(http.HandlerFunc(fk.serve))
	certPEM, keyPEM, err := ca.sign("node-a", time.Hour, true)
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := tls.X509KeyPair(certPEM, keyPEM)
	fk.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool()}
	fk.srv.StartTLS()
	t.Cleanup(func() { fk.srv.CloseClientConnections(); fk.srv.Close() })
	return fk
}

func (fk *fakeKubelet) port() int32 {
	return int32(fk.srv.Listener.Addr().(*net.TCPAddr).Port)
}

func (fk *fakeKubelet) last(t *testing.T) kubeletCall {
	t.Helper()
	fk.mu.Lock()
	defer fk.mu.Unlock()
	if len(fk.calls) == 0 {
		t.Fatal("the agent saw no request")
	}
	return fk.calls[len(fk.calls)-1]
}

var echoUpgrader = websocket.Upgrader{Subprotocols: []string{"v5.channel.k8s.io"}}

func (fk *fakeKubelet) serve(w http.ResponseWriter, r *http.Request) {
	fk.mu.Lock()
	fk.calls = append(fk.calls, kubeletCall{path: r.URL.Path, query: r.URL.RawQuery,
		clientCN: r.TLS.PeerCertificates[0].Subject.CommonName, authorization: r.Header.Get("Authorization")})
	fk.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/containerLogs/"):
		fmt.Fprintln(w, "log line")
	case strings.EqualFold(r.Header.Get("Upgrade"), "websocket"):
		ws, err := echoUpgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			ws.WriteMessage(typ, append([]byte("agent: "), msg...))
		}
	case r.Header.Get("Upgrade") != "":
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
		brw.Flush()
		line, _ := brw.ReadString('\n')
		fmt.Fprintf(conn, "agent: %s", line)
	default:
		http.Error(w, "Upgrade request required", http.StatusBadRequest)
	}
}

// headerUser authenticates as the X-Test-User header (admin by default).
type headerUser struct{}

func (headerUser) Authenticate(r *http.Request) (*auth.User, error) {
	if u := r.Header.Get("X-Test-User"); u != "" {
		return &auth.User{Name: u, Groups: []string{auth.GroupAuthenticated}}, nil
	}
	return &auth.User{Name: "admin", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}, nil
}

// getOnly lets user "getter" only get pods/* (as an old-style role that
// grants get on pods/exec); everyone else may do anything.
type getOnly struct{}

func (getOnly) Authorize(_ context.Context, a auth.Attributes) (bool, string, error) {
	if a.User != nil && a.User.Name == "getter" {
		return a.Verb == "get", "", nil
	}
	return true, "", nil
}

type proxyEnv struct {
	url     string
	client  kubernetes.Interface
	kubelet *fakeKubelet
	ca      *proxyCA
}

// newProxyEnv runs an API server whose KubeletProxy trusts ca and presents
// a certificate from certDir, and a fake agent for node "node-a".
func newProxyEnv(t *testing.T) *proxyEnv {
	t.Helper()
	base := apitest.Start(t, apitest.Options{})
	ca := newProxyCA(t)
	certs := &apiserver.KubeletClientCert{Dir: t.TempDir(), Issuer: ca, Roots: ca.pool()}
	kp, err := apiserver.NewKubeletProxy(apiserver.KubeletClientConfig{RootCAs: ca.pool(), ClientCertificate: certs.Get, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	api, err := apiserver.New(apiserver.Config{Registry: base.Registry, Storage: base.Storage, Authenticator: headerUser{}, Authorizer: getOnly{}, Kubelet: kp})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(api.Handler())
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	env := &proxyEnv{url: srv.URL, client: kubernetes.NewForConfigOrDie(base.Config(&auth.User{Name: "admin", Groups: []string{auth.GroupMasters}})),
		kubelet: startFakeKubelet(t, ca), ca: ca}
	ctx := context.Background()
	if _, err := env.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.node(t, "node-a", "127.0.0.1", env.kubelet.port())
	return env
}

func (env *proxyEnv) node(t *testing.T, name, ip string, port int32) {
	t.Helper()
	ctx := context.Background()
	n, err := env.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "elsewhere.invalid"}, {Type: corev1.NodeInternalIP, Address: ip}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	if _, err := env.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (env *proxyEnv) pod(t *testing.T, name, node string, annotations map[string]string, containers ...string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations}, Spec: corev1.PodSpec{NodeName: node}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	if _, err := env.client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (env *proxyEnv) do(t *testing.T, method, path, user string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, env.url+path, nil)
	req.Header.Set("Authorization", "Bearer secret-of-the-user")
	if user != "" {
		req.Header.Set("X-Test-User", user)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func statusMessage(t *testing.T, body string) string {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("body is not a Status: %q", body)
	}
	return st.Message
}

func TestPodProxy_TranslatesRequestsForTheAgent(t *testing.T) {
	env := newProxyEnv(t)
	env.pod(t, "single", "node-a", nil, "only")
	env.pod(t, "multi", "node-a", nil, "a", "b")
	env.pod(t, "annotated", "node-a", map[string]string{"kubectl.kubernetes.io/default-container": "b"}, "a", "b")
	const pods = "/api/v1/namespaces/default/pods/"
	tests := []struct {
		name, method, path string
		wantCode           int
		wantPath           string
		wantQuery          url.Values
		wantBody           string
	}{
		{"log options become the kubelet's query", http.MethodGet,
			pods + "multi/log?container=a&follow=true&previous=1&timestamps=true&sinceSeconds=10&tailLines=5&limitBytes=100", 200,
			"/containerLogs/default/multi/a",
			url.Values{"follow": {"true"}, "previous": {"true"}, "timestamps": {"true"}, "sinceSeconds": {"10"}, "tailLines": {"5"}, "limitBytes": {"100"}},
			"log line\n"},
		{"sinceTime is passed in RFC 3339", http.MethodGet, pods + "single/log?sinceTime=2026-01-02T03:04:05Z", 200,
			"/containerLogs/default/single/only", url.Values{"sinceTime": {"2026-01-02T03:04:05Z"}}, "log line\n"},
		{"the only container is the default", http.MethodGet, pods + "single/log", 200,
			"/containerLogs/default/single/only", url.Values{}, "log line\n"},
		{"the default-container annotation is honoured", http.MethodGet, pods + "annotated/log", 200,
			"/containerLogs/default/annotated/b", url.Values{}, "log line\n"},
		{"exec options become the kubelet's query", http.MethodPost,
			pods + "multi/exec?container=b&command=ls&command=-l&stdin=true&stdout=true&tty=true", 400,
			"/exec/default/multi/b", url.Values{"command": {"ls", "-l"}, "stdin": {"1"}, "stdout": {"1"}, "tty": {"1"}},
			"Upgrade request required"},
		{"attach options become the kubelet's query", http.MethodPost, pods + "single/attach?stdout=true&stderr=true", 400,
			"/attach/default/single/only", url.Values{"stdout": {"1"}, "stderr": {"1"}}, "Upgrade request required"},
		{"portforward ports become port parameters", http.MethodPost, pods + "multi/portforward?ports=80,8080", 400,
			"/portForward/default/multi", url.Values{"port": {"80", "8080"}}, "Upgrade request required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := env.do(t, tt.method, tt.path, "")
			if code != tt.wantCode {
				t.Fatalf("status %d (%s), want %d", code, body, tt.wantCode)
			}
			if tt.wantCode == 200 && body != tt.wantBody {
				t.Fatalf("body %q, want %q", body, tt.wantBody)
			}
			if tt.wantCode != 200 && statusMessage(t, body) != tt.wantBody {
				t.Fatalf("message %q, want %q", statusMessage(t, body), tt.wantBody)
			}
			call := env.kubelet.last(t)
			q, _ := url.ParseQuery(call.query)
			if call.path != tt.wantPath || q.Encode() != tt.wantQuery.Encode() {
				t.Fatalf("agent saw %s?%s, want %s?%s", call.path, call.query, tt.wantPath, tt.wantQuery.Encode())
			}
			if call.clientCN != apiserver.KubeletClientCN || call.authorization != "" {
				t.Fatalf("agent saw client %q with Authorization %q; want %q and none", call.clientCN, call.authorization, apiserver.KubeletClientCN)
			}
		})
	}
}

func TestPodProxy_RefusesBadRequestsAsUpstream(t *testing.T) {
	env := newProxyEnv(t)
	env.pod(t, "multi", "node-a", nil, "a", "b")
	env.pod(t, "pending", "", nil, "only")
	env.pod(t, "lost", "node-gone", nil, "only")
	env.node(t, "node-down", "127.0.0.1", closedPort(t))
	env.pod(t, "down", "node-down", nil, "only")
	const pods = "/api/v1/namespaces/default/pods/"
	tests := []struct {
		name, method, path, user string
		wantCode                 int
		wantMessage              string
	}{
		{"missing pod", http.MethodGet, pods + "nope/log", "", 404, `pods "nope" not found`},
		{"no container named in a pod with several", http.MethodGet, pods + "multi/log", "", 400,
			"a container name must be specified for pod multi, choose one of: [a b] or one of the init containers: [setup]"},
		{"unknown container", http.MethodPost, pods + "multi/exec?container=zz&command=ls&stdout=1", "", 400, "container zz is not valid for pod multi"},
		{"unscheduled pod", http.MethodGet, pods + "pending/log", "", 400, "pod pending does not have a host assigned"},
		{"exec without a command", http.MethodPost, pods + "multi/exec?container=a&stdout=true", "", 400, "you must specify at least one command for the container"},
		{"exec without streams", http.MethodPost, pods + "multi/exec?container=a&command=ls", "", 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"negative tailLines is invalid", http.MethodGet, pods + "multi/log?container=a&tailLines=-1", "", 422, ""},
		{"sinceSeconds with sinceTime is invalid", http.MethodGet, pods + "multi/log?container=a&sinceSeconds=3&sinceTime=2026-01-02T03:04:05Z", "", 422, ""},
		{"a non-number is a bad request", http.MethodGet, pods + "multi/log?container=a&limitBytes=lots", "", 400, ""},
		{"an unregistered node is unavailable", http.MethodGet, pods + "lost/log", "", 503, `node "node-gone" of the pod is not registered`},
		{"an unreachable agent is unavailable", http.MethodGet, pods + "down/log", "", 503, "error dialing backend"},
		{"get alone does not allow a websocket exec", http.MethodGet, pods + "multi/exec?container=a&command=ls&stdout=1", "getter", 403,
			`cannot create resource "pods/exec"`},
		{"get is enough for logs", http.MethodGet, pods + "multi/log?container=a", "getter", 200, ""},
		{"no create on pods/portforward either", http.MethodGet, pods + "multi/portforward?ports=80", "getter", 403,
			`cannot create resource "pods/portforward"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := env.do(t, tt.method, tt.path, tt.user)
			if code != tt.wantCode {
				t.Fatalf("status %d (%s), want %d", code, body, tt.wantCode)
			}
			if code != 200 && !strings.Contains(statusMessage(t, body), tt.wantMessage) {
				t.Fatalf("message %q, want it to contain %q", statusMessage(t, body), tt.wantMessage)
			}
		})
	}
}

func closedPort(t *testing.T) int32 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return int32(port)
}

func TestPodProxy_VerifiesTheAgentCertificate(t *testing.T) {
	env := newProxyEnv(t)
	impostor := startFakeKubelet(t, newProxyCA(t)) // serving cert from another CA
	env.node(t, "node-b", "127.0.0.1", impostor.port())
	env.pod(t, "p", "node-b", nil, "only")
	code, body := env.do(t, http.MethodGet, "/api/v1/namespaces/default/pods/p/log", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(statusMessage(t, body), "certificate") {
		t.Fatalf("status %d %s; want 503 about the certificate", code, body)
	}
	impostor.mu.Lock()
	defer impostor.mu.Unlock()
	if len(impostor.calls) != 0 {
		t.Fatalf("the impostor agent got %d requests", len(impostor.calls))
	}
}

func TestPodProxy_UpgradesPassThrough(t *testing.T) {
	env := newProxyEnv(t)
	env.pod(t, "p", "node-a", nil, "only")
	tlsCfg := &tls.Config{InsecureSkipVerify: true}
	t.Run("websocket", func(t *testing.T) {
		d := websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{"v5.channel.k8s.io", "v4.channel.k8s.io"}, HandshakeTimeout: 5 * time.Second}
		u := strings.Replace(env.url, "https://", "wss://", 1) + "/api/v1/namespaces/default/pods/p/exec?command=sh&stdin=true&stdout=true"
		ws, resp, err := d.Dial(u, nil)
		if err != nil {
			t.Fatalf("dial: %v %v", err, resp)
		}
		defer ws.Close()
		if ws.Subprotocol() != "v5.channel.k8s.io" {
			t.Fatalf("subprotocol %q", ws.Subprotocol())
		}
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		ws.WriteMessage(websocket.BinaryMessage, []byte("\x00hi"))
		_, msg, err := ws.ReadMessage()
		if err != nil || string(msg) != "agent: \x00hi" {
			t.Fatalf("read %q, %v", msg, err)
		}
		if call := env.kubelet.last(t); call.path != "/exec/default/p/only" || call.query != "command=sh&stdin=1&stdout=1" {
			t.Fatalf("agent saw %s?%s", call.path, call.query)
		}
	})
	t.Run("spdy", func(t *testing.T) {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(env.url, "https://"), tlsCfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "POST /api/v1/namespaces/default/pods/p/portforward HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\nContent-Length: 0\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "SPDY/3.1" {
			t.Fatalf("response %v, %v", resp, err)
		}
		fmt.Fprintf(conn, "frames\n")
		line, err := br.ReadString('\n')
		if err != nil || line != "agent: frames\n" {
			t.Fatalf("read %q, %v", line, err)
		}
	})
}

func TestKubeletClientCert_IsKeptAndRenewed(t *testing.T) {
	ca := newProxyCA(t)
	dir := t.TempDir()
	now := time.Now()
	k := &apiserver.KubeletClientCert{Dir: dir, Issuer: ca, Roots: ca.pool(), TTL: 3 * time.Hour, Now: func() time.Time { return now }}
	first, err := k.Get()
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(first.Certificate[0])
	if leaf.Subject.CommonName != apiserver.KubeletClientCN || len(leaf.Subject.Organization) != 0 {
		t.Fatalf("subject %v", leaf.Subject)
	}
	again := &apiserver.KubeletClientCert{Dir: dir, Issuer: ca, Roots: ca.pool(), TTL: 3 * time.Hour, Now: func() time.Time { return now }}
	reloaded, err := again.Get()
	if err != nil || string(reloaded.Certificate[0]) != string(first.Certificate[0]) {
		t.Fatalf("a restart did not reuse the certificate on disk (err %v)", err)
	}
	now = now.Add(150 * time.Minute) // past two thirds of its life
	renewed, err := k.Get()
	if err != nil || string(renewed.Certificate[0]) == string(first.Certificate[0]) {
		t.Fatalf("the certificate was not renewed (err %v)", err)
	}
	other := newProxyCA(t)
	k.Roots = other.pool()
	k.Issuer = other
	reissued, err := k.Get()
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := x509.ParseCertificate(reissued.Certificate[0]); l.CheckSignatureFrom(other.cert) != nil {
		t.Fatal("a new CA did not cause a new certificate")
	}
}
