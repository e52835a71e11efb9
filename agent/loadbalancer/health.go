package loadbalancer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// healthLoop checks every server now and each HealthInterval until ctx
// ends.
func (l *LB) healthLoop(ctx context.Context) {
	t := time.NewTicker(l.cfg.HealthInterval)
	defer t.Stop()
	for {
		l.checkAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkAll checks the servers in parallel (a dead one must not delay the
// verdict on the others) and records the results.
func (l *LB) checkAll(ctx context.Context) {
	servers := l.Servers()
	results := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, addr := range servers {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, l.cfg.CheckTimeout)
			defer cancel()
			results[i] = l.cfg.Check(cctx, addr)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	for i, addr := range servers {
		if results[i] != nil {
			l.markDown(addr, results[i], "health check")
		} else {
			l.markUp(addr, "health check")
		}
	}
}

// TCPCheck is healthy when addr accepts a TCP connection.
func TCPCheck(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// ReadyzCheck is healthy when GET https://addr/readyz answers 200. The
// request is anonymous (skiff, as upstream, lets anyone read /readyz) and
// the server's certificate is verified with roots for serverName: skiff's
// serving certificates always name "kubernetes", whatever address the
// Endpoints list. A server that is up but not ready (no datastore quorum)
// is then down for the balancer too. Each check dials afresh (keep-alives
// off), so it tests reachability and owns no connection between checks.
func ReadyzCheck(roots *x509.CertPool, serverName string) CheckFunc {
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
		Proxy:             nil, // the servers are dialled directly, as the proxy does
	}}
	return func(ctx context.Context, addr string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /readyz: %s: %.200s", resp.Status, body)
		}
		return nil
	}
}
