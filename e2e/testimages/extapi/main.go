// Command extapi is an aggregated API server for skiff's e2e tests, written
// by hand (no k8s.io/apiserver): over TLS it serves the group
// wardle.skiff.test/v1alpha1 with discovery and a read-only resource,
// flunders, whose objects tell in status.caller the identity the aggregator
// passed in X-Remote-User / X-Remote-Group / X-Remote-Extra-*. It believes
// those headers only from a client certificate signed by the requestheader
// CA with an allowed CN, both read (in cluster) from the ConfigMap
// kube-system/extension-apiserver-authentication, as upstream's
// request-header authenticator does. It is built into an image by
// skiff/e2e/testimages.
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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config is what the server serves with.
type Config struct {
	CertFile, KeyFile string
	// Listener, when set, is used instead of listening on Port (tests).
	Listener net.Listener
	Port     int
	// ConfigMaps reads kube-system's ConfigMaps (client-go's
	// CoreV1().ConfigMaps("kube-system")).
	ConfigMaps configMapGetter
	// Resync is how often the authentication ConfigMap is read again, so
	// that a rotated front-proxy CA is picked up.
	Resync time.Duration
	// Flunders are the objects served.
	Flunders []types.NamespacedName
	Log      *log.Logger
}

func main() {
	cfg := Config{Log: log.New(os.Stderr, "extapi: ", log.LstdFlags)}
	var flunders, kubeconfig string
	flag.StringVar(&cfg.CertFile, "tls-cert-file", "/apiserver.local.config/certificates/tls.crt", "serving certificate (PEM)")
	flag.StringVar(&cfg.KeyFile, "tls-private-key-file", "/apiserver.local.config/certificates/tls.key", "serving key (PEM)")
	flag.IntVar(&cfg.Port, "secure-port", 443, "HTTPS port")
	flag.DurationVar(&cfg.Resync, "auth-resync", 10*time.Second, "how often to re-read "+authConfigMapNamespace+"/"+authConfigMapName)
	flag.StringVar(&flunders, "flunders", "default/echo", "comma-separated namespace/name of the flunders served")
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to read the authentication ConfigMap with (default: in-cluster)")
	flag.Parse()
	var err error
	if cfg.Flunders, err = parseFlunders(flunders); err != nil {
		cfg.Log.Fatal(err)
	}
	rc, err := clientConfig(kubeconfig)
	if err != nil {
		cfg.Log.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		cfg.Log.Fatalf("client: %v", err)
	}
	cfg.ConfigMaps = cs.CoreV1().ConfigMaps(authConfigMapNamespace)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		cfg.Log.Fatal(err)
	}
}

// clientConfig is the in-cluster config of a pod, or a kubeconfig's when
// one is named (a run outside a cluster).
func clientConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return rc, nil
}

// parseFlunders parses "ns/name,ns/name".
func parseFlunders(s string) ([]types.NamespacedName, error) {
	var out []types.NamespacedName
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		ns, name, ok := strings.Cut(f, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("flunder %q: want namespace/name", f)
		}
		out = append(out, types.NamespacedName{Namespace: ns, Name: name})
	}
	return out, nil
}

// Handler is the server's HTTP surface: health endpoints open to anyone
// (as upstream's always-allowed paths), everything else behind the
// requestheader authenticator.
func Handler(auth *atomic.Pointer[RequestHeaderConfig], flunders []types.NamespacedName) http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/livez", ok)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if auth.Load() == nil {
			http.Error(w, errNoAuthConfig.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/", &api{auth: auth, flunders: flunders})
	return mux
}

// Run serves until ctx is done, keeping the requestheader configuration
// fresh, then shuts down gracefully.
func Run(ctx context.Context, cfg Config) error {
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("load serving certificate: %w", err)
	}
	if cfg.ConfigMaps == nil {
		return errors.New("no ConfigMap client")
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 10 * time.Second
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port))); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	var auth atomic.Pointer[RequestHeaderConfig]
	srv := &http.Server{
		Handler: Handler(&auth, cfg.Flunders),
		// Ask for, but do not require, a client certificate: the
		// aggregator presents its proxy certificate, a kubelet probing
		// /healthz none; authenticate verifies it against the CA of the
		// moment.
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          cfg.Log,
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		keepAuthFresh(ctx, cfg, &auth)
	}()
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	logf(cfg.Log, "serving %s on %s", GroupVersion, ln.Addr())
	var serveErr, shutErr error
	select {
	case serveErr = <-done:
	case <-ctx.Done():
		shutCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		shutErr = srv.Shutdown(shutCtx)
		stop()
		serveErr = <-done
	}
	cancel()
	wg.Wait()
	if !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	if shutErr != nil {
		return fmt.Errorf("shutdown: %w", shutErr)
	}
	return nil
}

// keepAuthFresh reads the authentication ConfigMap now and every
// cfg.Resync until ctx is done. A failed read keeps the last good
// configuration: a passing API server hiccup must not lock callers out.
func keepAuthFresh(ctx context.Context, cfg Config, auth *atomic.Pointer[RequestHeaderConfig]) {
	t := time.NewTicker(cfg.Resync)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := loadAuthConfig(rctx, cfg.ConfigMaps)
		cancel()
		if err != nil {
			logf(cfg.Log, "%v", err)
		} else {
			auth.Store(c)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func logf(l *log.Logger, format string, args ...any) {
	if l != nil {
		l.Printf(format, args...)
	}
}
