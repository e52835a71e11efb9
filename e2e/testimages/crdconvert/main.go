// Command crdconvert is a CRD conversion webhook for skiff's e2e tests: it
// serves apiextensions.k8s.io/v1 ConversionReview at /convert over HTTPS,
// converting widgets.stable.skiff.test between v1 (spec.hostPort) and v2
// (spec.host, spec.port). The certificate comes from files, as a pod mounts
// a Secret. It is built into an image by skiff/e2e/testimages.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Config is what the webhook serves with.
type Config struct {
	CertFile, KeyFile string
	// Listener, when set, is used instead of listening on Port (tests).
	Listener net.Listener
	Port     int
	Log      *log.Logger
}

func main() {
	var cfg Config
	flag.StringVar(&cfg.CertFile, "tls-cert-file", "/certs/tls.crt", "serving certificate (PEM)")
	flag.StringVar(&cfg.KeyFile, "tls-private-key-file", "/certs/tls.key", "serving key (PEM)")
	flag.IntVar(&cfg.Port, "port", 9443, "HTTPS port")
	flag.Parse()
	cfg.Log = log.New(os.Stderr, "crdconvert: ", log.LstdFlags)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		cfg.Log.Fatal(err)
	}
}

// Handler is the webhook's HTTP surface.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/convert", serveConvert)
	ok := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/readyz", ok)
	return mux
}

// Run serves until ctx is done, then shuts down gracefully.
func Run(ctx context.Context, cfg Config) error {
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
	srv := &http.Server{
		Handler:           Handler(),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          cfg.Log,
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	if cfg.Log != nil {
		cfg.Log.Printf("serving /convert on %s", ln.Addr())
	}
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
