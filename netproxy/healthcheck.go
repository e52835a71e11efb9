package netproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"skiff/runtime/nsthread"
)

// healthChecks serves kube-proxy's per-Service health checks: every
// LoadBalancer Service with externalTrafficPolicy Local has a
// healthCheckNodePort, and on it each node answers 200 while it has a
// ready local endpoint and 503 otherwise, so that a load balancer outside
// the cluster sends the Service's traffic only to nodes that can serve it
// without a hop (and without losing the client's address).
type healthChecks struct {
	nodeName string
	// listen opens the port on every node address, in the proxy's
	// network namespace.
	listen func(port int32) (net.Listener, error)
	log    *slog.Logger

	mu      sync.Mutex
	servers map[string]*healthServer // by Service key
}

// healthServer is one Service's health check port.
type healthServer struct {
	port      int32
	namespace string
	name      string
	local     atomic.Int64
	srv       *http.Server
	addr      net.Addr
}

func newHealthChecks(nodeName, netnsPath string, log *slog.Logger) *healthChecks {
	h := &healthChecks{nodeName: nodeName, log: log, servers: map[string]*healthServer{}}
	h.listen = func(port int32) (net.Listener, error) { return listenIn(netnsPath, port) }
	return h
}

// update brings key's health check in line with the Service (nil: gone)
// and its slices.
func (h *healthChecks) update(key string, svc *corev1.Service, slices []*discoveryv1.EndpointSlice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := h.servers[key]
	port := healthCheckPort(svc)
	if cur != nil && cur.port != port {
		cur.close()
		delete(h.servers, key)
		cur = nil
	}
	if port == 0 {
		return
	}
	if cur == nil {
		ln, err := h.listen(port)
		if err != nil {
			// Retried at the next sync of the Service or the next resync.
			h.log.Warn("health check port", "service", key, "port", port, "err", err)
			return
		}
		cur = &healthServer{port: port, namespace: svc.Namespace, name: svc.Name, addr: ln.Addr()}
		cur.srv = &http.Server{Handler: cur, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := cur.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				h.log.Warn("health check server", "service", key, "port", port, "err", err)
			}
		}()
		h.servers[key] = cur
	}
	cur.local.Store(int64(localReadyEndpoints(slices, h.nodeName)))
}

// retain closes the health checks of Services not in keys (a full resync
// saw every Service there is).
func (h *healthChecks) retain(keys []string) {
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, s := range h.servers {
		if !want[k] {
			s.close()
			delete(h.servers, k)
		}
	}
}

func (h *healthChecks) closeAll() { h.retain(nil) }

func healthCheckPort(svc *corev1.Service) int32 {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer ||
		svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		return 0
	}
	return svc.Spec.HealthCheckNodePort
}

// localReadyEndpoints counts the node's ready endpoint addresses, each
// once across slices.
func localReadyEndpoints(slices []*discoveryv1.EndpointSlice, node string) int {
	seen := map[string]bool{}
	for _, sl := range slices {
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil || *ep.NodeName != node || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			for _, a := range ep.Addresses {
				seen[a] = true
			}
		}
	}
	return len(seen)
}

func (s *healthServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// ServeHTTP answers as kube-proxy does: the Service, the local endpoint
// count, and 200 or 503.
func (s *healthServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n := s.local.Load()
	body, _ := json.Marshal(map[string]any{
		"service":             map[string]string{"namespace": s.namespace, "name": s.name},
		"localEndpoints":      n,
		"serviceProxyHealthy": true,
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if n == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(body)
}

// listenIn opens TCP port on every address of the network namespace at
// nsPath ("" is the process's own).
func listenIn(nsPath string, port int32) (net.Listener, error) {
	var ln net.Listener
	err := nsthread.DoPath(nsPath, func() error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	})
	return ln, err
}
