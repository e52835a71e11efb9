package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"skiff/agent/loadbalancer"
)

// The agent talks to the API servers only through its own client-side load
// balancer (loadbalancer.LB, as k3s's agent proxy on 127.0.0.1:6444): the
// join, the certificate renewals and every API client dial lb.URL(), a
// loopback port, and the balancer passes the bytes on to the active server,
// failing over to the next one when it dies. TLS stays end to end: every
// skiff serving certificate names 127.0.0.1 and ::1 (server/certs
// servingSANs), whatever server is behind the proxy, so clients verify the
// server against the cluster CA for the proxy's own address with no
// ServerName override. Overriding ServerName with the --server host would
// be wrong here: after a failover the server answering is another one,
// whose certificate need not name the --server host.

// readyzServerName is the name the health checks verify the servers'
// certificates for: every skiff serving certificate carries it, whatever
// address the Endpoints list.
const readyzServerName = "kubernetes"

// balancerAddr is the host:port of --server, the balancer's first server
// (port 443 when the URL has none).
func balancerAddr(serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return "", fmt.Errorf("--server %q: want https://host:port", serverURL)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// balancerConfig is the balancer the agent puts in front of its servers:
// --server first, the learned list kept in the agent's data dir (at
// loadbalancer.StatePath(DataDir, DefaultName)) across restarts.
func balancerConfig(cfg Config, check loadbalancer.CheckFunc) (loadbalancer.Config, error) {
	initial, err := balancerAddr(cfg.ServerURL)
	if err != nil {
		return loadbalancer.Config{}, err
	}
	return loadbalancer.Config{
		DataDir: cfg.DataDir, Name: loadbalancer.DefaultName, Initial: initial,
		Logger: cfg.Logger.With("component", "loadbalancer"), Check: check,
	}, nil
}

// balancer is the agent's load balancer and its health check.
type balancer struct {
	lb     *loadbalancer.LB
	health *serverCheck
	log    *slog.Logger
}

// newBalancer binds the balancer's listener (so its URL is known before it
// runs) and loads its stored server list.
func newBalancer(cfg Config) (*balancer, error) {
	health := &serverCheck{}
	lcfg, err := balancerConfig(cfg, health.Check)
	if err != nil {
		return nil, err
	}
	lb, err := loadbalancer.New(lcfg)
	if err != nil {
		return nil, err
	}
	return &balancer{lb: lb, health: health, log: lcfg.Logger}, nil
}

// watchServers runs, in g, the watch that feeds the balancer the servers
// listed in the default/kubernetes Endpoints; client goes through the
// balancer, so the watch follows the failover it drives.
func (b *balancer) watchServers(g *loops, client kubernetes.Interface) {
	g.Go("endpoints", func(ctx context.Context) error {
		return loadbalancer.WatchEndpoints(ctx, client, b.lb, b.log)
	})
}

// serverCheck is the balancer's health check: a TCP connect until the
// cluster CA is known (the join happens through the balancer), then GET
// /readyz verified with that CA, so that a server that accepts connections
// but cannot serve (no datastore quorum) is down for the balancer too.
type serverCheck struct {
	readyz atomic.Pointer[loadbalancer.CheckFunc]
}

// Check is a loadbalancer.CheckFunc.
func (s *serverCheck) Check(ctx context.Context, addr string) error {
	if f := s.readyz.Load(); f != nil {
		return (*f)(ctx, addr)
	}
	return loadbalancer.TCPCheck(ctx, addr)
}

// trust switches the check to /readyz verified with caPEM.
func (s *serverCheck) trust(caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("the cluster CA from the join is not PEM")
	}
	f := loadbalancer.ReadyzCheck(pool, readyzServerName)
	s.readyz.Store(&f)
	return nil
}

// apiRestConfig is the rest config of every API client of the agent: the
// node's kubeconfig (CA and client certificate files, so renewals are
// seen) pointed at apiURL, the balancer's URL, whatever server the
// kubeconfig names.
func apiRestConfig(kubeconfig, apiURL, nodeName string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("node kubeconfig: %w", err)
	}
	cfg.Host = apiURL
	// The balancer's address is one every serving certificate names (see
	// above): no ServerName override.
	cfg.TLSClientConfig.ServerName = ""
	cfg.UserAgent = "skiff-agent/" + nodeName
	// The kubelet's defaults (kubeAPIQPS 50, kubeAPIBurst 100): client-go's
	// own 5/10 held pod startup to about one pod a second (each pod takes
	// ~10 requests: token, configmap, status reads and writes, events).
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// loops runs the agent's named long-running loops, each in a goroutine it
// owns: the first loop to fail (an error while the context is alive) ends
// them all, and Stop waits for every one. A loop returning nil just ends.
type loops struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func newLoops(parent context.Context) *loops {
	ctx, cancel := context.WithCancel(parent)
	return &loops{ctx: ctx, cancel: cancel}
}

// Go runs loop under the group's context.
func (g *loops) Go(name string, loop func(context.Context) error) {
	g.wg.Go(func() {
		if err := loop(g.ctx); err != nil && g.ctx.Err() == nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = fmt.Errorf("%s: %w", name, err)
			}
			g.mu.Unlock()
			g.cancel()
		}
	})
}

// Done is closed when the parent context ends or a loop failed.
func (g *loops) Done() <-chan struct{} { return g.ctx.Done() }

// Err is the first loop's failure, if any.
func (g *loops) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Stop ends every loop and waits for them; it returns the first failure.
func (g *loops) Stop() error {
	g.cancel()
	g.wg.Wait()
	return g.Err()
}
