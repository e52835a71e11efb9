package stream

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakePodList []corev1.Pod

func (f fakePodList) NodePods() []corev1.Pod { return f }

func TestNodeEndpoints_ServeTheAPIServerOnly(t *testing.T) {
	pki := newTestPKI(t)
	certPEM, keyPEM := pki.issue(t, "node-a", true)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pods := fakePodList{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1"}}}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "# metrics\n") })
	s, err := New(Config{Certificate: &pair, ClientCA: pki.pool(), Pods: &fakePods{}, Runtime: &fakeRuntime{}, PodList: pods, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.TLS = s.TLSConfig()
	srv.StartTLS()
	defer srv.Close()
	ts := &testServer{pki: pki}
	tests := []struct {
		name, path, cn string
		wantCode       int
		wantBody       string
	}{
		{"pods for the API server", "/pods", DefaultClientCN, 200, ""},
		{"metrics for the API server", "/metrics", DefaultClientCN, 200, "# metrics\n"},
		{"healthz needs no certificate", "/healthz", "", 200, "ok"},
		{"pods need a certificate", "/pods", "", 401, ""},
		{"metrics refuse other identities", "/metrics", "system:node:node-b", 403, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: ts.tlsConfig(t, tt.cn)}}
			resp, err := c.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tt.wantCode)
			}
			if tt.wantBody != "" && string(b) != tt.wantBody {
				t.Fatalf("body %q, want %q", b, tt.wantBody)
			}
			if tt.path == "/pods" && tt.wantCode == 200 {
				var list corev1.PodList
				if err := json.Unmarshal(b, &list); err != nil || list.Kind != "PodList" || len(list.Items) != 1 || list.Items[0].Name != "web" {
					t.Fatalf("pod list %s (%v)", b, err)
				}
			}
		})
	}
}
