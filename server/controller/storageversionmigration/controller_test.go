package storageversionmigration

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"skiff/server/controller/controllertest"
)

// patchLog records the bodies of the PATCH requests the controller sends.
type patchLog struct {
	mu      sync.Mutex
	next    http.RoundTripper
	patches map[string]string // path -> body
}

func (p *patchLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPatch && r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		p.mu.Lock()
		p.patches[r.URL.Path] = string(b)
		p.mu.Unlock()
	}
	return p.next.RoundTrip(r)
}

func (p *patchLog) get(path string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.patches[path]
	return b, ok
}

func start(t *testing.T, grace time.Duration) (*controllertest.Env, *patchLog) {
	t.Helper()
	env := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: time.Minute})
	cfg := rest.CopyConfig(env.Config)
	log := &patchLog{next: cfg.Transport, patches: map[string]string{}}
	cfg.Transport = log
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: env.Client, Dynamic: dyn, Discovery: disc, Informers: env.Informers,
			Logger: controllertest.Logger(t, slog.LevelWarn), DiscoveryGrace: grace})
	})
	return env, log
}

func migration(name string, gr metav1.GroupResource) *svmv1.StorageVersionMigration {
	return &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: svmv1.StorageVersionMigrationSpec{Resource: gr}}
}

func condition(env *controllertest.Env, name string, t svmv1.MigrationConditionType) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		svm, err := env.Client.StoragemigrationV1().StorageVersionMigrations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(svm.Status.Conditions, string(t)), nil
	}
}

func TestMigration_ServedResource_RewritesEachObjectAndSucceeds(t *testing.T) {
	env, log := start(t, time.Minute)
	for _, n := range []string{"a", "b"} {
		_, err := env.Client.CoreV1().ConfigMaps("default").Create(env.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	before, err := env.Client.CoreV1().ConfigMaps("default").Get(env.Ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Client.StoragemigrationV1().StorageVersionMigrations().Create(env.Ctx, migration("cm", metav1.GroupResource{Resource: "configmaps"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, env.Ctx, 30*time.Second, condition(env, "cm", svmv1.MigrationSucceeded), "migration cm to succeed")
	svm, err := env.Client.StoragemigrationV1().StorageVersionMigrations().Get(env.Ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svm.Status.ResourceVersion == "" {
		t.Error("status.resourceVersion was not recorded")
	}
	body, ok := log.get("/api/v1/namespaces/default/configmaps/b")
	if !ok || !strings.Contains(body, `"resourceVersion":"`+before.ResourceVersion+`"`) || !strings.Contains(body, `"kind":"ConfigMap"`) {
		t.Errorf("patch of configmap b = %q (sent %v), want a no-op guarded by resourceVersion %s", body, ok, before.ResourceVersion)
	}
	if _, ok := log.get("/api/v1/namespaces/default/configmaps/a"); !ok {
		t.Error("configmap a was not rewritten")
	}
	// Once finished, Running turns False, as upstream's runner leaves it.
	controllertest.Eventually(t, env.Ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		svm, err := env.Client.StoragemigrationV1().StorageVersionMigrations().Get(ctx, "cm", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(svm.Status.Conditions, string(svmv1.MigrationRunning))
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonCompleted, nil
	}, "Running to turn False")
}

func TestMigration_UnservedResource_RunsThenFailsAfterGrace(t *testing.T) {
	env, _ := start(t, 200*time.Millisecond)
	_, err := env.Client.StoragemigrationV1().StorageVersionMigrations().Create(env.Ctx, migration("foo", metav1.GroupResource{Resource: "foo"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, env.Ctx, 30*time.Second, condition(env, "foo", svmv1.MigrationFailed), "migration foo to fail")
	svm, err := env.Client.StoragemigrationV1().StorageVersionMigrations().Get(env.Ctx, "foo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(svm.Status.Conditions, string(svmv1.MigrationFailed))
	if c.Reason != ReasonFailed || !strings.Contains(c.Message, "resource does not exist in discovery") {
		t.Errorf("Failed condition = %+v", c)
	}
	if meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationSucceeded)) {
		t.Error("an unserved resource's migration also Succeeded")
	}
}
