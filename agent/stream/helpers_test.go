package stream

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"skiff/runtime/containers"
)

// testPKI is a CA with a serving certificate for 127.0.0.1 and client
// certificates.
type testPKI struct {
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testPKI{caCert: cert, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (p *testPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	return pool
}

// issue returns PEM cert and key; server certs get 127.0.0.1.
func (p *testPKI) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// fakePods knows containers by "ns/pod/container" and netns by "ns/pod".
type fakePods struct {
	mu         sync.Mutex
	containers map[string]ContainerRef
	netns      map[string]string
}

func (f *fakePods) Container(ns, pod, name string, previous bool) (ContainerRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := ns + "/" + pod + "/" + name
	if previous {
		key += "/previous"
	}
	c, ok := f.containers[key]
	if !ok {
		return ContainerRef{}, fmt.Errorf("container %q in pod %s/%s not found", name, ns, pod)
	}
	return c, nil
}

func (f *fakePods) PodNetNS(ns, pod string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.netns[ns+"/"+pod]
	if !ok {
		return "", fmt.Errorf("pod %s/%s not found", ns, pod)
	}
	return p, nil
}

func (f *fakePods) set(key string, c ContainerRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[key] = c
}

// fakeRuntime interprets a few commands:
//
//	echo ARGS...   prints the arguments
//	exit N         exits with N (after "bye" on stderr)
//	cat            copies stdin to stdout
//	resize         prints each terminal size it receives until stdin ends
type fakeRuntime struct {
	mu    sync.Mutex
	execs []containers.ExecRequest
}

func (f *fakeRuntime) Exec(ctx context.Context, id string, req containers.ExecRequest) (int, error) {
	f.mu.Lock()
	f.execs = append(f.execs, req)
	f.mu.Unlock()
	if id != "c1" {
		return 0, errors.New("no such container")
	}
	out := req.Stdout
	if out == nil {
		out = io.Discard
	}
	switch req.Cmd[0] {
	case "echo":
		fmt.Fprintln(out, strings.Join(req.Cmd[1:], " "))
	case "exit":
		if req.Stderr != nil {
			fmt.Fprintln(req.Stderr, "bye")
		}
		var n int
		fmt.Sscan(req.Cmd[1], &n)
		return n, nil
	case "cat":
		if req.Stdin != nil {
			io.Copy(out, req.Stdin)
		}
	case "resize":
		for {
			select {
			case sz, ok := <-req.Resize:
				if !ok {
					return 0, nil
				}
				fmt.Fprintf(out, "%dx%d\n", sz.Width, sz.Height)
				if sz.Width == 0 {
					return 0, nil
				}
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	default:
		return 0, fmt.Errorf("unknown command %q", req.Cmd[0])
	}
	return 0, nil
}

func (f *fakeRuntime) Attach(ctx context.Context, id string, req containers.AttachRequest) error {
	if req.Stdout != nil {
		fmt.Fprintln(req.Stdout, "attached")
	}
	if req.Stdin != nil && req.Stdout != nil {
		io.Copy(req.Stdout, req.Stdin)
	}
	return nil
}

// testServer is a streaming server on a loopback port.
type testServer struct {
	url  string
	pki  *testPKI
	pods *fakePods
	rt   *fakeRuntime
}

func startTestServer(t *testing.T) *testServer {
	t.Helper()
	pki := newTestPKI(t)
	certPEM, keyPEM := pki.issue(t, "node-a", true)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pods := &fakePods{containers: map[string]ContainerRef{
		"ns1/web/app": {ID: "c1", Running: true},
	}, netns: map[string]string{}}
	rt := &fakeRuntime{}
	var logs bytes.Buffer
	s, err := New(Config{Addr: "127.0.0.1:0", Certificate: &pair, ClientCA: pki.pool(), Pods: pods, Runtime: rt,
		StreamCreationTimeout: 5 * time.Second,
		Logger:                slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &testServer{url: "https://" + ln.Addr().String(), pki: pki, pods: pods, rt: rt}
}

// restConfig is a client-go config presenting a client certificate for cn.
func (ts *testServer) restConfig(t *testing.T, cn string) *rest.Config {
	cert, key := ts.pki.issue(t, cn, false)
	return &rest.Config{Host: ts.url, TLSClientConfig: rest.TLSClientConfig{CAData: ts.pki.caPEM, CertData: cert, KeyData: key}}
}

// tlsConfig is a client TLS config with a client certificate for cn ("" for none).
func (ts *testServer) tlsConfig(t *testing.T, cn string) *tls.Config {
	c := &tls.Config{RootCAs: ts.pki.pool()}
	if cn != "" {
		cert, key := ts.pki.issue(t, cn, false)
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}
