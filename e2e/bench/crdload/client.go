package main

import (
	"net/http"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"skiff/e2e/bench/loadkit"
)

// newDynamic is a dynamic client speaking JSON with its own connection
// and no client-side rate limit, counted on w.
func newDynamic(cfg *rest.Config, timeout time.Duration, w *loadkit.Wire) (*dynamic.DynamicClient, error) {
	return dynamic.NewForConfig(loadkit.Clients{Base: cfg, Wire: w}.Config(timeout))
}

// newHTTP is a plain HTTP client with the kubeconfig's credentials, for
// requests whose raw bytes and timing matter (LIST, readiness polls).
func newHTTP(cfg *rest.Config, timeout time.Duration, w *loadkit.Wire) (*http.Client, error) {
	return rest.HTTPClientFor(loadkit.Clients{Base: cfg, Wire: w}.Config(timeout))
}
