package webhook

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
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
)

// testCA signs serving certificates for the test webhooks.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serve starts a TLS webhook whose certificate, signed by ca, names
// 127.0.0.1 and dnsNames.
func (ca *testCA) serve(t *testing.T, h http.Handler, dnsNames ...string) *httptest.Server {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: dnsNames, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"h2", "http/1.1"}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// fakeResolver maps namespace/name:port to an address, counting calls.
type fakeResolver struct {
	addrs map[string]string
	err   error
	calls atomic.Int32
	mu    sync.Mutex
	asked []int32
}

func (f *fakeResolver) ResolveService(ctx context.Context, namespace, name string, port int32) (string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.asked = append(f.asked, port)
	f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	addr, ok := f.addrs[namespace+"/"+name]
	if !ok {
		return "", apierrors.NewServiceUnavailable("no endpoints available for service " + name)
	}
	return addr, nil
}

type echoReq struct {
	Hello string `json:"hello"`
}

type echoResp struct {
	Hello    string `json:"hello"`
	Path     string `json:"path"`
	SNI      string `json:"sni"`
	Host     string `json:"host"`
	Timeout  string `json:"timeout"`
	Method   string `json:"method"`
	CT       string `json:"contentType"`
	Protocol string `json:"protocol"`
}

// echo answers with what it saw.
func echo(w http.ResponseWriter, r *http.Request) {
	var in echoReq
	_ = json.NewDecoder(r.Body).Decode(&in)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(echoResp{
		Hello: in.Hello, Path: r.URL.Path, SNI: r.TLS.ServerName, Host: r.Host,
		Timeout: r.URL.Query().Get("timeout"), Method: r.Method, CT: r.Header.Get("Content-Type"), Protocol: r.Proto,
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestClient_URLWebhookWithCABundle_PostsJSONAndDecodesAnswer(t *testing.T) {
	ca := newCA(t)
	srv := ca.serve(t, http.HandlerFunc(echo))
	c := New(Config{})
	var out echoResp
	err := c.Do(ctxT(t), ClientConfig{URL: srv.URL + "/convert", CABundle: ca.pem}, 30*time.Second, echoReq{Hello: "world"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := echoResp{Hello: "world", Path: "/convert", Host: strings.TrimPrefix(srv.URL, "https://"), Timeout: "30s", Method: "POST", CT: "application/json", Protocol: "HTTP/2.0"}
	if out != want {
		t.Errorf("webhook saw %+v, want %+v", out, want)
	}
}

func TestClient_ServiceWebhook_DialsResolvedEndpointWithServiceServerName(t *testing.T) {
	ca := newCA(t)
	srv := ca.serve(t, http.HandlerFunc(echo), "hook.ns.svc")
	res := &fakeResolver{addrs: map[string]string{"ns/hook": srv.Listener.Addr().String()}}
	c := New(Config{Resolver: res})
	cases := []struct {
		name     string
		ref      ServiceRef
		wantPort int32
		wantHost string
		wantPath string
	}{
		{"default port", ServiceRef{Namespace: "ns", Name: "hook", Path: "/crdconvert"}, 443, "hook.ns.svc:443", "/crdconvert"},
		{"explicit port, path without slash", ServiceRef{Namespace: "ns", Name: "hook", Path: "x", Port: 9443}, 9443, "hook.ns.svc:9443", "/x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res.mu.Lock()
			res.asked = nil
			res.mu.Unlock()
			var out echoResp
			ref := tc.ref
			if err := c.Do(ctxT(t), ClientConfig{Service: &ref, CABundle: ca.pem}, 0, echoReq{Hello: "svc"}, &out); err != nil {
				t.Fatal(err)
			}
			if out.SNI != "hook.ns.svc" || out.Host != tc.wantHost || out.Path != tc.wantPath || out.Hello != "svc" {
				t.Errorf("webhook saw %+v, want SNI hook.ns.svc, host %s, path %s", out, tc.wantHost, tc.wantPath)
			}
			if out.Protocol != "HTTP/1.1" {
				t.Errorf("protocol to a Service = %s, want HTTP/1.1 (spread over endpoints, as upstream)", out.Protocol)
			}
			res.mu.Lock()
			defer res.mu.Unlock()
			if len(res.asked) != 1 || res.asked[0] != tc.wantPort {
				t.Errorf("resolver asked for ports %v, want [%d]", res.asked, tc.wantPort)
			}
		})
	}
}

func TestClient_FailedCalls_SayWhatFailed(t *testing.T) {
	ca := newCA(t)
	other := newCA(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	mux := http.NewServeMux()
	mux.HandleFunc("/garbage", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>not json") })
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/500", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "conversion exploded", http.StatusInternalServerError)
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"go away","reason":"Forbidden","code":403}`)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://192.0.2.1/", http.StatusFound)
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"hello":"`+strings.Repeat("x", 4096)+`"}`)
	})
	srv := ca.serve(t, mux)

	closed := ca.serve(t, http.HandlerFunc(echo))
	closedURL := closed.URL
	closed.Close()

	cases := []struct {
		name     string
		cc       ClientConfig
		resolver Resolver
		timeout  time.Duration
		kind     error
		also     error  // a cause errors.Is must find too
		msg      string // in the message
	}{
		{"garbage answer", ClientConfig{URL: srv.URL + "/garbage", CABundle: ca.pem}, nil, 0, ErrUndecodable, nil, "cannot decode the webhook's response"},
		{"empty answer", ClientConfig{URL: srv.URL + "/empty", CABundle: ca.pem}, nil, 0, ErrUndecodable, nil, "empty response"},
		{"refused connection", ClientConfig{URL: closedURL, CABundle: ca.pem}, nil, 0, ErrUnreachable, nil, "connection refused"},
		{"no answer within the timeout", ClientConfig{URL: srv.URL + "/slow", CABundle: ca.pem}, nil, 200 * time.Millisecond, ErrTimeout, context.DeadlineExceeded, "deadline exceeded"},
		{"error status with text", ClientConfig{URL: srv.URL + "/500", CABundle: ca.pem}, nil, 0, ErrStatus, nil, "500 Internal Server Error: conversion exploded"},
		{"error status with a Status", ClientConfig{URL: srv.URL + "/status", CABundle: ca.pem}, nil, 0, ErrStatus, nil, "403 Forbidden: go away"},
		{"redirect is not followed", ClientConfig{URL: srv.URL + "/redirect", CABundle: ca.pem}, nil, 0, ErrStatus, nil, "302"},
		{"answer over the size limit", ClientConfig{URL: srv.URL + "/huge", CABundle: ca.pem}, nil, 0, ErrUndecodable, ErrResponseTooLarge, "too large"},
		{"certificate of another CA", ClientConfig{URL: srv.URL + "/garbage", CABundle: other.pem}, nil, 0, ErrUnreachable, nil, "certificate signed by unknown authority"},
		{"no caBundle: system roots", ClientConfig{URL: srv.URL + "/garbage"}, nil, 0, ErrUnreachable, nil, "certificate signed by unknown authority"},
		{"service without endpoints", ClientConfig{Service: &ServiceRef{Namespace: "ns", Name: "gone"}, CABundle: ca.pem}, &fakeResolver{}, 0, ErrUnreachable, nil, `Post "https://gone.ns.svc:443?timeout=`},
		{"neither URL nor service", ClientConfig{}, nil, 0, ErrInvalidConfig, nil, "either service or URL"},
		{"caBundle without certificates", ClientConfig{URL: srv.URL, CABundle: []byte("not pem")}, nil, 0, ErrInvalidConfig, nil, "no PEM certificate"},
		{"service without a resolver", ClientConfig{Service: &ServiceRef{Namespace: "ns", Name: "hook"}}, nil, 0, ErrInvalidConfig, nil, "cannot resolve webhook services"},
		{"URL of another scheme", ClientConfig{URL: "ftp://example.com/x"}, nil, 0, ErrInvalidConfig, nil, "is not https://host[/path]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{Resolver: tc.resolver, MaxResponseBytes: 1024})
			var out echoResp
			err := c.Do(ctxT(t), tc.cc, tc.timeout, echoReq{Hello: "x"}, &out)
			if err == nil {
				t.Fatalf("call succeeded with %+v, want an error", out)
			}
			t.Log(err)
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("error %T %v is not a *webhook.Error", err, err)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %q is not %v (kind %v)", err, tc.kind, we.Kind)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Errorf("error %q does not wrap %v", err, tc.also)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

func TestClient_ErrorStatusAnswer_KeepsCodeAndStatus(t *testing.T) {
	ca := newCA(t)
	srv := ca.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"slow down","reason":"TooManyRequests","code":429}`)
	}))
	err := New(Config{}).Do(ctxT(t), ClientConfig{URL: srv.URL, CABundle: ca.pem}, 0, echoReq{}, &echoResp{})
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v is not a *webhook.Error", err)
	}
	if we.StatusCode != http.StatusTooManyRequests || we.Status == nil || we.Status.Message != "slow down" || we.Status.Code != 429 {
		t.Errorf("error kept code %d and status %+v, want 429 and the webhook's Status", we.StatusCode, we.Status)
	}
}

func TestClient_ResolverAPIError_IsReachableThroughTheError(t *testing.T) {
	c := New(Config{Resolver: &fakeResolver{}})
	err := c.Do(ctxT(t), ClientConfig{Service: &ServiceRef{Namespace: "ns", Name: "gone"}}, 0, echoReq{}, &echoResp{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("error %v does not carry the resolver's 503", err)
	}
}

func TestClient_SameConfig_ReusesTransportAndConnection(t *testing.T) {
	ca := newCA(t)
	srv := ca.serve(t, http.HandlerFunc(echo), "hook.ns.svc")
	res := &fakeResolver{addrs: map[string]string{"ns/hook": srv.Listener.Addr().String()}}
	var dials atomic.Int32
	var d net.Dialer
	c := New(Config{Resolver: res, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}})
	cc := func() ClientConfig {
		// A fresh value each time: the cache is keyed by content.
		return ClientConfig{Service: &ServiceRef{Namespace: "ns", Name: "hook", Port: 443}, CABundle: append([]byte(nil), ca.pem...)}
	}
	for range 3 {
		if err := c.Do(ctxT(t), cc(), 0, echoReq{}, &echoResp{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("3 calls with one configuration dialed %d times, want 1 (a cached transport)", n)
	}
	other := cc()
	other.Service.Path = "/other"
	if err := c.Do(ctxT(t), other, 0, echoReq{}, &echoResp{}); err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("a second configuration dialed %d times in all, want 2 (its own transport)", n)
	}
}

func TestFromUpstreamConfigs_SameWebhook_SameClientConfig(t *testing.T) {
	want := ClientConfig{Service: &ServiceRef{Namespace: "ns", Name: "hook", Path: "/p", Port: 8443}, CABundle: []byte("ca")}
	conv := FromConversion(&apiextensionsv1.WebhookClientConfig{
		Service:  &apiextensionsv1.ServiceReference{Namespace: "ns", Name: "hook", Path: ptr.To("/p"), Port: ptr.To[int32](8443)},
		CABundle: []byte("ca"),
	})
	adm := FromAdmission(admissionregistrationv1.WebhookClientConfig{
		Service:  &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "hook", Path: ptr.To("/p"), Port: ptr.To[int32](8443)},
		CABundle: []byte("ca"),
	})
	for name, got := range map[string]ClientConfig{"conversion": conv, "admission": adm} {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("%s config = %s, want %s", name, gb, wb)
		}
	}
	url := FromConversion(&apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://h/x"), CABundle: []byte(" \n")})
	if url.URL != "https://h/x" || url.Service != nil || url.CABundle != nil {
		t.Errorf("URL config = %+v, want the URL and no caBundle (whitespace only)", url)
	}
}
