// Package server is skiff's control plane. So far it opens the state store in
// the data directory and serves a health endpoint; the API server, scheduler
// and controllers are added here as goroutines of Run.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"skiff/store/sqlite"
)

// Config is everything `skiff server` is told.
type Config struct {
	// DataDir holds the server's state: <DataDir>/server/db/state.db.
	DataDir string
	// BindAddress is the address the server listens on.
	BindAddress string
	// Port is the API port (6443). Until the API server lands it serves only
	// /healthz, over plain HTTP.
	Port int
	// CompactInterval is how often the store compacts history (0: never).
	CompactInterval time.Duration
	// Logger receives the server's logs.
	Logger *slog.Logger
	// Listening, if set, is called with the bound address once the server
	// accepts connections (useful with Port 0).
	Listening func(addr net.Addr)
}

// StorePath is where the SQLite state store lives under a data directory.
func StorePath(dataDir string) string {
	return filepath.Join(dataDir, "server", "db", "state.db")
}

// Run runs the server until ctx ends, then shuts down cleanly.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	st, err := sqlite.Open(ctx, sqlite.Config{
		Path:            StorePath(cfg.DataDir),
		CompactInterval: cfg.CompactInterval,
		Logger:          log.With("component", "store"),
	})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	rev, _ := st.CurrentRevision(ctx)
	log.Info("store open", "path", StorePath(cfg.DataDir), "revision", rev)

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: routes(st), ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving /healthz over HTTP", "addr", ln.Addr().String())
	if cfg.Listening != nil {
		cfg.Listening(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
	}
	log.Info("stopped")
	return nil
}

// revisioner is what the health check needs of the store.
type revisioner interface {
	// CurrentRevision fails once the store is closed or broken.
	CurrentRevision(ctx context.Context) (int64, error)
}

func routes(st revisioner) http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if _, err := st.CurrentRevision(req.Context()); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "[-]store failed: %v\nhealthz check failed\n", err)
			return
		}
		fmt.Fprint(w, "ok")
	})
	return r
}
