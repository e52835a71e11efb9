// Command admwebhook is an admission webhook for skiff's e2e tests: it
// serves admission.k8s.io/v1 AdmissionReview over HTTPS on one path per
// behaviour (/allow, /deny, /mutate, /warn, /hang; see review.go), so that
// a test picks the answer by the path its webhook configuration names. The
// certificate comes from files, as a pod mounts a Secret. It is built into
// an image by skiff/e2e/testimages.
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
	// HangFor is how long /hang holds a request whose caller stays.
	HangFor time.Duration
	Log     *log.Logger
}

func main() {
	var cfg Config
	flag.StringVar(&cfg.CertFile, "tls-cert-file", "/certs/tls.crt", "serving certificate (PEM)")
	flag.StringVar(&cfg.KeyFile, "tls-private-key-file", "/certs/tls.key", "serving key (PEM)")
	flag.IntVar(&cfg.Port, "port", 9443, "HTTPS port")
	flag.DurationVar(&cfg.HangFor, "hang", 30*time.Second, "how long /hang holds a request")
	flag.Parse()
	cfg.Log = log.New(os.Stderr, "admwebhook: ", log.LstdFlags)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		cfg.Log.Fatal(err)
	}
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
	// Requests held by /hang end with the server's context, so that a
	// shutdown does not wait out HangFor.
	srvCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &http.Server{
		Handler:           Handler(cfg.HangFor, cfg.Log),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          cfg.Log,
		BaseContext:       func(net.Listener) context.Context { return srvCtx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	if cfg.Log != nil {
		cfg.Log.Printf("serving AdmissionReview on %s", ln.Addr())
	}
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	cancel()
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer shutCancel()
	err = srv.Shutdown(shutCtx)
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
