package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"skiff/e2e/testimages/testpki"
	"skiff/e2e/testimages/tlsserve/tlsservetest"
)

// TestRun_ProxyIdentity_EchoedAndCARotationFollowed runs the server over
// real TLS as a pod would: certificate files, the ConfigMap read through
// the client, the aggregator's client certificate on the wire.
func TestRun_ProxyIdentity_EchoedAndCARotationFollowed(t *testing.T) {
	srv := tlsservetest.New(t, "extapi")
	fp := testpki.NewCA(t, "front-proxy-ca")
	proxy := fp.Issue(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	cms := newFakeConfigMaps(authConfigMap(fp, `["front-proxy-client"]`))
	srv.Start(t, func(ctx context.Context) error {
		return Run(ctx, Config{Config: srv.Config, ConfigMaps: cms,
			Resync: 20 * time.Millisecond, Flunders: []types.NamespacedName{{Namespace: "default", Name: "echo"}}})
	})
	client, url := srv.CA.Client(proxy), srv.URL
	get := func(path string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Remote-User", "alice")
		req.Header.Add("X-Remote-Group", "devs")
		req.Header.Set("X-Remote-Extra-Reason", "e2e")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	waitCode := func(path string, code int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp := get(path)
			resp.Body.Close()
			if resp.StatusCode == code {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %d, want %d", path, resp.StatusCode, code)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCode("/readyz", http.StatusOK)

	resp := get("/apis/wardle.skiff.test/v1alpha1/namespaces/default/flunders/echo")
	defer resp.Body.Close()
	var f Flunder
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil {
		t.Fatal(err)
	}
	c := f.Status.Caller
	if resp.StatusCode != http.StatusOK || f.Name != "echo" || c.Username != "alice" || len(c.Groups) != 1 || c.Groups[0] != "devs" || c.Extra["reason"][0] != "e2e" {
		t.Fatalf("%d %+v, want echo read by alice (devs, reason=e2e)", resp.StatusCode, f)
	}

	// A new front-proxy CA: the old proxy certificate is no longer
	// believed once the ConfigMap is read again.
	cms.set(authConfigMap(testpki.NewCA(t, "front-proxy-ca-2"), `["front-proxy-client"]`))
	waitCode("/apis", http.StatusUnauthorized)
}
