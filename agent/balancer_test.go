package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"skiff/agent/join"
	"skiff/agent/loadbalancer"
	"skiff/server/certs"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestBalancerAddr_IsTheHostPortOfServerURL(t *testing.T) {
	for _, tc := range []struct {
		name, url, want string
		wantErr         bool
	}{
		{name: "ip and port", url: "https://10.0.0.1:6443", want: "10.0.0.1:6443"},
		{name: "inside skiff server: the local server", url: "https://127.0.0.1:6443", want: "127.0.0.1:6443"},
		{name: "dns name, trailing slash", url: "https://server.example:6443/", want: "server.example:6443"},
		{name: "no port is 443", url: "https://server.example", want: "server.example:443"},
		{name: "ipv6", url: "https://[fd00::1]:6443", want: "[fd00::1]:6443"},
		{name: "not https", url: "http://10.0.0.1:6443", wantErr: true},
		{name: "no host", url: "https://:6443", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := balancerAddr(tc.url)
			if (err != nil) != tc.wantErr {
				t.Fatalf("balancerAddr(%q) = %q, %v; want error %v", tc.url, got, err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("balancerAddr(%q) = %q, want %q", tc.url, got, tc.want)
			}
		})
	}
}

// The balancer's state lands in <DataDir>/agent/etc, and an agent started
// again (its --server now dead) still knows the servers it learned.
func TestAgent_BalancerStateFileLandsInAgentDataDir_AndSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		serverURL string
		initial   string
	}{
		{name: "agent", serverURL: "https://10.0.0.1:6443", initial: "10.0.0.1:6443"},
		{name: "agent inside skiff server", serverURL: "https://127.0.0.1:39999", initial: "127.0.0.1:39999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			cfg := Config{ServerURL: tc.serverURL, DataDir: dataDir, Logger: quietLogger()}
			b, err := newBalancer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			runBalancer(t, b)
			if got := b.lb.Active(); got != tc.initial {
				t.Fatalf("first active server = %q, want --server's %q", got, tc.initial)
			}
			if !strings.HasPrefix(b.lb.URL(), "https://127.0.0.1:") {
				t.Fatalf("balancer URL %q: want a loopback https URL", b.lb.URL())
			}
			learned := []string{"10.0.0.2:6443", "10.0.0.3:6443"}
			b.lb.Update(learned)
			want := filepath.Join(dataDir, "agent", "etc", loadbalancer.DefaultName+".json")
			if got := loadbalancer.StatePath(dataDir, loadbalancer.DefaultName); got != want {
				t.Fatalf("StatePath = %q, want %q", got, want)
			}
			data, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("state file not in the agent's data dir: %v", err)
			}
			var st struct{ Servers []string }
			if err := json.Unmarshal(data, &st); err != nil || !slices.Equal(st.Servers, learned) {
				t.Fatalf("state file %s = %s (%v), want servers %v", want, data, err, learned)
			}

			again, err := newBalancer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			runBalancer(t, again)
			if got, want := again.lb.Servers(), append(learned, tc.initial); !slices.Equal(got, want) {
				t.Fatalf("after a restart the servers are %v, want %v", got, want)
			}
		})
	}
}

func writeKubeconfig(t *testing.T, dir string, cluster *clientcmdapi.Cluster, certPEM, keyPEM []byte) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["skiff"] = cluster
	auth := &clientcmdapi.AuthInfo{}
	if certPEM != nil {
		auth.ClientCertificate, auth.ClientKey = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
		if err := os.WriteFile(auth.ClientCertificate, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(auth.ClientKey, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kc.AuthInfos["node"] = auth
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: "node"}
	kc.CurrentContext = "default"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAgent_ClientsGoThroughBalancer_RestConfigPointsAtIt(t *testing.T) {
	const lbURL = "https://127.0.0.1:40123"
	for _, tc := range []struct {
		name    string
		cluster clientcmdapi.Cluster
	}{
		{name: "kubeconfig names the server", cluster: clientcmdapi.Cluster{Server: "https://10.0.0.1:6443"}},
		{name: "kubeconfig names a dns name", cluster: clientcmdapi.Cluster{Server: "https://server.example:6443"}},
		{name: "a tls-server-name is dropped", cluster: clientcmdapi.Cluster{Server: "https://10.0.0.1:6443", TLSServerName: "10.0.0.1"}},
		{name: "kubeconfig already names the balancer", cluster: clientcmdapi.Cluster{Server: lbURL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ca := filepath.Join(dir, "ca.crt")
			if err := os.WriteFile(ca, []byte("unused"), 0o600); err != nil {
				t.Fatal(err)
			}
			cl := tc.cluster
			cl.CertificateAuthority = ca
			rc, err := apiRestConfig(writeKubeconfig(t, dir, &cl, nil, nil), lbURL, "node-1")
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != lbURL {
				t.Errorf("Host = %q, want the balancer's %q", rc.Host, lbURL)
			}
			if rc.TLSClientConfig.ServerName != "" {
				t.Errorf("ServerName = %q: the balancer's loopback address is verified, no override", rc.TLSClientConfig.ServerName)
			}
			if rc.TLSClientConfig.CAFile != ca {
				t.Errorf("CAFile = %q, want %q", rc.TLSClientConfig.CAFile, ca)
			}
			if rc.UserAgent != "skiff-agent/node-1" || rc.QPS != 50 || rc.Burst != 100 {
				t.Errorf("UserAgent, QPS, Burst = %q, %v, %v; want skiff-agent/node-1, 50, 100", rc.UserAgent, rc.QPS, rc.Burst)
			}
		})
	}
}

// apiServer is a fake API server with a real skiff serving certificate:
// it answers /version with its name and /readyz with readyz.
type apiServer struct {
	name   string
	srv    *httptest.Server
	readyz atomic.Int32
	hits   atomic.Int32
}

func startAPIServer(t *testing.T, name, ip string, tlsCfg *tls.Config) *apiServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	a := &apiServer{name: name}
	a.readyz.Store(http.StatusOK)
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		switch r.URL.Path {
		case "/readyz":
			w.WriteHeader(int(a.readyz.Load()))
		case "/version":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(version.Info{GitVersion: name})
		case "/cacerts":
			_, _ = w.Write([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	a.srv.Listener.Close()
	a.srv.Listener = ln
	a.srv.TLS = tlsCfg
	a.srv.EnableHTTP2 = true
	a.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes the tests refuse
	a.srv.StartTLS()
	t.Cleanup(a.stop)
	return a
}

func (a *apiServer) addr() string { return a.srv.Listener.Addr().String() }

func (a *apiServer) stop() {
	a.srv.CloseClientConnections()
	a.srv.Close()
}

// testPKI is a server PKI made by skiff's own server/certs, whose serving
// certificate names none of the addresses the fake servers listen on
// (127.0.0.2, 127.0.0.3): only what every skiff server's does, loopback
// among them.
func testPKI(t *testing.T) *certs.Bundle {
	t.Helper()
	b, err := certs.Ensure(certs.Config{Dir: t.TempDir(), Hostname: "server-a"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runBalancer(t *testing.T, b *balancer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.lb.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("balancer Run: %v", err)
		}
	})
}

// The agent's clients, built as start builds them, reach the servers
// through the balancer with TLS verified against the cluster CA, and keep
// working when the server they used dies.
func TestAgent_ClientsGoThroughBalancer_VerifiedAndFailingOver(t *testing.T) {
	pki := testPKI(t)
	srvA := startAPIServer(t, "server-a", "127.0.0.2", pki.ServerTLSConfig())
	srvB := startAPIServer(t, "server-b", "127.0.0.3", pki.ServerTLSConfig())

	// Dialled directly, the servers' certificates do not verify: they do
	// not name 127.0.0.2. Through the balancer they must.
	pool := pki.CAPool()
	if c, err := tls.Dial("tcp", srvA.addr(), &tls.Config{RootCAs: pool}); err == nil {
		c.Close()
		t.Fatal("the test PKI names 127.0.0.2: the test proves nothing")
	}

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, pki.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := pki.IssueClientCert("system:node:node-1", []string{"system:nodes"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, dir, &clientcmdapi.Cluster{Server: "https://" + srvA.addr(), CertificateAuthority: caFile}, certPEM, keyPEM)

	b, err := newBalancer(Config{ServerURL: "https://" + srvA.addr(), DataDir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.health.trust(pki.CACertPEM()); err != nil {
		t.Fatal(err)
	}
	runBalancer(t, b)
	b.lb.Update([]string{srvA.addr(), srvB.addr()}) // as WatchEndpoints would

	rc, err := apiRestConfig(kubeconfig, b.lb.URL(), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	served := func() (string, error) {
		v, err := client.Discovery().ServerVersion()
		if err != nil {
			return "", err
		}
		return v.GitVersion, nil
	}
	got, err := served()
	if err != nil {
		t.Fatalf("through the balancer: %v", err)
	}
	if got != "server-a" {
		t.Fatalf("served by %q, want --server's server-a", got)
	}

	srvA.stop()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err = served()
		if err == nil && got == "server-b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after server-a died: served by %q, err %v; want server-b", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if active := b.lb.Active(); active != srvB.addr() {
		t.Fatalf("active server %q, want server-b's %s", active, srvB.addr())
	}
}

func TestServerCheck_TCPUntilTheCAIsKnown_ThenVerifiedReadyz(t *testing.T) {
	pki := testPKI(t)
	other := testPKI(t)
	for _, tc := range []struct {
		name    string
		tlsCfg  *tls.Config
		readyz  int
		trusted bool
		wantErr bool
	}{
		{name: "before the join, an unready server that accepts is up", tlsCfg: pki.ServerTLSConfig(), readyz: 500},
		{name: "ready server", tlsCfg: pki.ServerTLSConfig(), readyz: 200, trusted: true},
		{name: "unready server (no quorum) is down", tlsCfg: pki.ServerTLSConfig(), readyz: 500, trusted: true, wantErr: true},
		{name: "server of another CA is down", tlsCfg: other.ServerTLSConfig(), readyz: 200, trusted: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startAPIServer(t, "s", "127.0.0.1", tc.tlsCfg)
			srv.readyz.Store(int32(tc.readyz))
			var check serverCheck
			if tc.trusted {
				if err := check.trust(pki.CACertPEM()); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := check.Check(ctx, srv.addr())
			if (err != nil) != tc.wantErr {
				t.Fatalf("Check = %v, want error %v", err, tc.wantErr)
			}
			if tc.trusted && !tc.wantErr && srv.hits.Load() == 0 {
				t.Fatal("the trusted check did not ask /readyz")
			}
		})
	}
	var check serverCheck
	if err := check.trust([]byte("not pem")); err == nil {
		t.Fatal("trust took a CA that is not PEM")
	}
}

// Run joins through the balancer: with --server dead, the join reaches the
// server the balancer learned before the restart (whose CA does not match
// the token, so the join then fails), and the balancer is stopped before
// Run returns.
func TestRun_JoinGoesThroughTheBalancer_WhichIsStoppedWhenRunFails(t *testing.T) {
	srv := startAPIServer(t, "server-b", "127.0.0.2", testPKI(t).ServerTLSConfig())
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	dataDir := t.TempDir()
	state := loadbalancer.StatePath(dataDir, loadbalancer.DefaultName)
	if err := os.MkdirAll(filepath.Dir(state), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte(`{"initial":"`+deadAddr+`","servers":["`+srv.addr()+`"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		ServerURL: "https://" + deadAddr, Token: "K10" + strings.Repeat("0", 64) + "::server:secret",
		DataDir: dataDir, NodeName: "node-1", NodeIPs: []string{"127.0.0.1"}, Logger: quietLogger(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = Run(ctx, cfg)
	if !errors.Is(err, join.ErrCAMismatch) {
		t.Fatalf("Run = %v, want the join's CA mismatch", err)
	}
	if srv.hits.Load() == 0 {
		t.Fatal("the join never reached the server the balancer knew")
	}
	m := regexp.MustCompile(`load balancer at (127\.0\.0\.1:\d+)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("Run = %v: does not say the join went through the balancer", err)
	}
	if c, err := net.DialTimeout("tcp", m[1], time.Second); err == nil {
		c.Close()
		t.Fatalf("the balancer still listens on %s after Run returned", m[1])
	}
}

// The agent's endpoints loop feeds the balancer the servers the
// default/kubernetes Endpoints list, and the balancer keeps them in the
// agent's data dir.
func TestAgent_EndpointsLoopFeedsTheBalancer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ep    *corev1.Endpoints
		wantN []string
	}{
		{
			name: "three servers",
			ep: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
				Subsets: []corev1.EndpointSubset{{
					Addresses: []corev1.EndpointAddress{{IP: "10.0.0.3"}, {IP: "10.0.0.1"}, {IP: "10.0.0.2"}},
					Ports:     []corev1.EndpointPort{{Name: "https", Port: 6443}},
				}}},
			wantN: []string{"10.0.0.1:6443", "10.0.0.2:6443", "10.0.0.3:6443", "127.0.0.1:6443"},
		},
		{
			name: "a server on another port, and a port that is not https",
			ep: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
				Subsets: []corev1.EndpointSubset{{
					Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
					Ports:     []corev1.EndpointPort{{Name: "https", Port: 16443}, {Name: "metrics", Port: 9000}},
				}}},
			wantN: []string{"10.0.0.1:16443", "127.0.0.1:6443"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			b, err := newBalancer(Config{ServerURL: "https://127.0.0.1:6443", DataDir: dataDir, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			g := newLoops(context.Background())
			g.Go("loadbalancer", b.lb.Run)
			b.watchServers(g, fake.NewClientset(tc.ep))
			defer func() {
				if err := g.Stop(); err != nil {
					t.Errorf("loops: %v", err)
				}
			}()
			state := filepath.Join(dataDir, "agent", "etc", loadbalancer.DefaultName+".json")
			deadline := time.Now().Add(5 * time.Second)
			for {
				_, err := os.Stat(state) // written just after the list changes
				if slices.Equal(b.lb.Servers(), tc.wantN) && err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("servers = %v, want %v; the learned servers kept in the agent's data dir: %v", b.lb.Servers(), tc.wantN, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func TestLoops_FirstFailureEndsAllAndIsReturned(t *testing.T) {
	failure := errors.New("boom")
	blockUntilDone := func(ctx context.Context) error { <-ctx.Done(); return nil }
	for _, tc := range []struct {
		name        string
		loops       map[string]func(context.Context) error
		cancelFirst bool
		wantErr     string
	}{
		{
			name:    "a failing loop ends the others",
			loops:   map[string]func(context.Context) error{"bad": func(context.Context) error { return failure }, "good": blockUntilDone},
			wantErr: "bad: boom",
		},
		{
			name: "a loop that ends with nil does not end the others",
			loops: map[string]func(context.Context) error{"once": func(context.Context) error { return nil }, "good": blockUntilDone,
				"late": func(ctx context.Context) error { <-ctx.Done(); return failure }},
			cancelFirst: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g := newLoops(ctx)
			var ended sync.WaitGroup
			var count atomic.Int32
			for name, loop := range tc.loops {
				ended.Add(1)
				g.Go(name, func(ctx context.Context) error {
					defer ended.Done()
					defer count.Add(1)
					return loop(ctx)
				})
			}
			if tc.cancelFirst {
				time.Sleep(50 * time.Millisecond)
				select {
				case <-g.Done():
					t.Fatal("the group ended without a failure")
				default:
				}
				cancel()
			}
			select {
			case <-g.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the group did not end")
			}
			err := g.Stop()
			if int(count.Load()) != len(tc.loops) {
				t.Fatalf("Stop returned with %d of %d loops ended", count.Load(), len(tc.loops))
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("Stop = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
