package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"k8s.io/client-go/tools/cache"
)

const (
	defaultCacheSize       = 10000
	defaultCacheMaxTTL     = 30 * time.Second
	defaultForwardTimeout  = 2 * time.Second
	defaultResolvConfCheck = 5 * time.Second
	// serverUDPSize is the EDNS0 buffer this server advertises and reads
	// requests into.
	serverUDPSize = 1232
	shutdownGrace = 5 * time.Second
)

// Server is the node's cluster DNS server.
type Server struct {
	log     *slog.Logger
	idx     *index
	zone    *zone
	fwd     *forwarder
	metrics *metrics
	synced  []cache.InformerSynced
	udpConn net.PacketConn
	tcpLn   net.Listener
	// baseCtx bounds forwarded queries; set by Run before serving.
	baseCtx context.Context
	// cfg and self are kept to re-read the node's resolvers.
	cfg         Config
	self        netip.Addr
	resolvStamp [2]int64 // the version of ResolvConf last read
}

// New registers the informers the server answers from and binds its UDP
// and TCP sockets, so a busy or missing address fails here. The caller
// starts cfg.Informers afterwards, then calls Run, which owns the sockets.
func New(cfg Config) (*Server, error) {
	if cfg.Informers == nil {
		return nil, errors.New("cluster dns: no informer factory")
	}
	self, ok := netip.AddrFromSlice(cfg.Addr)
	if !ok {
		return nil, fmt.Errorf("cluster dns: invalid address %q", cfg.Addr)
	}
	self = self.Unmap()
	applyDefaults(&cfg)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	domain := dns.Fqdn(strings.ToLower(strings.Trim(cfg.Domain, ".")))
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{log: log, metrics: m, idx: newIndex(domain), baseCtx: context.Background()}
	s.zone = newZone(domain, s.idx, self)
	// Stamped before the read: a rewrite racing it is seen as a change.
	s.resolvStamp = fileStamp(cfg.ResolvConf)
	upstreams, err := pickUpstreams(cfg, self)
	if err != nil {
		return nil, err
	}
	if len(upstreams) == 0 {
		log.Warn("cluster dns: no upstream resolver, names outside the cluster will fail")
	}
	s.fwd = &forwarder{
		udp:     &dns.Client{Net: "udp", UDPSize: upstreamUDPSize, Timeout: cfg.ForwardTimeout},
		tcp:     &dns.Client{Net: "tcp", Timeout: cfg.ForwardTimeout},
		timeout: cfg.ForwardTimeout,
		cache:   newAnswerCache(cfg.CacheSize),
		maxTTL:  cfg.CacheMaxTTL,
		metrics: m,
		log:     log,
		now:     time.Now,
	}
	s.fwd.upstreams.Store(&upstreams)
	s.cfg, s.self = cfg, self
	if s.synced, err = s.idx.watch(cfg.Informers); err != nil {
		return nil, fmt.Errorf("cluster dns: %w", err)
	}
	if s.udpConn, s.tcpLn, err = listen(cfg.Addr, cfg.Port); err != nil {
		return nil, fmt.Errorf("cluster dns: %w", err)
	}
	return s, nil
}

func applyDefaults(cfg *Config) {
	if cfg.Domain == "" {
		cfg.Domain = "cluster.local"
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = defaultCacheSize
	}
	if cfg.CacheMaxTTL <= 0 {
		cfg.CacheMaxTTL = defaultCacheMaxTTL
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = defaultForwardTimeout
	}
	if cfg.ResolvConfCheck <= 0 {
		cfg.ResolvConfCheck = defaultResolvConfCheck
	}
}

func pickUpstreams(cfg Config, self netip.Addr) ([]string, error) {
	if len(cfg.Upstreams) > 0 {
		out := make([]string, 0, len(cfg.Upstreams))
		for _, u := range cfg.Upstreams {
			if _, _, err := net.SplitHostPort(u); err != nil {
				u = net.JoinHostPort(u, "53") // a bare address means the DNS port
			}
			out = append(out, u)
		}
		return out, nil
	}
	if cfg.ResolvConf == "" {
		return nil, nil
	}
	servers, err := readResolvConf(cfg.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("cluster dns: %w", err)
	}
	return upstreamsFrom(servers, self, cfg.Port), nil
}

// listen binds UDP and TCP on the same port; with port 0 the kernel picks
// the UDP port, and the rare case of that port being taken over TCP is
// retried with another.
func listen(ip net.IP, port int) (net.PacketConn, net.Listener, error) {
	for attempt := 0; ; attempt++ {
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
		if err != nil {
			return nil, nil, fmt.Errorf("listen udp %s: %w", net.JoinHostPort(ip.String(), fmt.Sprint(port)), err)
		}
		p := u.LocalAddr().(*net.UDPAddr).Port
		t, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip, Port: p})
		if err == nil {
			return u, t, nil
		}
		u.Close()
		if port != 0 || attempt == 10 || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("listen tcp %s: %w", net.JoinHostPort(ip.String(), fmt.Sprint(p)), err)
		}
	}
}

// UDPAddr is the address the server answers on over UDP.
func (s *Server) UDPAddr() net.Addr { return s.udpConn.LocalAddr() }

// TCPAddr is the address the server answers on over TCP.
func (s *Server) TCPAddr() net.Addr { return s.tcpLn.Addr() }

// Run waits for the informer caches (answering before would give clients
// NXDOMAINs for Services that exist), serves until ctx ends, then shuts
// both servers down and closes the sockets.
func (s *Server) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		s.udpConn.Close()
		s.tcpLn.Close()
		return fmt.Errorf("cluster dns: informer caches not synced: %w", ctx.Err())
	}
	s.baseCtx = ctx
	if len(s.cfg.Upstreams) == 0 && s.cfg.ResolvConf != "" {
		go s.followResolvConf(ctx)
	}
	handler := dns.HandlerFunc(s.serveDNS)
	servers := []*serving{
		serve(&dns.Server{PacketConn: s.udpConn, Handler: handler, UDPSize: serverUDPSize}),
		serve(&dns.Server{Listener: s.tcpLn, Handler: handler}),
	}
	var errs []error
	for _, sv := range servers {
		if err := sv.waitStarted(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		s.log.Info("cluster dns serving", "udp", s.UDPAddr(), "tcp", s.TCPAddr())
		select {
		case <-ctx.Done():
		case err := <-servers[0].done:
			errs = append(errs, fmt.Errorf("udp: %w", err))
		case err := <-servers[1].done:
			errs = append(errs, fmt.Errorf("tcp: %w", err))
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, sv := range servers {
		sv.stop(sctx)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster dns: %w", err)
	}
	return nil
}

// followResolvConf picks up changes to the node's resolvers until ctx ends.
func (s *Server) followResolvConf(ctx context.Context) {
	t := time.NewTicker(s.cfg.ResolvConfCheck)
	defer t.Stop()
	last := s.resolvStamp
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if st := fileStamp(s.cfg.ResolvConf); st != last {
			last = st
			s.reloadUpstreams()
		}
	}
}

// reloadUpstreams re-reads resolv.conf; a file that is gone or unreadable
// keeps the resolvers there were.
func (s *Server) reloadUpstreams() {
	up, err := pickUpstreams(s.cfg, s.self)
	if err != nil {
		s.log.Warn("cluster dns: re-reading the node's resolvers", "file", s.cfg.ResolvConf, "err", err)
		return
	}
	s.fwd.upstreams.Store(&up)
	s.log.Info("cluster dns: the node's resolvers changed", "upstreams", up)
}

// fileStamp identifies a version of a file (zero when it cannot be read).
func fileStamp(path string) [2]int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return [2]int64{}
	}
	return [2]int64{fi.ModTime().UnixNano(), fi.Size()}
}

// serving is one dns.Server running in its own goroutine.
type serving struct {
	srv     *dns.Server
	started chan struct{}
	done    chan error // receives ActivateAndServe's result, once
	exited  bool
}

func serve(srv *dns.Server) *serving {
	sv := &serving{srv: srv, started: make(chan struct{}), done: make(chan error, 1)}
	srv.NotifyStartedFunc = func() { close(sv.started) }
	go func() { sv.done <- srv.ActivateAndServe() }()
	return sv
}

// waitStarted returns once the server serves, or with why it could not;
// Shutdown only works on a started server.
func (sv *serving) waitStarted() error {
	select {
	case <-sv.started:
		return nil
	case err := <-sv.done:
		sv.exited = true
		return err
	}
}

func (sv *serving) stop(ctx context.Context) {
	if sv.exited {
		return
	}
	select {
	case <-sv.started:
		_ = sv.srv.ShutdownContext(ctx) // its error is only "not started"
	default:
	}
	if sv.srv.PacketConn != nil {
		sv.srv.PacketConn.Close()
	}
	if sv.srv.Listener != nil {
		sv.srv.Listener.Close()
	}
}
