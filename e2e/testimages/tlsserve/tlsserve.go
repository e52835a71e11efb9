// Package tlsserve is the HTTPS serving that skiff's e2e test programs
// (admwebhook, crdconvert, extapi) share: the serving certificate read from
// files, as a pod mounts a kubernetes.io/tls Secret, a port or a given
// listener, and a graceful shutdown when the program is told to stop.
package tlsserve

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"
)

// shutdownGrace bounds how long a stopping server waits for requests in
// flight: a pod's termination grace period is short in the e2e tests.
const shutdownGrace = 5 * time.Second

// Config is what a program serves with.
type Config struct {
	CertFile, KeyFile string
	// Listener, when set, is used instead of listening on Port (tests).
	Listener net.Listener
	Port     int
	// ClientAuth is the TLS client-certificate policy (default: none
	// asked for).
	ClientAuth tls.ClientAuthType
	// Log, when set, gets the serving line and the HTTP server's errors.
	Log *log.Logger
}

// AddFlags binds --tls-cert-file and --tls-private-key-file (by default
// tls.crt and tls.key in certDir, where the program's pod mounts its
// Secret) and the port flag named portFlag to c.
func (c *Config) AddFlags(fs *flag.FlagSet, certDir, portFlag string, port int) {
	fs.StringVar(&c.CertFile, "tls-cert-file", filepath.Join(certDir, "tls.crt"), "serving certificate (PEM)")
	fs.StringVar(&c.KeyFile, "tls-private-key-file", filepath.Join(certDir, "tls.key"), "serving key (PEM)")
	fs.IntVar(&c.Port, portFlag, port, "HTTPS port")
}

// Run serves h over TLS until ctx is done, then shuts down gracefully. It
// logs "serving <what> on <address>" once listening. Requests' contexts
// end when the shutdown begins, so that a request a handler holds open
// (admwebhook's /hang) does not hold up the stop.
func Run(ctx context.Context, cfg Config, what string, h http.Handler) error {
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("load serving certificate: %w", err)
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port))); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	reqCtx, endRequests := context.WithCancel(context.Background())
	defer endRequests()
	srv := &http.Server{
		Handler: h,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert}, ClientAuth: cfg.ClientAuth, MinVersion: tls.VersionTLS12,
		},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          cfg.Log,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	if cfg.Log != nil {
		cfg.Log.Printf("serving %s on %s", what, ln.Addr())
	}
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	endRequests()
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err = srv.Shutdown(shutCtx)
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
