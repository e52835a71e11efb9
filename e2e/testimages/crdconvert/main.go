// Command crdconvert is a CRD conversion webhook for skiff's e2e tests: it
// serves apiextensions.k8s.io/v1 ConversionReview at /convert over HTTPS,
// converting widgets.stable.skiff.test between v1 (spec.hostPort) and v2
// (spec.host, spec.port). The certificate comes from files, as a pod mounts
// a Secret. It is built into an image by skiff/e2e/testimages.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"

	"skiff/e2e/testimages/tlsserve"
)

func main() {
	var cfg tlsserve.Config
	cfg.AddFlags(flag.CommandLine, "/certs", "port", 9443)
	flag.Parse()
	cfg.Log = tlsserve.NewLog("crdconvert")
	tlsserve.Main(cfg.Log, func(ctx context.Context) error { return Run(ctx, cfg) })
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
func Run(ctx context.Context, cfg tlsserve.Config) error {
	return tlsserve.Run(ctx, cfg, "/convert", Handler())
}
