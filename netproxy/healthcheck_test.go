package netproxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// testHealthChecks listens on loopback ports the kernel picks, whatever
// healthCheckNodePort says.
func testHealthChecks(t *testing.T) *healthChecks {
	h := &healthChecks{nodeName: testNode, log: quietLog(), servers: map[string]*healthServer{}}
	h.listen = func(int32) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	t.Cleanup(h.closeAll)
	return h
}

func healthGet(t *testing.T, h *healthChecks, key string) (int, map[string]any) {
	t.Helper()
	h.mu.Lock()
	s := h.servers[key]
	h.mu.Unlock()
	if s == nil {
		t.Fatalf("no health check server for %s", key)
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s/healthz", s.addr))
	if err != nil {
		t.Fatalf("GET health check of %s: %v", key, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("health check body %q: %v", b, err)
	}
	return resp.StatusCode, body
}

func TestHealthCheck_LocalPolicyLB_200WithLocalEndpoint_503Without_ClosedWhenNotNeeded(t *testing.T) {
	h := testHealthChecks(t)
	p := svcPort("http", "", 80, 8080)
	svc := service("shop", "front", "10.43.0.20", p)
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 32100
	here := endpointSlice("shop", "front", "front-1", slicePorts(p), ep("10.42.1.8", testNode, ready), ep("10.42.2.9", "other-node", ready))
	const key = "shop/front"

	h.update(key, svc, []*discoveryv1.EndpointSlice{here})
	code, body := healthGet(t, h, key)
	if code != http.StatusOK || body["localEndpoints"] != float64(1) {
		t.Errorf("with one local endpoint: %d %v, want 200 and localEndpoints 1", code, body)
	}
	if svcBody, _ := body["service"].(map[string]any); svcBody["namespace"] != "shop" || svcBody["name"] != "front" {
		t.Errorf("body names %v, want shop/front", body["service"])
	}

	gone := endpointSlice("shop", "front", "front-1", slicePorts(p), ep("10.42.1.8", testNode, notReady), ep("10.42.2.9", "other-node", ready))
	h.update(key, svc, []*discoveryv1.EndpointSlice{gone})
	if code, body := healthGet(t, h, key); code != http.StatusServiceUnavailable || body["localEndpoints"] != float64(0) {
		t.Errorf("with the local endpoint not ready: %d %v, want 503 and localEndpoints 0", code, body)
	}

	h.mu.Lock()
	addr := h.servers[key].addr.String()
	h.mu.Unlock()
	cluster := svc.DeepCopy()
	cluster.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	cluster.Spec.HealthCheckNodePort = 0
	h.update(key, cluster, []*discoveryv1.EndpointSlice{here})
	if _, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		t.Errorf("health check port %s still open after the policy became Cluster", addr)
	}

	h.update(key, svc, []*discoveryv1.EndpointSlice{here})
	h.retain([]string{"other/svc"})
	h.mu.Lock()
	left := len(h.servers)
	h.mu.Unlock()
	if left != 0 {
		t.Errorf("a full sync without %s left %d health check servers", key, left)
	}
}
