package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"skiff/e2e/testimages"
	"skiff/e2e/testimages/testpki"
)

// The extension-API tests' own images (skiff/e2e/testimages) import with
// `skiff images import` under their refs, and run in a container from
// their image alone (static, no libc).
func TestTestImages_ImportedWithSkiffImages_RunAsContainers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cache := e2eCache(t)
	var imgs []testimages.Image
	for _, p := range []testimages.Program{testimages.CRDConvert, testimages.ExtAPI} {
		img, err := testimages.Build(ctx, cache, p)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	sock := startDebianContainerd(t, "", debianContainerdDir(t))
	endpoint := "unix://" + sock
	skiff := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, skiffBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("skiff %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := skiff("images", "import", "--container-runtime-endpoint", endpoint, imgs[0].Path, imgs[1].Path)
	list := skiff("images", "list", "--container-runtime-endpoint", endpoint)
	for _, img := range imgs {
		mustContain(t, "skiff images import", out, "imported "+img.Ref)
		mustContain(t, "skiff images list", list, img.Ref)
	}

	// The webhook in a container (host network, certificates mounted as a
	// Secret would be), answering over TLS.
	ca := testpki.NewCA(t, "webhook-ca")
	certDir := t.TempDir()
	testpki.WritePair(t, certDir, ca.Issue(t, "crdconvert", x509.ExtKeyUsageServerAuth))
	port := freePort(t)
	// runc keeps container state machine-wide: a fixed ID collides with
	// what an interrupted earlier run left behind.
	id := fmt.Sprintf("crdconvert-e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		for _, args := range [][]string{{"tasks", "kill", "-s", "SIGKILL", id}, {"tasks", "rm", "-f", id}, {"containers", "rm", id}} {
			exec.Command("ctr", append([]string{"--address", sock, "--namespace", "skiff"}, args...)...).Run()
		}
	})
	run := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", "skiff", "run", "-d", "--net-host",
		"--mount", "type=bind,src="+certDir+",dst=/certs,options=rbind:ro",
		imgs[0].Ref, id, imgs[0].Entrypoint, "--port", fmt.Sprint(port))
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("ctr run: %v\n%s", err, out)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != "ok" {
				t.Fatalf("healthz: %d %q, want 200 ok", resp.StatusCode, b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crdconvert in a container does not answer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
