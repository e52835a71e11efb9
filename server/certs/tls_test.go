package certs

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// serveTLS runs an HTTPS server with the bundle's config that answers with
// the verified client identity ("<CN> chains=<n>") or "anonymous".
func serveTLS(t *testing.T, b *Bundle) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", b.ServerTLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		// Refused handshakes are expected here; keep them out of test output.
		ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chains := r.TLS.VerifiedChains
			if len(chains) == 0 {
				fmt.Fprint(w, "anonymous ", r.Proto)
				return
			}
			fmt.Fprintf(w, "%s chains=%d %s", chains[0][0].Subject.CommonName, len(chains), r.Proto)
		}),
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String()
}

func get(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func TestServerTLSConfigHandshakes(t *testing.T) {
	b := mustEnsure(t, testConfig(t))
	url := serveTLS(t, b)
	adminPEM, adminKey := b.AdminCertPEM()
	foreign := mustEnsure(t, testConfig(t))
	foreignPEM, foreignKey := foreign.AdminCertPEM()

	tests := []struct {
		name    string
		certs   []tls.Certificate
		want    string
		wantErr bool
	}{
		{"admin cert is verified against the CA over h2", []tls.Certificate{keyPair(t, adminPEM, adminKey)}, "system:admin chains=1 HTTP/2.0", false},
		{"no client cert is allowed and anonymous", nil, "anonymous HTTP/2.0", false},
		{"client cert from another CA is refused", []tls.Certificate{keyPair(t, foreignPEM, foreignKey)}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				ForceAttemptHTTP2: true,
				TLSClientConfig: &tls.Config{
					RootCAs: b.CAPool(),
					// Always present the cert: with Certificates the client
					// would silently withhold one the server's CA list
					// does not name, and the server would never judge it.
					GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
						if len(tt.certs) == 0 {
							return &tls.Certificate{}, nil
						}
						return &tt.certs[0], nil
					},
				},
			}}
			got, err := get(client, url)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("request succeeded with %q, want TLS failure", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("server saw %q, want %q", got, tt.want)
			}
		})
	}
}

func TestServerTLSConfigRefusesTLS11(t *testing.T) {
	b := mustEnsure(t, testConfig(t))
	url := serveTLS(t, b)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{
		RootCAs: b.CAPool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11,
	})
	if err == nil {
		conn.Close()
		t.Fatal("TLS 1.1 handshake succeeded")
	}
}

func TestKubeconfigFromBundleReachesTheServerAsAdmin(t *testing.T) {
	b := mustEnsure(t, testConfig(t))
	url := serveTLS(t, b)
	path := filepath.Join(t.TempDir(), "etc", "skiff", "skiff.yaml")
	certPEM, keyPEM := b.AdminCertPEM()
	if err := WriteKubeconfig(path, 0, url, b.CACertPEM(), certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	restCfg, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := get(&http.Client{Transport: transport, Timeout: 10 * time.Second}, restCfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "system:admin chains=1") {
		t.Errorf("server saw %q, want system:admin", got)
	}
}
