package garbagecollector

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"

	"skiff/server/controller/controllertest"
)

func TestAgainstAPIServer(t *testing.T) {
	// Our API server over SQLite, reached in-process as the collector is
	// in `skiff server`.
	env := controllertest.Start(t, controllertest.Options{Namespaces: []string{metav1.NamespaceDefault}, Timeout: time.Minute})
	ctx, cfg := env.Ctx, env.Config
	cms := env.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault)

	uids := map[string]types.UID{}
	mk := func(name string, owners ...string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, o := range owners {
			block := true
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: o, UID: uids[o], BlockOwnerDeletion: &block})
		}
		got, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		must(t, err)
		uids[name] = got.UID
	}
	mk("bg")
	mk("keep")
	mk("bg-child", "bg")
	mk("bg-shared", "bg", "keep")
	mk("fg")
	mk("fg-child", "fg")
	mk("fg-grandchild", "fg-child")
	mk("orphan")
	mk("orphan-child", "orphan")

	stop := controllertest.Run(t, ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Metadata: metadata.NewForConfigOrDie(cfg), Discovery: discovery.NewDiscoveryClientForConfigOrDie(cfg), Logger: controllertest.Logger(t, slog.LevelInfo)})
	})

	gone := func(name string) func() bool {
		return func() bool {
			_, err := cms.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}
	owners := func(name string) []types.UID {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		must(t, err)
		var out []types.UID
		for _, r := range cm.OwnerReferences {
			out = append(out, r.UID)
		}
		return out
	}
	fg, orphan := metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan
	must(t, cms.Delete(ctx, "bg", metav1.DeleteOptions{}))
	must(t, cms.Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: &fg}))
	must(t, cms.Delete(ctx, "orphan", metav1.DeleteOptions{PropagationPolicy: &orphan}))

	eventually(t, "bg-child collected", gone("bg-child"))
	eventually(t, "bg-shared to lose its reference to bg", func() bool { return slices.Equal(owners("bg-shared"), []types.UID{uids["keep"]}) })
	eventually(t, "fg deleted after its dependents", gone("fg"))
	if !gone("fg-child")() || !gone("fg-grandchild")() {
		t.Error("fg went before its dependents")
	}
	eventually(t, "orphan deleted", gone("orphan"))
	if got := owners("orphan-child"); len(got) != 0 {
		t.Errorf("orphan-child still has owners %v", got)
	}
	stop()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
