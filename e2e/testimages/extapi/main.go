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
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"skiff/e2e/testimages/tlsserve"
)

// Config is what the server serves with.
type Config struct {
	tlsserve.Config
	// ConfigMaps reads kube-system's ConfigMaps (client-go's
	// CoreV1().ConfigMaps("kube-system")).
	ConfigMaps configMapGetter
	// Resync is how often the authentication ConfigMap is read again, so
	// that a rotated front-proxy CA is picked up.
	Resync time.Duration
	// Flunders are the objects served.
	Flunders []types.NamespacedName
}

func main() {
	var cfg Config
	cfg.Log = tlsserve.NewLog("extapi")
	var flunders, kubeconfig string
	cfg.AddFlags(flag.CommandLine, "/apiserver.local.config/certificates", "secure-port", 443)
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
	tlsserve.Main(cfg.Log, func(ctx context.Context) error { return Run(ctx, cfg) })
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
	if cfg.ConfigMaps == nil {
		return errors.New("no ConfigMap client")
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 10 * time.Second
	}
	// Ask for, but do not require, a client certificate: the aggregator
	// presents its proxy certificate, a kubelet probing /healthz none;
	// authenticate verifies it against the CA of the moment.
	cfg.ClientAuth = tls.RequestClientCert
	var auth atomic.Pointer[RequestHeaderConfig]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		keepAuthFresh(ctx, cfg, &auth)
	}()
	err := tlsserve.Run(ctx, cfg.Config, GroupVersion, Handler(&auth, cfg.Flunders))
	cancel()
	wg.Wait()
	return err
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
