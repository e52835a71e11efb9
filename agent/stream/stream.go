// Package stream is the agent's streaming server: the kubelet's HTTPS API on
// port 10250 that the API server proxies `kubectl logs`, `exec`, `attach`
// and `port-forward` to. Only the API server's client certificate is
// accepted.
//
// Paths and query parameters are the kubelet's:
//
//	GET /containerLogs/{ns}/{pod}/{container}?follow&previous&timestamps&sinceSeconds&sinceTime&tailLines&limitBytes
//	    /exec/{ns}/{pod}/{container}?command=..&stdin=1&stdout=1&stderr=1&tty=1
//	    /attach/{ns}/{pod}/{container}?stdin=1&stdout=1&stderr=1&tty=1
//	    /portForward/{ns}/{pod}[?port=..]
//	GET /healthz
//	GET /pods, /metrics (when configured)
//
// exec and attach speak the remotecommand protocols over SPDY (v1–v4) and
// WebSocket (v4, v5 and the base64 variants); portForward speaks SPDY,
// SPDY tunnelled through a WebSocket (what kubectl ≥ 1.31 uses) and the
// channel WebSocket protocol.
package stream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"skiff/runtime/containers"
)

// DefaultClientCN is the common name of the API server's client
// certificate for the agents.
const DefaultClientCN = "system:kube-apiserver-kubelet-client"

// ContainerRef is what the streaming server needs to know about a container.
type ContainerRef struct {
	// ID is the runtime's container ID.
	ID string
	// LogPath is the container's CRI-format log file.
	LogPath string
	// Running reports whether the container's process is running.
	Running bool
}

// Pods resolves the pods and containers this node runs.
type Pods interface {
	// Container finds a container of a pod on this node: the current
	// instance, or with previous the last terminated one. An error means the
	// pod or container is unknown (the client sees 404 with its text).
	Container(namespace, pod, container string, previous bool) (ContainerRef, error)
	// PodNetNS is the path of the pod's network namespace ("" for a pod on
	// the host network). An error means the pod is unknown.
	PodNetNS(namespace, pod string) (string, error)
}

// Runtime runs processes in containers.
type Runtime interface {
	// Exec runs req.Cmd in the running container id until it exits or ctx
	// ends, and returns its exit code.
	Exec(ctx context.Context, id string, req containers.ExecRequest) (int, error)
	// Attach connects the streams to the container's main process until it
	// exits, the client's stdin ends (where that detaches) or ctx ends.
	Attach(ctx context.Context, id string, req containers.AttachRequest) error
}

// Config configures the streaming server.
type Config struct {
	// Addr is where to listen (default ":10250").
	Addr string
	// CertFile and KeyFile are the node's serving certificate; they are
	// re-read when they change on disk, so renewals need no restart.
	CertFile, KeyFile string
	// Certificate is used instead of CertFile/KeyFile when set.
	Certificate *tls.Certificate
	// ClientCA verifies client certificates (the cluster CA). Required.
	ClientCA *x509.CertPool
	// AllowedClientCN is the only client accepted (default DefaultClientCN).
	AllowedClientCN string
	// Pods and Runtime are required.
	Pods    Pods
	Runtime Runtime
	// StreamIdleTimeout closes exec, attach and port-forward sessions idle
	// this long (default 4 h, as the kubelet).
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds how long a client may take to open the
	// streams of a session (default 30 s).
	StreamCreationTimeout time.Duration
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
	// PodList, if set, serves GET /pods (the kubelet's pod list).
	PodList PodLister
	// Metrics, if set, serves GET /metrics.
	Metrics http.Handler
}

// Server is the streaming server.
type Server struct {
	cfg   Config
	log   *slog.Logger
	certs *certLoader
}

// New checks the configuration and builds the server.
func New(cfg Config) (*Server, error) {
	if cfg.Pods == nil || cfg.Runtime == nil || cfg.ClientCA == nil {
		return nil, errors.New("stream: Pods, Runtime and ClientCA are required")
	}
	if cfg.Certificate == nil && (cfg.CertFile == "" || cfg.KeyFile == "") {
		return nil, errors.New("stream: a serving certificate (Certificate or CertFile and KeyFile) is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = ":10250"
	}
	if cfg.AllowedClientCN == "" {
		cfg.AllowedClientCN = DefaultClientCN
	}
	if cfg.StreamIdleTimeout == 0 {
		cfg.StreamIdleTimeout = 4 * time.Hour
	}
	if cfg.StreamCreationTimeout == 0 {
		cfg.StreamCreationTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	if cfg.Certificate == nil {
		s.certs = &certLoader{certFile: cfg.CertFile, keyFile: cfg.KeyFile}
		if _, err := s.certs.get(); err != nil {
			return nil, fmt.Errorf("stream: serving certificate: %w", err)
		}
	}
	return s, nil
}

// TLSConfig is the server's TLS configuration: its serving certificate, and
// client certificates verified against ClientCA when presented (the
// handler then insists on the allowed one).
func (s *Server) TLSConfig() *tls.Config {
	c := &tls.Config{
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  s.cfg.ClientCA,
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only: exec, attach and port-forward upgrade the connection.
		NextProtos: []string{"http/1.1"},
	}
	if s.cfg.Certificate != nil {
		c.Certificates = []tls.Certificate{*s.cfg.Certificate}
	} else {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.certs.get() }
	}
	return c
}

// Handler serves the kubelet's streaming API behind the client check.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "ok")
	})
	mux.Handle("GET /containerLogs/{ns}/{pod}/{container}", s.authorized(http.HandlerFunc(s.serveLogs)))
	if s.cfg.PodList != nil {
		mux.Handle("GET /pods", s.authorized(http.HandlerFunc(s.servePods))) // pods.go
	}
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.authorized(s.cfg.Metrics))
	}
	for _, p := range []string{"/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"} {
		mux.Handle("GET "+p, s.authorized(lingerUpgrades(s.remoteCommand(false))))
		mux.Handle("POST "+p, s.authorized(lingerUpgrades(s.remoteCommand(false))))
	}
	for _, p := range []string{"/attach/{ns}/{pod}/{container}", "/attach/{ns}/{pod}/{uid}/{container}"} {
		mux.Handle("GET "+p, s.authorized(lingerUpgrades(s.remoteCommand(true))))
		mux.Handle("POST "+p, s.authorized(lingerUpgrades(s.remoteCommand(true))))
	}
	for _, p := range []string{"/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"} {
		mux.Handle("GET "+p, s.authorized(lingerUpgrades(http.HandlerFunc(s.servePortForward))))
		mux.Handle("POST "+p, s.authorized(lingerUpgrades(http.HandlerFunc(s.servePortForward))))
	}
	return mux
}

// authorized lets through only the allowed client certificate: 401 without
// a verified one, 403 for any other identity.
func (s *Server) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if cn := r.TLS.VerifiedChains[0][0].Subject.CommonName; cn != s.cfg.AllowedClientCN {
			s.log.Warn("rejected streaming client", "cn", cn, "path", r.URL.Path)
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, path=%s)", cn, r.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Run serves HTTPS on Addr until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("stream: listen %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves HTTPS on ln until ctx ends; ln is closed on return.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	s.log.Info("serving the streaming API", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(tls.NewListener(ln, s.TLSConfig())) }()
	select {
	case err := <-errc:
		return fmt.Errorf("stream: serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close() // hijacked sessions and followed logs do not end by themselves
	}
	return nil
}

// certLoader re-reads the serving certificate when its files change.
type certLoader struct {
	certFile, keyFile string

	mu      sync.Mutex
	modTime time.Time
	cert    *tls.Certificate
}

func (l *certLoader) get() (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ci, err := os.Stat(l.certFile)
	if err != nil {
		if l.cert != nil {
			return l.cert, nil
		}
		return nil, err
	}
	ki, err := os.Stat(l.keyFile)
	if err != nil {
		if l.cert != nil {
			return l.cert, nil
		}
		return nil, err
	}
	mod := ci.ModTime()
	if ki.ModTime().After(mod) {
		mod = ki.ModTime()
	}
	if l.cert != nil && mod.Equal(l.modTime) {
		return l.cert, nil
	}
	c, err := tls.LoadX509KeyPair(l.certFile, l.keyFile)
	if err != nil {
		if l.cert != nil {
			return l.cert, nil // mid-rotation: keep the last good pair
		}
		return nil, err
	}
	l.cert, l.modTime = &c, mod
	return l.cert, nil
}
