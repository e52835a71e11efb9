package replicaset

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"skiff/server/apiserver/apitest"
	"skiff/server/controller/controllertest"
)

// env is a real API server with a "default" namespace and the controller
// running against it.
type env struct {
	ctx    context.Context
	client kubernetes.Interface
	events *controllertest.Recorder
}

func start(t *testing.T, opts apitest.Options) *env {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{API: opts, Namespaces: []string{"default"}, Timeout: 45 * time.Second})
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: ce.Client, Informers: ce.Informers, Recorder: ce.Events, Logger: controllertest.Logger(t, slog.LevelInfo)})
	})
	return &env{ctx: ce.Ctx, client: ce.Client, events: ce.Events}
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	controllertest.Eventually(t, ctx, 30*time.Second, func(context.Context) (bool, error) { return cond() }, "%s", what)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
