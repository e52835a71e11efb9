package testimages

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/e2e/testimages/testpki"
)

// imageFile returns the ref an OCI tarball names and the content of one
// file of its (single) layer.
func imageFile(t *testing.T, tarball, name string) (string, []byte) {
	t.Helper()
	blobs := map[string][]byte{}
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		blobs[h.Name] = b
	}
	var index ocispec.Index
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", blobs["index.json"], err)
	}
	blob := func(d fmt.Stringer) []byte { return blobs["blobs/sha256/"+strings.TrimPrefix(d.String(), "sha256:")] }
	var m ocispec.Manifest
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(blob(m.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/"+name {
		t.Errorf("entrypoint %v, want [/%s]", cfg.Config.Entrypoint, name)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(m.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	lr := tar.NewReader(zr)
	for {
		h, err := lr.Next()
		if err != nil {
			t.Fatalf("layer has no %s: %v", name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(lr)
			if err != nil {
				t.Fatal(err)
			}
			return index.Manifests[0].Annotations[ocispec.AnnotationRefName], b
		}
	}
}

// runFromImage writes the image's program to a temp dir and starts it; it
// is stopped at the end of the test.
func runFromImage(t *testing.T, img Image, args ...string) {
	t.Helper()
	name := strings.TrimPrefix(img.Entrypoint, "/")
	ref, bin := imageFile(t, img.Path, name)
	if ref != img.Ref {
		t.Errorf("image names %q, want %q", ref, img.Ref)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path, args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, log.String())
		}
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitOK polls until req answers 200 (the program is starting up).
func waitOK(t *testing.T, client *http.Client, newReq func() *http.Request) *http.Response {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Do(newReq())
		if err == nil && resp.StatusCode == http.StatusOK {
			return resp
		}
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			err = fmt.Errorf("%s: %s", resp.Status, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", newReq().URL, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBuild_CRDConvert_ImageRunsTheWebhook(t *testing.T) {
	cache := t.TempDir()
	img, err := Build(context.Background(), cache, CRDConvert)
	if err != nil {
		t.Fatal(err)
	}
	ca := testpki.NewCA(t, "webhook-ca")
	certFile, keyFile := testpki.WritePair(t, t.TempDir(), ca.Issue(t, "crdconvert", x509.ExtKeyUsageServerAuth))
	port := freePort(t)
	runFromImage(t, img, "--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--port", fmt.Sprint(port))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	review := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u1","desiredAPIVersion":"stable.skiff.test/v2",
"objects":[{"apiVersion":"stable.skiff.test/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"hostPort":"db:5432"}}]}}`
	resp := waitOK(t, client, func() *http.Request {
		r, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("https://127.0.0.1:%d/convert", port), strings.NewReader(review))
		r.Header.Set("Content-Type", "application/json")
		return r
	})
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"uid":"u1"`) || !strings.Contains(string(b), `"host":"db","port":5432`) {
		t.Errorf("review answer %s, want u1 converted to host db port 5432", b)
	}

	again, err := Build(context.Background(), cache, CRDConvert)
	if err != nil {
		t.Fatal(err)
	}
	if again != img {
		t.Errorf("second build %+v, want the cached %+v", again, img)
	}
	if tars, _ := filepath.Glob(filepath.Join(cache, "images", "*")); len(tars) != 1 {
		t.Errorf("cache holds %v, want one tarball", tars)
	}
}

// fakeAPIServer serves the extension-apiserver-authentication ConfigMap
// and writes a kubeconfig pointing at it.
func fakeAPIServer(t *testing.T, cm *corev1.ConfigMap) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cm)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, srv.URL, encodeBase64(ca))
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBuild_ExtAPI_ImageRunsAndEchoesProxiedIdentity(t *testing.T) {
	img, err := Build(context.Background(), t.TempDir(), ExtAPI)
	if err != nil {
		t.Fatal(err)
	}
	serving, fp := testpki.NewCA(t, "serving-ca"), testpki.NewCA(t, "front-proxy-ca")
	certFile, keyFile := testpki.WritePair(t, t.TempDir(), serving.Issue(t, "extapi", x509.ExtKeyUsageServerAuth))
	kubeconfig := fakeAPIServer(t, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"},
		Data: map[string]string{
			"requestheader-client-ca-file":       string(fp.PEM),
			"requestheader-allowed-names":        `["front-proxy-client"]`,
			"requestheader-username-headers":     `["X-Remote-User"]`,
			"requestheader-group-headers":        `["X-Remote-Group"]`,
			"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		},
	})
	port := freePort(t)
	runFromImage(t, img, "--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--secure-port", fmt.Sprint(port), "--kubeconfig", kubeconfig, "--flunders", "team/echo")
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	proxy := fp.Issue(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: serving.Pool(), Certificates: []tls.Certificate{proxy}}}}
	waitOK(t, client, func() *http.Request { r, _ := http.NewRequest(http.MethodGet, base+"/readyz", nil); return r }).Body.Close()
	resp := waitOK(t, client, func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, base+"/apis/wardle.skiff.test/v1alpha1/namespaces/team/flunders/echo", nil)
		r.Header.Set("X-Remote-User", "carol")
		r.Header.Add("X-Remote-Group", "qa")
		return r
	})
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"caller":{"username":"carol","groups":["qa"]`) {
		t.Errorf("flunder %s, want it read by carol in qa", b)
	}
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
