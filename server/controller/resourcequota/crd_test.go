package resourcequota

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"skiff/server/apiserver/apitest"
	"skiff/server/controller/controllertest"
	"skiff/server/crd"
	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/validation"
)

var widgets = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "widgets"}

// startWithCRDs is start on a server that serves CustomResourceDefinitions.
func startWithCRDs(t *testing.T) (*controllertest.Env, dynamic.Interface) {
	t.Helper()
	rows := registry.APIExtensions(registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource})
	for _, r := range rows {
		if r.Name == "customresourcedefinitions" {
			r.BeforeDelete = crd.PrepareDelete
		}
	}
	api := apitest.Start(t, apitest.Options{Resources: rows})
	cfg := api.Config(nil)
	dyn := dynamic.NewForConfigOrDie(cfg)
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	m, err := crd.New(crd.Config{Registry: api.Registry, Cache: api.Storage.Cache(), Client: dyn, Logger: controllertest.Logger(t, slog.LevelWarn)})
	must(t, err)
	var wg sync.WaitGroup
	mctx, stop := context.WithCancel(ctx)
	wg.Go(func() {
		if err := m.Run(mctx); err != nil && mctx.Err() == nil {
			t.Errorf("crd manager: %v", err)
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	e := &controllertest.Env{Ctx: ctx, Config: cfg, Client: client, Informers: controllertest.Informers(t, client)}
	controllertest.Run(t, ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: client, Informers: e.Informers, Metadata: metadata.NewForConfigOrDie(cfg), Discovery: client.Discovery(),
			Logger: controllertest.Logger(t, slog.LevelWarn), ResyncPeriod: never, Workers: 2})
	})
	return e, dyn
}

func widgetCRD(t *testing.T) *unstructured.Unstructured {
	def := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(def)
	must(t, err)
	return &unstructured.Unstructured{Object: m}
}

func widget(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": name},
	}}
}

func TestQuota_CustomResource_CountedAndGivenBack(t *testing.T) {
	e, dyn := startWithCRDs(t)
	const count = "count/widgets.stable.example.com"
	// Not served yet: nothing of it exists.
	createQuota(t, e, "early", list(count, "5"))
	waitUsed(t, e, "early", list(count, "0"))

	_, err := dyn.Resource(crd.GVR).Create(e.Ctx, widgetCRD(t), metav1.CreateOptions{})
	must(t, err)
	controllertest.Eventually(t, e.Ctx, waitLimit, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(widgets).Namespace(ns).Create(ctx, widget("a"), metav1.CreateOptions{})
		return err == nil, nil
	}, "widgets to be served")
	_, err = dyn.Resource(widgets).Namespace(ns).Create(e.Ctx, widget("b"), metav1.CreateOptions{})
	must(t, err)

	// The controller has read discovery before the CRD; a quota naming
	// the new resource makes it look again.
	createQuota(t, e, "q", list(count, "5"))
	waitUsed(t, e, "q", list(count, "2"))
	must(t, dyn.Resource(widgets).Namespace(ns).Delete(e.Ctx, "a", metav1.DeleteOptions{}))
	waitUsed(t, e, "q", list(count, "1"))
}
