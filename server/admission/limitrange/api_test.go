package limitrange_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"skiff/server/admission/limitrange"
	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/storage"
	"skiff/store"
)

// cacheLister reads LimitRanges from the test server's watch cache after
// it has caught up with the store, as the server's lookups are meant to.
type cacheLister struct{ srv **apitest.Server }

func (l cacheLister) ListLimitRanges(ctx context.Context, ns string) ([]*corev1.LimitRange, error) {
	s := *l.srv
	if err := s.Storage.Cache().WaitCurrent(ctx); err != nil {
		return nil, err
	}
	res, _ := s.Registry.Lookup("", "v1", "limitranges")
	entries, _, err := s.Storage.Cache().List(res, storage.Predicate{Namespace: ns})
	if err != nil {
		return nil, err
	}
	var out []*corev1.LimitRange
	for _, e := range entries {
		out = append(out, e.Obj.(*corev1.LimitRange))
	}
	return out, nil
}

func start(t *testing.T) kubernetes.Interface {
	t.Helper()
	var srv *apitest.Server
	srv = apitest.Start(t, apitest.Options{Admission: func(store.Store) []apiserver.Admitter {
		return []apiserver.Admitter{limitrange.Plugin{LimitRanges: cacheLister{&srv}}}
	}})
	c := kubernetes.NewForConfigOrDie(srv.Config(nil))
	if _, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func resources(cpu, memory, eph string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory, corev1.ResourceEphemeralStorage: eph} {
		if v != "" {
			l[name] = resource.MustParse(v)
		}
	}
	return l
}

func testPod(name string, requests, limits corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}}}}
}

func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if o, ok := b[n]; !ok || o.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// TestAPI_ConformanceFlow_DefaultsAppliedAndViolationsForbidden walks the
// conformance test "should create a LimitRange with defaults and ensure pod
// has those defaults applied" against a real API server.
func TestAPI_ConformanceFlow_DefaultsAppliedAndViolationsForbidden(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	pods := c.CoreV1().Pods("ns")
	lr, err := c.CoreV1().LimitRanges("ns").Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limit-range"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Min:            resources("50m", "100Mi", "100Gi"),
			Max:            resources("500m", "500Mi", "500Gi"),
			Default:        resources("500m", "500Mi", "500Gi"),
			DefaultRequest: resources("100m", "200Mi", "200Gi"),
		}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name                   string
		pod                    *corev1.Pod
		wantRequests, wantLims corev1.ResourceList
		wantErr                string
	}{
		{name: "no resources", pod: testPod("pod-no-resources", nil, nil),
			wantRequests: resources("100m", "200Mi", "200Gi"), wantLims: resources("500m", "500Mi", "500Gi")},
		{name: "partial resources", pod: testPod("pod-partial-resources", resources("", "150Mi", "150Gi"), resources("300m", "", "")),
			wantRequests: resources("300m", "150Mi", "150Gi"), wantLims: resources("300m", "500Mi", "500Gi")},
		{name: "less than min", pod: testPod("pfpod", resources("10m", "50Mi", "50Gi"), nil),
			wantErr: `pods "pfpod" is forbidden: [minimum cpu usage per Container is 50m, but request is 10m, ` +
				`minimum ephemeral-storage usage per Container is 100Gi, but request is 50Gi, minimum memory usage per Container is 100Mi, but request is 50Mi]`},
		{name: "more than max", pod: testPod("pfpod", resources("600m", "600Mi", "600Gi"), nil),
			wantErr: `pods "pfpod" is forbidden: [maximum cpu usage per Container is 500m, but request is 600m, ` +
				`maximum ephemeral-storage usage per Container is 500Gi, but request is 600Gi, maximum memory usage per Container is 500Mi, but request is 600Mi]`},
	}
	for _, s := range steps {
		got, err := pods.Create(ctx, s.pod, metav1.CreateOptions{})
		if s.wantErr != "" {
			if !apierrors.IsForbidden(err) || err.Error() != s.wantErr {
				t.Errorf("%s: Create = %v, want 403 %s", s.name, err, s.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got, err = pods.Get(ctx, got.Name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		r := got.Spec.Containers[0].Resources
		if !sameList(r.Requests, s.wantRequests) || !sameList(r.Limits, s.wantLims) {
			t.Errorf("%s: resources = %v, want requests %v limits %v", s.name, r, s.wantRequests, s.wantLims)
		}
		if !strings.HasPrefix(got.Annotations[limitrange.Annotation], "LimitRanger plugin set: ") {
			t.Errorf("%s: annotation = %q", s.name, got.Annotations[limitrange.Annotation])
		}
	}

	// Lowering min lets the small pod in; deleting the range lets the big one in.
	lr.Spec.Limits[0].Min = resources("9m", "49Mi", "49Gi")
	if _, err := c.CoreV1().LimitRanges("ns").Update(ctx, lr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, testPod("pfpod", resources("10m", "50Mi", "50Gi"), nil), metav1.CreateOptions{}); err != nil {
		t.Errorf("pod above the lowered min: %v", err)
	}
	if err := c.CoreV1().LimitRanges("ns").Delete(ctx, lr.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, testPod("pfpod2", resources("600m", "600Mi", "600Gi"), nil), metav1.CreateOptions{}); err != nil {
		t.Errorf("pod above the deleted max: %v", err)
	}
}

// TestAPI_Claims_ForbiddenStatusNamesTheClaim checks the 403 a client sees
// for a claim over a LimitRange's storage max.
func TestAPI_Claims_ForbiddenStatusNamesTheClaim(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	if _, err := c.CoreV1().LimitRanges("ns").Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "storage"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypePersistentVolumeClaim,
			Max: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}}}
	_, err := c.CoreV1().PersistentVolumeClaims("ns").Create(ctx, pvc, metav1.CreateOptions{})
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Create = %v, want 403", err)
	}
	status = err.(apierrors.APIStatus)
	want := `persistentvolumeclaims "data" is forbidden: maximum storage usage per PersistentVolumeClaim is 1Gi, but request is 2Gi`
	if d := status.Status().Details; status.Status().Message != want || d == nil || d.Name != "data" || d.Kind != "persistentvolumeclaims" {
		t.Errorf("status = %+v, want message %q naming the claim", status.Status(), want)
	}
}
