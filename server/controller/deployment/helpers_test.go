package deployment

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/controllertest"
	"skiff/server/controller/replicaset"
)

// env is a real API server with a "default" namespace and the
// Deployment and ReplicaSet controllers running against it.
type env struct {
	ctx    context.Context
	client kubernetes.Interface
}

// start runs the controllers; with a nil recorder events are kept in
// memory, else they go to the given recorder.
func start(t *testing.T, recorder func(kubernetes.Interface) record.EventRecorder) *env {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: 50 * time.Second})
	var rec record.EventRecorder = ce.Events
	if recorder != nil {
		rec = recorder(ce.Client)
	}
	log := controllertest.Logger(t, slog.LevelInfo)
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: ce.Client, Informers: ce.Informers, Recorder: rec, Logger: log})
	})
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error {
		return replicaset.Run(ctx, replicaset.Config{Client: ce.Client, Informers: ce.Informers, Recorder: &controllertest.Recorder{}, Logger: log})
	})
	return &env{ctx: ce.Ctx, client: ce.Client}
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
