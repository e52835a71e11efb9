package tlsserve_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff/e2e/testimages/testpki"
	"skiff/e2e/testimages/tlsserve"
	"skiff/e2e/testimages/tlsserve/tlsservetest"
)

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %q %v", url, resp.StatusCode, b, err)
	}
	return string(b)
}

func TestRun_TLSFromFiles_ServesHandlerAndLogsWhatAndWhere(t *testing.T) {
	srv := tlsservetest.New(t, "prog")
	var logs bytes.Buffer // read only once Run has returned
	cfg := srv.Config
	cfg.Log = log.New(&logs, "prog: ", 0)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello "+r.URL.Path) })
	stop := srv.Start(t, func(ctx context.Context) error { return tlsserve.Run(ctx, cfg, "/hello", h) })
	if got := get(t, srv.CA.Client(), srv.URL+"/x"); got != "hello /x" {
		t.Errorf("body %q, want hello /x", got)
	}
	stop()
	want := "prog: serving /hello on " + cfg.Listener.Addr().String() + "\n"
	if got := logs.String(); got != want {
		t.Errorf("log %q, want %q", got, want)
	}
}

func TestRun_Stopped_HeldRequestEndsWithShutdown(t *testing.T) {
	srv := tlsservetest.New(t, "prog")
	entered := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done() // a handler that waits for its caller, as /hang does
	})
	// Run's shutdown grace is 5s; stop fails the test after 10s, so a
	// shutdown that waits for the held request passes only if the
	// request's context ends — measured below, not judged by the clock.
	stop := srv.Start(t, func(ctx context.Context) error { return tlsserve.Run(ctx, srv.Config, "held", h) })
	held := make(chan error, 1)
	go func() {
		resp, err := srv.CA.Client().Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the handler")
	}
	begin := time.Now()
	stop()
	t.Logf("Run returned %v after its context ended with a request held", time.Since(begin).Round(time.Millisecond))
	<-held
}

func TestRun_ClientAuth_DecidesWhetherAClientCertificateIsSeen(t *testing.T) {
	clientCA := testpki.NewCA(t, "client-ca")
	clientCert := clientCA.Issue(t, "caller", x509.ExtKeyUsageClientAuth)
	cases := []struct {
		name string
		auth tls.ClientAuthType
		want string
	}{
		{"default asks for none", tls.NoClientCert, "certificates: 0"},
		{"RequestClientCert", tls.RequestClientCert, "certificates: 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := tlsservetest.New(t, "prog")
			cfg := srv.Config
			cfg.ClientAuth = tc.auth
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "certificates: %d", len(r.TLS.PeerCertificates))
			})
			srv.Start(t, func(ctx context.Context) error { return tlsserve.Run(ctx, cfg, "certs", h) })
			if got := get(t, srv.CA.Client(clientCert), srv.URL); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRun_Failures_ErrorSaysWhichStep(t *testing.T) {
	srv := tlsservetest.New(t, "prog")
	taken, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	cases := []struct {
		name   string
		cfg    tlsserve.Config
		want   string
		wantIs error
	}{
		{"missing certificate",
			tlsserve.Config{CertFile: filepath.Join(dir, "no.crt"), KeyFile: filepath.Join(dir, "no.key")},
			"load serving certificate: ", os.ErrNotExist},
		{"port in use",
			tlsserve.Config{CertFile: srv.Config.CertFile, KeyFile: srv.Config.KeyFile, Port: taken.Addr().(*net.TCPAddr).Port},
			"listen: ", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := tlsserve.Run(ctx, tc.cfg, "nothing", http.NotFoundHandler())
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
				t.Fatalf("Run = %v, want an error starting %q (is %v)", err, tc.want, tc.wantIs)
			}
		})
	}
}

func TestAddFlags_DefaultsInCertDir_OverriddenByArgs(t *testing.T) {
	cases := []struct {
		name              string
		certDir, portFlag string
		port              int
		args              []string
		wantCert, wantKey string
		wantPort          int
	}{
		{"webhook defaults", "/certs", "port", 9443, nil, "/certs/tls.crt", "/certs/tls.key", 9443},
		{"webhook port", "/certs", "port", 9443, []string{"--port=8443"}, "/certs/tls.crt", "/certs/tls.key", 8443},
		{"aggregated server", "/apiserver.local.config/certificates", "secure-port", 443,
			[]string{"--secure-port", "6443", "--tls-cert-file=/a.crt", "--tls-private-key-file=/a.key"}, "/a.crt", "/a.key", 6443},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("prog", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var cfg tlsserve.Config
			cfg.AddFlags(fs, tc.certDir, tc.portFlag, tc.port)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if cfg.CertFile != tc.wantCert || cfg.KeyFile != tc.wantKey || cfg.Port != tc.wantPort {
				t.Errorf("got %s %s %d, want %s %s %d", cfg.CertFile, cfg.KeyFile, cfg.Port, tc.wantCert, tc.wantKey, tc.wantPort)
			}
		})
	}
}

func TestNewLog_PrefixesTheProgramsName(t *testing.T) {
	if got := tlsserve.NewLog("admwebhook").Prefix(); got != "admwebhook: " {
		t.Errorf("prefix %q, want %q", got, "admwebhook: ")
	}
}
