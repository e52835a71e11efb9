package server

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"skiff/server/aggregator"
	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/certs"
	"skiff/server/registry"
)

// aggregatorConfig is what the aggregator of the server stands on.
type aggregatorConfig struct {
	tlsDir string
	reg    *registry.Registry
	api    *apiserver.Server
	// system reaches the API in-process (system:apiserver, a master).
	system *auth.User
	bundle *certs.Bundle
	log    *slog.Logger
}

// startAggregator serves aggregated APIs (APIServices, package
// aggregator): the front-proxy PKI under the TLS dir, the API server's
// hook, and the aggregator's loops until ctx ends. wait returns once the
// loops have stopped; Notify of the returned aggregator is to be called
// when the registry's group-versions change (CustomResourceDefinitions).
func startAggregator(ctx context.Context, c aggregatorConfig) (agg *aggregator.Aggregator, wait func(), err error) {
	fp, err := certs.EnsureFrontProxy(certs.Config{Dir: c.tlsDir})
	if err != nil {
		return nil, nil, fmt.Errorf("certificates: %w", err)
	}
	rc := inProcessConfig(c.api.Transport(c.system))
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	agg, err = aggregator.New(aggregator.Config{REST: rc, Client: client, Registry: c.reg,
		ProxyClientCert: fp.ClientCertificate(), ClientCA: c.bundle.CACertPEM(), RequestHeaderCA: fp.CACertPEM(), Logger: c.log})
	if err != nil {
		return nil, nil, err
	}
	c.api.SetAggregator(agg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := agg.Run(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("aggregator stopped", "err", err)
		}
	}()
	return agg, func() { <-done }, nil
}
