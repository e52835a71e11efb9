package server

import (
	"context"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/certs"
	"skiff/server/controller/clusterroleaggregation"
	"skiff/server/controller/garbagecollector"
	"skiff/server/controller/namespace"
	"skiff/server/controller/serviceaccount"
)

// startControllers runs the control loops as goroutines. They reach the API
// server in-process as system:kube-controller-manager, so RBAC and
// admission apply to them as to any client.
func startControllers(ctx context.Context, api *apiserver.Server, bundle *certs.Bundle, log *slog.Logger) {
	user := &auth.User{Name: "system:kube-controller-manager", Groups: []string{auth.GroupAuthenticated}}
	client, err := kubernetes.NewForConfig(inProcessConfig(api.Transport(user)))
	if err != nil {
		log.Error("controllers not started", "err", err)
		return
	}
	meta, err := metadata.NewForConfig(inProcessConfig(api.Transport(user)))
	if err != nil {
		log.Error("controllers not started", "err", err)
		return
	}
	go func() {
		err := garbagecollector.Run(ctx, garbagecollector.Config{Metadata: meta, Discovery: client.Discovery(), Logger: log.With("controller", "garbagecollector")})
		if err != nil && ctx.Err() == nil {
			log.Error("garbage collector stopped", "err", err)
		}
	}()
	go func() {
		err := namespace.Run(ctx, namespace.Config{Client: client, Metadata: meta, Discovery: client.Discovery(), Logger: log.With("controller", "namespace")})
		if err != nil && ctx.Err() == nil {
			log.Error("namespace controller stopped", "err", err)
		}
	}()
	go func() {
		err := clusterroleaggregation.Run(ctx, clusterroleaggregation.Config{Client: client, Logger: log.With("controller", "clusterrole-aggregation")})
		if err != nil && ctx.Err() == nil {
			log.Error("cluster role aggregation controller stopped", "err", err)
		}
	}()
	go func() {
		err := serviceaccount.Run(ctx, serviceaccount.Config{Client: client, CACert: bundle.CACertPEM(), Logger: log.With("controller", "serviceaccount")})
		if err != nil && ctx.Err() == nil {
			log.Error("service account controller stopped", "err", err)
		}
	}()
}
