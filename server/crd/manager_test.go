package crd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
	"skiff/server/crd"
	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/validation"
)

var widgets = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "widgets"}

// cluster is an API server with the CRD row and a running manager.
type cluster struct {
	api *apitest.Server
	dyn dynamic.Interface
	cfg *rest.Config
}

func start(t *testing.T) *cluster {
	t.Helper()
	rows := registry.APIExtensions(registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource})
	for _, r := range rows {
		if r.Name == "customresourcedefinitions" {
			r.BeforeDelete = crd.PrepareDelete
		}
	}
	api := apitest.Start(t, apitest.Options{Resources: rows})
	cfg := api.Config(&auth.User{Name: "system:apiserver", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "default"}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := crd.New(crd.Config{Registry: api.Registry, Cache: api.Storage.Cache(), Client: dyn,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("manager: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &cluster{api: api, dyn: dyn, cfg: cfg}
}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	labelSel := ".status.selector"
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList", ShortNames: []string{"wd"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"replicas": {Type: "integer"},
							"size":     {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"M"`)}},
						}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"replicas": {Type: "integer"},
							"selector": {Type: "string"},
						}},
					},
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: &labelSel},
				},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "Size", Type: "string", JSONPath: ".spec.size"},
					{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
				},
			}},
		},
	}
}

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func (c *cluster) createCRD(t *testing.T, def *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	if _, err := c.dyn.Resource(crd.GVR).Create(context.Background(), toUnstructured(t, def), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *cluster) crdCondition(t *testing.T, name string, typ apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	u, err := c.dyn.Resource(crd.GVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var def apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &def); err != nil {
		t.Fatal(err)
	}
	for _, cnd := range def.Status.Conditions {
		if cnd.Type == typ {
			return &cnd
		}
	}
	return nil
}

func (c *cluster) established(t *testing.T) {
	t.Helper()
	waitFor(t, "widgets served", func() bool {
		cnd := c.crdCondition(t, "widgets.stable.example.com", apiextensionsv1.Established)
		if cnd == nil || cnd.Status != apiextensionsv1.ConditionTrue {
			return false
		}
		_, err := c.dyn.Resource(widgets).Namespace("default").List(context.Background(), metav1.ListOptions{})
		return err == nil
	})
}

func widget(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

func TestManager_NewCRD_ServesDefaultedPrunedObjects(t *testing.T) {
	c := start(t)
	c.createCRD(t, widgetCRD())
	c.established(t)
	ctx := context.Background()
	w := widget("a", map[string]any{"replicas": int64(2), "junk": "x"})
	w.Object["status"] = map[string]any{"replicas": int64(7)}
	got, err := c.dyn.Resource(widgets).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create widget: %v", err)
	}
	if size, _, _ := unstructured.NestedString(got.Object, "spec", "size"); size != "M" {
		t.Errorf("spec.size = %q, want the default M", size)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "junk"); found {
		t.Errorf("spec.junk was kept; the schema does not declare it")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "status"); found {
		t.Errorf("status was taken from a create; the status subresource owns it")
	}
	if got.GetUID() == "" || got.GetResourceVersion() == "" || got.GetGeneration() != 1 {
		t.Errorf("server-owned metadata not set: uid %q rv %q generation %d", got.GetUID(), got.GetResourceVersion(), got.GetGeneration())
	}
	list, err := c.dyn.Resource(widgets).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.GetKind() != "WidgetList" {
		t.Fatalf("list = %v items, kind %q, err %v", len(list.Items), list.GetKind(), err)
	}
}

func TestManager_InvalidObject_Is422NamingTheField(t *testing.T) {
	c := start(t)
	c.createCRD(t, widgetCRD())
	c.established(t)
	_, err := c.dyn.Resource(widgets).Namespace("default").Create(context.Background(), widget("bad", map[string]any{"replicas": "two"}), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.replicas") {
		t.Fatalf("create with spec.replicas a string: err = %v, want 422 naming spec.replicas", err)
	}
}

func TestManager_StrictFieldValidation_RefusesUnknownFields(t *testing.T) {
	c := start(t)
	c.createCRD(t, widgetCRD())
	c.established(t)
	_, err := c.dyn.Resource(widgets).Namespace("default").Create(context.Background(), widget("s", map[string]any{"junk": "x"}),
		metav1.CreateOptions{FieldValidation: "Strict"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "spec.junk"`) {
		t.Fatalf("strict create with spec.junk: err = %v, want 400 naming spec.junk", err)
	}
}

func TestManager_Scale_ReadsAndWritesSpecReplicas(t *testing.T) {
	c := start(t)
	c.createCRD(t, widgetCRD())
	c.established(t)
	ctx := context.Background()
	ri := c.dyn.Resource(widgets).Namespace("default")
	if _, err := ri.Create(ctx, widget("s", map[string]any{"replicas": int64(1)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"spec":{"replicas":5}}`)
	if _, err := ri.Patch(ctx, "s", "application/merge-patch+json", patch, metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("patch scale: %v", err)
	}
	got, err := ri.Get(ctx, "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 5 {
		t.Errorf("spec.replicas = %d after scaling to 5", n)
	}
	sc, err := ri.Get(ctx, "s", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(sc.Object, "spec", "replicas"); n != 5 || sc.GetKind() != "Scale" {
		t.Errorf("scale = %v, want a Scale with spec.replicas 5", sc.Object)
	}
}

func TestManager_StrategicMergePatch_Is415(t *testing.T) {
	c := start(t)
	c.createCRD(t, widgetCRD())
	c.established(t)
	ctx := context.Background()
	ri := c.dyn.Resource(widgets).Namespace("default")
	if _, err := ri.Create(ctx, widget("p", map[string]any{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := ri.Patch(ctx, "p", "application/strategic-merge-patch+json", []byte(`{"spec":{"size":"L"}}`), metav1.PatchOptions{})
	if se, ok := err.(apierrors.APIStatus); !ok || se.Status().Code != 415 {
		t.Fatalf("strategic merge patch: err = %v, want 415", err)
	}
}

func TestManager_Table_PrintsAdditionalColumns(t *testing.T) {
	c := start(t)
	c.createCRD(t, widgetCRD())
	c.established(t)
	ctx := context.Background()
	if _, err := c.dyn.Resource(widgets).Namespace("default").Create(ctx, widget("t", map[string]any{"replicas": int64(3)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err := rest.RESTClientFor(restConfigFor(c.cfg))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().AbsPath("/apis/stable.example.com/v1/namespaces/default/widgets").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, col := range tbl.ColumnDefinitions {
		names = append(names, col.Name)
	}
	if strings.Join(names, ",") != "Name,Size,Replicas" || len(tbl.Rows) != 1 {
		t.Fatalf("columns %v, %d rows; want Name,Size,Replicas and 1 row", names, len(tbl.Rows))
	}
	if cells := tbl.Rows[0].Cells; cells[0] != "t" || cells[1] != "M" || cells[2] != float64(3) {
		t.Errorf("cells = %v, want [t M 3]", cells)
	}
}

func restConfigFor(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	c.NegotiatedSerializer = unstructuredSerializer()
	return c
}

func TestManager_DeleteCRD_DeletesObjectsThenRoutes(t *testing.T) {
	c := start(t)
	c.createCRD(t, widgetCRD())
	c.established(t)
	ctx := context.Background()
	ri := c.dyn.Resource(widgets).Namespace("default")
	for _, n := range []string{"x", "y"} {
		if _, err := ri.Create(ctx, widget(n, map[string]any{}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.dyn.Resource(crd.GVR).Delete(ctx, "widgets.stable.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the CRD to go", func() bool {
		_, err := c.dyn.Resource(crd.GVR).Get(ctx, "widgets.stable.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := ri.List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("widgets still served after their CRD went: err = %v", err)
	}
	keys, err := c.api.Store.List(ctx, storeListAll("/registry/stable.example.com/"))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys.Items) != 0 {
		t.Errorf("%d widgets left in the store after their CRD was deleted", len(keys.Items))
	}
}

func TestManager_KindConflict_NotAccepted(t *testing.T) {
	c := start(t)
	c.createCRD(t, widgetCRD())
	c.established(t)
	other := widgetCRD()
	other.Name = "gadgets.stable.example.com"
	other.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Widget", ListKind: "GadgetList"}
	c.createCRD(t, other)
	waitFor(t, "NamesAccepted False", func() bool {
		cnd := c.crdCondition(t, other.Name, apiextensionsv1.NamesAccepted)
		return cnd != nil && cnd.Status == apiextensionsv1.ConditionFalse && cnd.Reason == "KindConflict"
	})
	if cnd := c.crdCondition(t, other.Name, apiextensionsv1.Established); cnd == nil || cnd.Status != apiextensionsv1.ConditionFalse {
		t.Errorf("Established = %v for a CRD whose kind is taken", cnd)
	}
}

func TestManager_DynamicInformer_SeesCustomObjectsInOrder(t *testing.T) {
	c := start(t)
	c.createCRD(t, widgetCRD())
	c.established(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dyn, 0, "default", nil)
	inf := factory.ForResource(widgets).Informer()
	var mu sync.Mutex
	var seen []string
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, obj.(*unstructured.Unstructured).GetName())
	}}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers ctx stops
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	var want []string
	for i := range 20 {
		name := fmt.Sprintf("w%02d", i)
		want = append(want, name)
		if _, err := c.dyn.Resource(widgets).Namespace("default").Create(ctx, widget(name, map[string]any{}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "20 adds", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) >= 20 })
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("informer saw %v, want the creation order %v", seen, want)
	}
}
