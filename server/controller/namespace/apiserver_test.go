package namespace

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"skiff/server/controller/controllertest"
)

func TestAgainstAPIServer(t *testing.T) {
	// Our API server over SQLite, reached in-process as the controller is
	// in `skiff server`.
	env := controllertest.Start(t, controllertest.Options{Timeout: time.Minute})
	ctx, cfg, client := env.Ctx, env.Config, env.Client
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if statusWriteDeletesNamespace(ctx, t, client) {
		t.Fatal("the API server deleted a terminating namespace on a status write while spec.finalizers was not empty")
	}
	for _, name := range []string{"doomed", "live"} {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		must(err)
		for _, cm := range []string{"a", "b"} {
			_, err := client.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm}}, metav1.CreateOptions{})
			must(err)
		}
	}
	_, err := client.CoreV1().Secrets("doomed").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{})
	must(err)
	must(client.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}))

	stop := controllertest.Run(t, ctx, func(ctx context.Context) error {
		return run(ctx, Config{Client: client, Metadata: metadata.NewForConfigOrDie(cfg), Discovery: client.Discovery(), Logger: controllertest.Logger(t, slog.LevelInfo)}, 0)
	})

	// The held secret keeps the namespace, and the conditions say why.
	waitFor(t, ctx, "content-remaining conditions", func() bool {
		ns, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		must(err)
		return condition(ns, corev1.NamespaceFinalizersRemaining).Message == "Some finalizers are remaining: example.com/hold in 1 resource instances" &&
			condition(ns, corev1.NamespaceContentRemaining).Message == "Some resources are remaining: secrets. has 1 resource instances"
	})
	cms, err := client.CoreV1().ConfigMaps("doomed").List(ctx, metav1.ListOptions{})
	must(err)
	if len(cms.Items) != 0 {
		t.Errorf("config maps left in doomed: %d", len(cms.Items))
	}

	// Its owner lets go: the secret goes, then the namespace.
	s, err := client.CoreV1().Secrets("doomed").Get(ctx, "s", metav1.GetOptions{})
	must(err)
	s.Finalizers = nil
	_, err = client.CoreV1().Secrets("doomed").Update(ctx, s, metav1.UpdateOptions{})
	must(err)
	waitFor(t, ctx, "namespace gone", func() bool {
		_, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	live, err := client.CoreV1().ConfigMaps("live").List(ctx, metav1.ListOptions{})
	must(err)
	if len(live.Items) != 2 {
		t.Errorf("live namespace has %d config maps, want 2", len(live.Items))
	}
	stop()
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	controllertest.Eventually(t, ctx, time.Minute, func(context.Context) (bool, error) { return ok(), nil }, "%s", what)
}

// statusWriteDeletesNamespace probes whether an update to a terminating
// namespace that still has spec.finalizers makes the server delete it, as
// it must not: the namespace waits for this controller.
func statusWriteDeletesNamespace(ctx context.Context, t *testing.T, client kubernetes.Interface) bool {
	t.Helper()
	nsc := client.CoreV1().Namespaces()
	if _, err := nsc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nsc.Delete(ctx, "probe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := nsc.Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Status.Conditions = append(ns.Status.Conditions, corev1.NamespaceCondition{Type: "Probe", Status: corev1.ConditionTrue})
	if _, err := nsc.UpdateStatus(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	_, err = nsc.Get(ctx, "probe", metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}
