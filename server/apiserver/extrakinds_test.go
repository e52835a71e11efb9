package apiserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver/apitest"
)

func extraCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func claim(name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "req-0", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dra.example.com"}}}}}}
}

func TestResourceClaim_CreateWatchStatus_DefaultsAndKeepsSpecImmutable(t *testing.T) {
	h := newHarness(t)
	ctx := extraCtx(t)
	claims := h.client.ResourceV1().ResourceClaims("default")
	w, err := claims.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	c, err := claims.Create(ctx, claim("c1"), metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Spec.Devices.Requests[0].Exactly; e.AllocationMode != resourcev1.DeviceAllocationModeExactCount || e.Count != 1 {
		t.Errorf("request defaults = %s/%d, want ExactCount/1", e.AllocationMode, e.Count)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Added || ev.Object.(*resourcev1.ResourceClaim).Name != "c1" {
		t.Errorf("first watch event = %v %T, want ADDED c1", ev.Type, ev.Object)
	}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	c, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	if err != nil || c.Status.Allocation == nil {
		t.Fatalf("status update: %v, allocation %v", err, c.Status.Allocation)
	}
	c.Spec.Devices.Requests[0].Exactly.DeviceClassName = "other.example.com"
	_, err = claims.Update(ctx, c, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Invalid value") {
		t.Errorf("spec change: err = %v, want 422 on spec (immutable)", err)
	}
	// A JSON patch of the status subresource, as the conformance test sends.
	_, err = h.client.ResourceV1().ResourceClaims("default").Patch(ctx, "c1", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
}

func TestResourceClaim_InvalidRequests_FieldPathsAsUpstream(t *testing.T) {
	h := newHarness(t)
	ctx := extraCtx(t)
	bad := claim("bad")
	bad.Spec.Devices.Requests = append(bad.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: "req-1"})
	bad.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{}}
	_, err := h.client.ResourceV1().ResourceClaims("default").Create(ctx, bad, metav1.CreateOptions{})
	for _, want := range []string{"spec.devices.requests[1]: Required value", "spec.devices.requests[0].exactly.selectors[0].cel: Required value"} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want 422 with %q", err, want)
		}
	}
}

func TestResourceSlice_FieldSelectors_NodeNameAndDriver(t *testing.T) {
	h := newHarness(t)
	ctx := extraCtx(t)
	slices := h.client.ResourceV1().ResourceSlices()
	for _, n := range []string{"a", "b"} {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "slice-" + n}, Spec: resourcev1.ResourceSliceSpec{
			Driver: n + ".example.com", NodeName: ptr.To("node-" + n), Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}}}
		if _, err := slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for sel, want := range map[string]string{"spec.nodeName=node-b": "slice-b", "spec.driver=a.example.com": "slice-a"} {
		l, err := slices.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil || len(l.Items) != 1 || l.Items[0].Name != want {
			t.Errorf("list %s: %v %v, want only %s", sel, err, l, want)
		}
	}
	noPlace := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "nowhere"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "a.example.com", Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}}}
	if _, err := slices.Create(ctx, noPlace, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required") {
		t.Errorf("slice without node selection: err = %v, want 422", err)
	}
}

func TestDeviceTaintRule_StatusConditions_Written(t *testing.T) {
	h := newHarness(t)
	ctx := extraCtx(t)
	rules := h.client.ResourceV1().DeviceTaintRules()
	r, err := rules.Create(ctx, &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "testing", Effect: resourcev1.DeviceTaintEffectNone}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Spec.Taint.TimeAdded == nil || r.Generation != 1 {
		t.Errorf("timeAdded %v generation %d, want set and 1", r.Spec.Taint.TimeAdded, r.Generation)
	}
	r.Status.Conditions = []metav1.Condition{{Type: "Testing", Status: metav1.ConditionTrue, Reason: "E2E", Message: "m", LastTransitionTime: metav1.Now()}}
	if r, err = rules.UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil || len(r.Status.Conditions) != 1 {
		t.Fatalf("status: %v %v", err, r.Status)
	}
	if _, err := rules.Patch(ctx, "r", types.StrategicMergePatchType, []byte(`{"spec":{"taint":{"effect":"Bogus"}}}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("bogus effect: err = %v, want 422", err)
	}
}

func TestStorageKinds_VolumeAttributesClassImmutable_CSIStorageCapacityListed(t *testing.T) {
	h := newHarness(t)
	ctx := extraCtx(t)
	vacs := h.client.StorageV1().VolumeAttributesClasses()
	vac, err := vacs.Create(ctx, &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "e2e-fake-csi-driver",
		Parameters: map[string]string{"foo": "bar"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vac.Parameters["foo"] = "baz"
	if _, err := vacs.Update(ctx, vac, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "updates to parameters are forbidden") {
		t.Errorf("parameter change: err = %v, want 422", err)
	}
	caps := h.client.StorageV1().CSIStorageCapacities("default")
	if _, err := caps.Create(ctx, &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"t": "x"}},
		StorageClassName: "local"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	all, err := h.client.StorageV1().CSIStorageCapacities("").List(ctx, metav1.ListOptions{LabelSelector: "t=x"})
	if err != nil || len(all.Items) != 1 {
		t.Errorf("list across namespaces: %v %d, want 1", err, len(all.Items))
	}
}

func TestStorageVersionMigration_StatusRules(t *testing.T) {
	h := newHarness(t)
	ctx := extraCtx(t)
	svms := h.client.StoragemigrationV1().StorageVersionMigrations()
	m, err := svms.Create(ctx, &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Spec: storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: "foo"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Status.Conditions = []metav1.Condition{{Type: "Succeeded", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now()},
		{Type: "Failed", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now()}}
	if _, err := svms.UpdateStatus(ctx, m, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Both success and failed") {
		t.Errorf("both terminal: err = %v, want 422", err)
	}
	if _, err := svms.Create(ctx, &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.resource.resource: Required value") {
		t.Errorf("no resource: err = %v, want 422", err)
	}
}

func TestHPA_V1AndV2_ServeTheSameObjects(t *testing.T) {
	h := newHarness(t)
	ctx := extraCtx(t)
	v2 := h.client.AutoscalingV2().HorizontalPodAutoscalers("default")
	w, err := v2.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// As kubectl autoscale (1.27) creates it: through v1.
	created, err := h.client.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web", APIVersion: "apps/v1"},
			MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To[int32](60)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.APIVersion != "" && created.APIVersion != "autoscaling/v1" || *created.Spec.MinReplicas != 1 || *created.Spec.TargetCPUUtilizationPercentage != 60 {
		t.Errorf("v1 create answered %+v", created)
	}
	got, err := v2.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Metrics) != 1 || got.Spec.Metrics[0].Resource == nil || got.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU ||
		*got.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 || got.ResourceVersion != created.ResourceVersion || got.UID != created.UID {
		t.Errorf("v2 read of the v1 object = %+v", got)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Added || ev.Object.(*autoscalingv2.HorizontalPodAutoscaler).Name != "web" {
		t.Errorf("v2 watch saw %v %T, want ADDED", ev.Type, ev.Object)
	}
	// A v2-only metric survives a read-modify-write through v1.
	got.Spec.Metrics = append(got.Spec.Metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}})
	if _, err := v2.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1obj, err := h.client.AutoscalingV1().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || !strings.Contains(v1obj.Annotations["autoscaling.alpha.kubernetes.io/metrics"], "qps") {
		t.Fatalf("v1 get: %v, annotations %v, want the pods metric carried", err, v1obj.Annotations)
	}
	v1obj.Spec.MaxReplicas = 7
	if _, err := h.client.AutoscalingV1().HorizontalPodAutoscalers("default").Update(ctx, v1obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	after, err := v2.Get(ctx, "web", metav1.GetOptions{})
	if err != nil || after.Spec.MaxReplicas != 7 || len(after.Spec.Metrics) != 2 || len(after.Annotations) != 0 {
		t.Errorf("after v1 update: %v, v2 = %+v, want max 7, both metrics, no conversion annotations", err, after.Spec)
	}
	// Both versions' writers are tracked: managedFields recorded through v1
	// are read back through v2 and the other way round.
	versions := map[string]bool{}
	for _, m := range after.ManagedFields {
		versions[m.APIVersion] = true
	}
	if !versions["autoscaling/v1"] || !versions["autoscaling/v2"] {
		t.Errorf("managedFields = %+v, want entries of both versions", after.ManagedFields)
	}
	l, err := h.client.AutoscalingV1().HorizontalPodAutoscalers("").List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Spec.MaxReplicas != 7 {
		t.Errorf("v1 list = %v %v", err, l)
	}
}

// harnessFor serves an already started server (whose registry a test
// adjusted) on a local port.
func harnessFor(t *testing.T, s *apitest.Server) *harness {
	t.Helper()
	srv := httptest.NewServer(s.API.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	cfg := &rest.Config{Host: srv.URL, QPS: -1, Timeout: 30 * time.Second}
	return &harness{srv: srv, cache: s.Storage.Cache(), client: kubernetes.NewForConfigOrDie(cfg), cfg: cfg}
}

func TestComponentStatus_ComputedGetAndList_NoWrites(t *testing.T) {
	s := apitest.Start(t, apitest.Options{Authenticator: testAdmin{}})
	res, _ := s.Registry.Lookup("", "v1", "componentstatuses")
	res.Compute = func(context.Context) ([]runtime.Object, error) {
		return []runtime.Object{
			&corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: "scheduler"}, Conditions: []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}}},
			&corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: "etcd-0"}, Conditions: []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: "down"}}},
		}, nil
	}
	h := harnessFor(t, s)
	ctx := extraCtx(t)
	cs := h.client.CoreV1().ComponentStatuses()
	l, err := cs.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 2 || l.Items[0].Name != "etcd-0" || l.Items[1].Conditions[0].Status != corev1.ConditionTrue {
		t.Fatalf("list = %v %+v", err, l)
	}
	if _, err := cs.Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of an unknown component: %v, want 404", err)
	}
	code, _ := h.do(t, http.MethodPost, "/api/v1/componentstatuses", "application/json", `{"metadata":{"name":"x"}}`)
	if code != http.StatusMethodNotAllowed {
		t.Errorf("create answered %d, want 405", code)
	}
}

func TestHPA_V1Table_PrintedFromTheStoredVersion(t *testing.T) {
	h := newHarness(t)
	ctx := extraCtx(t)
	_, err := h.client.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
			MaxReplicas: 3}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers", nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tbl metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&tbl); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("table: %d %v", resp.StatusCode, err)
	}
	if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != "Deployment/web" || !strings.Contains(tbl.Rows[0].Cells[2].(string), "80%") {
		t.Errorf("rows = %v, want web with the implied 80%% cpu target", tbl.Rows)
	}
}
