// Package loadbalancer is the agent's client-side load balancer to the API
// servers, as k3s's agent load balancer: a TCP proxy on loopback that every
// client of the agent dials. Each accepted connection is passed through,
// bytes untouched (TLS stays end to end between the client and a server), to
// the active server; when that server stops answering, the proxy moves to
// the next healthy one and cuts the connections still held to the dead one,
// so that long-lived requests (client-go watches) reconnect through the
// proxy to a live server instead of hanging on a dead TCP peer.
//
// The server list is the --server address (always kept, as a fallback) plus
// the servers learned from the default/kubernetes Endpoints (WatchEndpoints),
// persisted in <data-dir>/agent/etc/<Name>.json so that an agent restarted
// while its --server is down still knows the others.
//
// Choice of server: sticky. The active server keeps every new connection
// while it is healthy, whichever it is; the balancer does not move back to
// the --server address when that recovers, since moving would cut working
// watches for nothing. At start the --server address is the active one.
// Failover order is the list order, starting after the active server;
// servers known to be down are tried last (their state may be stale) rather
// than never.
package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"
)

// ErrNoServers is wrapped by Dial when no known server accepted a
// connection.
var ErrNoServers = errors.New("loadbalancer: no server reachable")

// DefaultName names the state file and the balancer in logs.
const DefaultName = "skiff-agent-load-balancer"

// CheckFunc reports whether the server at addr (host:port) is healthy; ctx
// carries the check's timeout.
type CheckFunc func(ctx context.Context, addr string) error

// Config says where the balancer listens and what it starts knowing.
type Config struct {
	// DataDir is the agent's data directory; the server list is kept in
	// <DataDir>/agent/etc/<Name>.json. Empty: nothing is persisted.
	DataDir string
	// Name names the state file and the balancer in logs (DefaultName).
	Name string
	// Initial is the --server address, host:port. It is always in the list
	// and is the active server at start.
	Initial string
	// ListenAddr is where the proxy listens (default 127.0.0.1:0: a free
	// port, see Addr; k3s uses 127.0.0.1:6444).
	ListenAddr string
	Logger     *slog.Logger
	// DialTimeout bounds each dial to a server (default 3 s): a server that
	// does not answer in it is marked down and the next one is tried.
	DialTimeout time.Duration
	// HealthInterval is how often every server is checked (default 5 s).
	HealthInterval time.Duration
	// CheckTimeout bounds one check (default 5 s).
	CheckTimeout time.Duration
	// Check is the health check (default TCPCheck).
	Check CheckFunc
}

func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = DefaultName
	}
	initial, ok := normalizeAddr(c.Initial)
	if !ok {
		return c, fmt.Errorf("loadbalancer: initial server %q: want host:port", c.Initial)
	}
	c.Initial = initial
	if c.ListenAddr == "" {
		c.ListenAddr = "127.0.0.1:0"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 3 * time.Second
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = 5 * time.Second
	}
	if c.CheckTimeout <= 0 {
		c.CheckTimeout = 5 * time.Second
	}
	if c.Check == nil {
		c.Check = TCPCheck
	}
	return c, nil
}

// StatePath is where the balancer called name keeps its server list.
func StatePath(dataDir, name string) string {
	return filepath.Join(dataDir, "agent", "etc", name+".json")
}

// LB is a running (or ready to run) balancer.
type LB struct {
	cfg       Config
	log       *slog.Logger
	ln        net.Listener
	statePath string
	dialer    net.Dialer

	// persistMu orders state file writes as the updates they record.
	persistMu sync.Mutex

	mu      sync.Mutex
	learned []string         // the last Update, as persisted
	list    []string         // learned, then Initial if not among them
	down    map[string]error // why a server is down; absent: healthy
	active  string
	conns   map[*proxied]struct{}
	closed  bool
	// lastNoServer rate-limits the "no server reachable" warning, which
	// every retrying client would otherwise repeat.
	lastNoServer time.Time
}

// New loads the state file, binds the listener and returns the balancer;
// Run serves it. The listener is bound here so Addr and URL are known
// before Run starts.
func New(cfg Config) (*LB, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &LB{cfg: cfg, log: cfg.Logger.With("lb", cfg.Name), down: map[string]error{}, conns: map[*proxied]struct{}{},
		active: cfg.Initial, dialer: net.Dialer{KeepAlive: 30 * time.Second}}
	if cfg.DataDir != "" {
		l.statePath = StatePath(cfg.DataDir, cfg.Name)
		l.learned = l.loadState()
	}
	l.list = withInitial(l.learned, cfg.Initial)
	l.ln, err = net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("loadbalancer: listen on %s: %w", cfg.ListenAddr, err)
	}
	l.log.Info("API load balancer listening", "addr", l.ln.Addr().String(), "servers", l.list, "state", l.statePath)
	return l, nil
}

// Addr is the proxy's host:port.
func (l *LB) Addr() string { return l.ln.Addr().String() }

// URL is https://<Addr>, the API URL for the agent's clients. Every skiff
// serving certificate names 127.0.0.1, so TLS verification of the server
// holds through the proxy.
func (l *LB) URL() string { return "https://" + l.Addr() }

// Servers is the known server list, in failover order.
func (l *LB) Servers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.list...)
}

// Active is the server new connections go to first.
func (l *LB) Active() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active
}

// Run accepts and proxies connections and checks the servers until ctx
// ends, then closes the listener and every proxied connection and returns
// once all its goroutines have. Run is called once; it fails only if the
// listener does.
func (l *LB) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { l.ln.Close() })
	defer stop()
	wg.Go(func() { l.healthLoop(ctx) })
	var err error
	for {
		c, aerr := l.ln.Accept()
		if aerr != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(aerr, net.ErrClosed) {
				err = fmt.Errorf("loadbalancer: accept: %w", aerr)
				break
			}
			// Out of file descriptors and the like: wait, as net/http does.
			l.log.Warn("accepting a connection", "err", aerr)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		wg.Go(func() { l.serve(ctx, c) })
	}
	cancel()
	l.ln.Close()
	l.closeAll()
	wg.Wait()
	return err
}

// Dial connects to a server: the active one, else the next healthy one,
// else those marked down; each attempt bounded by DialTimeout. A server
// that fails is marked down. The error wraps ErrNoServers and every
// attempt's error.
func (l *LB) Dial(ctx context.Context) (net.Conn, error) {
	c, _, err := l.dial(ctx)
	return c, err
}

func (l *LB) dial(ctx context.Context) (net.Conn, string, error) {
	candidates := l.candidates()
	var errs []error
	for _, addr := range candidates {
		dctx, cancel := context.WithTimeout(ctx, l.cfg.DialTimeout)
		c, err := l.dialer.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			l.connected(addr)
			return c, addr, nil
		}
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("loadbalancer: dial: %w", ctx.Err())
		}
		errs = append(errs, err)
		l.markDown(addr, err, "dial")
	}
	return nil, "", fmt.Errorf("%w (tried %d): %w", ErrNoServers, len(candidates), errors.Join(errs...))
}

// proxied is one client connection and the server connection it is piped
// to.
type proxied struct {
	client, backend net.Conn
	server          string
}

func (p *proxied) close() {
	p.client.Close()
	p.backend.Close()
}

// serve pipes one accepted connection to a server.
func (l *LB) serve(ctx context.Context, client net.Conn) {
	backend, addr, err := l.dial(ctx)
	if err != nil {
		client.Close()
		if ctx.Err() == nil {
			l.warnNoServer(err)
		}
		return
	}
	p := &proxied{client: client, backend: backend, server: addr}
	if !l.track(p) {
		p.close()
		return
	}
	defer l.untrack(p)
	pipe(client, backend)
	p.close()
}

func (l *LB) warnNoServer(err error) {
	l.mu.Lock()
	quiet := time.Since(l.lastNoServer) < 10*time.Second
	if !quiet {
		l.lastNoServer = time.Now()
	}
	l.mu.Unlock()
	if !quiet {
		l.log.Warn("no API server reachable: closing the client's connection", "err", err)
	}
}

// pipe copies both ways until both directions ended, passing a half-close
// on (a TLS peer closing its write side still reads the answer).
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Go(func() { half(a, b) })
	half(b, a)
	wg.Wait()
}

// track registers p so that a server going down can cut it; false once the
// balancer has stopped.
func (l *LB) track(p *proxied) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[p] = struct{}{}
	return true
}

func (l *LB) untrack(p *proxied) {
	l.mu.Lock()
	delete(l.conns, p)
	l.mu.Unlock()
}

// closeAll stops tracking and closes every proxied connection.
func (l *LB) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[*proxied]struct{}{}
	l.mu.Unlock()
	for p := range conns {
		p.close()
	}
}

// connsTo lists the proxied connections to server; mu held.
func (l *LB) connsTo(server string) []*proxied {
	var out []*proxied
	for p := range l.conns {
		if p.server == server {
			out = append(out, p)
		}
	}
	return out
}
