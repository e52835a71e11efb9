package printers

import (
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// testNow is the fixed "now" every test prints against.
var testNow = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

// ago returns a timestamp d before testNow.
func ago(d time.Duration) metav1.Time {
	return metav1.NewTime(testNow.Add(-d))
}

func agoPtr(d time.Duration) *metav1.Time {
	t := ago(d)
	return &t
}

func objMeta(name string, age time.Duration) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: ago(age)}
}

func ptr[T any](v T) *T { return &v }

// cellsOf prints one object with the printer registered for gk.
func cellsOf(t *testing.T, gk schema.GroupKind, obj runtime.Object) []interface{} {
	t.Helper()
	p, ok := For(gk)
	if !ok {
		t.Fatalf("For(%v): no dedicated printer", gk)
	}
	rows, err := Rows(p, []runtime.Object{obj}, testNow)
	if err != nil {
		t.Fatalf("Rows: %v", err)
	}
	if len(rows) != 1 {
		t.Fatalf("Rows returned %d rows, want 1", len(rows))
	}
	return rows[0].Cells
}

func assertCells(t *testing.T, gk schema.GroupKind, obj runtime.Object, want []interface{}) {
	t.Helper()
	got := cellsOf(t, gk, obj)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cells mismatch\n got: %#v\nwant: %#v", got, want)
	}
}

// header renders a printer's columns as "Name;Ready;...;*IP", wide columns
// starred, to compare whole headers at once.
func header(p Printer) string {
	names := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		names[i] = c.Name
		if c.Priority == 1 {
			names[i] = "*" + c.Name
		}
	}
	return strings.Join(names, ";")
}

// sampleObjects holds one minimal object per kind with a printer; the
// registry test fails when a kind is added without one here.
func sampleObjects() map[schema.GroupKind]runtime.Object {
	m := objMeta("sample", time.Hour)
	return map[schema.GroupKind]runtime.Object{
		{Kind: "Pod"}:                   &corev1.Pod{ObjectMeta: m},
		{Kind: "Node"}:                  &corev1.Node{ObjectMeta: m},
		{Kind: "Namespace"}:             &corev1.Namespace{ObjectMeta: m},
		{Kind: "Service"}:               &corev1.Service{ObjectMeta: m},
		{Kind: "Endpoints"}:             &corev1.Endpoints{ObjectMeta: m},
		{Kind: "ConfigMap"}:             &corev1.ConfigMap{ObjectMeta: m},
		{Kind: "Secret"}:                &corev1.Secret{ObjectMeta: m},
		{Kind: "ServiceAccount"}:        &corev1.ServiceAccount{ObjectMeta: m},
		{Kind: "Event"}:                 &corev1.Event{ObjectMeta: m},
		{Kind: "PersistentVolume"}:      &corev1.PersistentVolume{ObjectMeta: m},
		{Kind: "PersistentVolumeClaim"}: &corev1.PersistentVolumeClaim{ObjectMeta: m},
		{Kind: "ResourceQuota"}:         &corev1.ResourceQuota{ObjectMeta: m},
		{Kind: "ReplicationController"}: &corev1.ReplicationController{ObjectMeta: m},
		{Kind: "PodTemplate"}:           &corev1.PodTemplate{ObjectMeta: m},
		{Kind: "ComponentStatus"}:       &corev1.ComponentStatus{ObjectMeta: m},

		{Group: "events.k8s.io", Kind: "Event"}:                 &eventsv1.Event{ObjectMeta: m},
		{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:      &discoveryv1.EndpointSlice{ObjectMeta: m},
		{Group: "coordination.k8s.io", Kind: "Lease"}:           &coordinationv1.Lease{ObjectMeta: m},
		{Group: "policy", Kind: "PodDisruptionBudget"}:          &policyv1.PodDisruptionBudget{ObjectMeta: m},
		{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:     &schedulingv1.PriorityClass{ObjectMeta: m},
		{Group: "node.k8s.io", Kind: "RuntimeClass"}:            &nodev1.RuntimeClass{ObjectMeta: m},
		{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: m},

		{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                 &flowcontrolv1.FlowSchema{ObjectMeta: m},
		{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}: &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: m},

		{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}: &certificatesv1.CertificateSigningRequest{ObjectMeta: m},
		{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:        &certificatesv1.ClusterTrustBundle{ObjectMeta: m},
		{Group: "certificates.k8s.io", Kind: "PodCertificateRequest"}:     &certificatesv1.PodCertificateRequest{ObjectMeta: m},

		{Group: "apps", Kind: "Deployment"}:         &appsv1.Deployment{ObjectMeta: m},
		{Group: "apps", Kind: "ReplicaSet"}:         &appsv1.ReplicaSet{ObjectMeta: m},
		{Group: "apps", Kind: "StatefulSet"}:        &appsv1.StatefulSet{ObjectMeta: m},
		{Group: "apps", Kind: "DaemonSet"}:          &appsv1.DaemonSet{ObjectMeta: m},
		{Group: "apps", Kind: "ControllerRevision"}: &appsv1.ControllerRevision{ObjectMeta: m},

		{Group: "batch", Kind: "Job"}:     &batchv1.Job{ObjectMeta: m},
		{Group: "batch", Kind: "CronJob"}: &batchv1.CronJob{ObjectMeta: m},

		{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:        &rbacv1.RoleBinding{ObjectMeta: m},
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: &rbacv1.ClusterRoleBinding{ObjectMeta: m},

		{Group: "storage.k8s.io", Kind: "StorageClass"}:       &storagev1.StorageClass{ObjectMeta: m},
		{Group: "storage.k8s.io", Kind: "CSIDriver"}:          &storagev1.CSIDriver{ObjectMeta: m},
		{Group: "storage.k8s.io", Kind: "CSINode"}:            &storagev1.CSINode{ObjectMeta: m},
		{Group: "storage.k8s.io", Kind: "CSIStorageCapacity"}: &storagev1.CSIStorageCapacity{ObjectMeta: m},
		{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:   &storagev1.VolumeAttachment{ObjectMeta: m},

		// resource_test.go
		{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:  &storagev1.VolumeAttributesClass{ObjectMeta: m},
		{Group: "resource.k8s.io", Kind: "DeviceClass"}:           &resourcev1.DeviceClass{ObjectMeta: m},
		{Group: "resource.k8s.io", Kind: "ResourceClaim"}:         &resourcev1.ResourceClaim{ObjectMeta: m},
		{Group: "resource.k8s.io", Kind: "ResourceClaimTemplate"}: &resourcev1.ResourceClaimTemplate{ObjectMeta: m},
		{Group: "resource.k8s.io", Kind: "ResourceSlice"}:         &resourcev1.ResourceSlice{ObjectMeta: m},

		{Group: "networking.k8s.io", Kind: "Ingress"}:       &networkingv1.Ingress{ObjectMeta: m},
		{Group: "networking.k8s.io", Kind: "IngressClass"}:  &networkingv1.IngressClass{ObjectMeta: m},
		{Group: "networking.k8s.io", Kind: "NetworkPolicy"}: &networkingv1.NetworkPolicy{ObjectMeta: m},
		{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:   &networkingv1.ServiceCIDR{ObjectMeta: m},
		{Group: "networking.k8s.io", Kind: "IPAddress"}:     &networkingv1.IPAddress{ObjectMeta: m},

		{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: m},
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: m},
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: m},
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: m},
		{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: m},
		{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: m},

		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: &apiextensionsv1.CustomResourceDefinition{ObjectMeta: m}, // apiextensions_test.go
		{Group: "apiregistration.k8s.io", Kind: "APIService"}:             &apiregistrationv1.APIService{ObjectMeta: m},             // apiregistration_test.go
	}
}

func TestEveryRegisteredKindHasASampleObject(t *testing.T) {
	samples := sampleObjects()
	for gk := range registry {
		if _, ok := samples[gk]; !ok {
			t.Errorf("kind %v has a printer but no sample object in the tests", gk)
		}
	}
	for gk := range samples {
		if _, ok := registry[gk]; !ok {
			t.Errorf("sample object for %v, which has no printer", gk)
		}
	}
}

// The column kubectl prefixes with the kind ("pod/web") is the first one with
// Format "name"; it must be the object's name.
func TestEveryPrinterHasOneNameColumnAndItIsFirstNamedColumn(t *testing.T) {
	for gk := range registry {
		p, _ := For(gk)
		nameColumns, firstFormatted := 0, -1
		for i, c := range p.Columns {
			if c.Name == "Name" && c.Format == "name" && c.Type == "string" {
				nameColumns++
			}
			if c.Format == "name" && firstFormatted < 0 {
				firstFormatted = i
			}
		}
		if nameColumns != 1 {
			t.Errorf("%v: %d Name columns with Format name, want 1", gk, nameColumns)
			continue
		}
		if p.Columns[firstFormatted].Name != "Name" {
			t.Errorf("%v: first name-format column is %q", gk, p.Columns[firstFormatted].Name)
		}
		// Events are the one kind upstream prints with NAME last and wide-only.
		if gk.Kind != "Event" && firstFormatted != 0 {
			t.Errorf("%v: Name column at index %d, want 0", gk, firstFormatted)
		}
	}
}

func TestEveryPrinterNameCellIsTheObjectName(t *testing.T) {
	for gk, obj := range sampleObjects() {
		p, _ := For(gk)
		cells := cellsOf(t, gk, obj)
		for i, c := range p.Columns {
			if c.Name == "Name" && c.Format == "name" && cells[i] != "sample" {
				t.Errorf("%v: name cell %v, want sample", gk, cells[i])
			}
		}
	}
}

func TestEveryPrinterReturnsOneCellPerColumn(t *testing.T) {
	for gk, obj := range sampleObjects() {
		p, _ := For(gk)
		cells, err := p.Cells(obj, testNow)
		if err != nil {
			t.Errorf("%v: %v", gk, err)
			continue
		}
		if len(cells) != len(p.Columns) {
			t.Errorf("%v: %d cells for %d columns", gk, len(cells), len(p.Columns))
		}
	}
}

func TestNameAndAgeColumnsUseObjectMetaDocs(t *testing.T) {
	nameDoc := metav1.ObjectMeta{}.SwaggerDoc()["name"]
	ageDoc := metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]
	if nameDoc == "" || ageDoc == "" {
		t.Fatal("ObjectMeta swagger docs are empty")
	}
	for gk := range registry {
		p, _ := For(gk)
		for _, c := range p.Columns {
			if c.Name == "Name" && c.Description != nameDoc {
				t.Errorf("%v: Name description %q", gk, c.Description)
			}
			if c.Name == "Age" && (c.Description != ageDoc || c.Type != "string") {
				t.Errorf("%v: Age column %+v", gk, c)
			}
		}
	}
}

func TestRowsRejectsObjectsItCannotPrint(t *testing.T) {
	for gk := range registry {
		p, _ := For(gk)
		wrong := runtime.Object(&corev1.Secret{})
		if gk == (schema.GroupKind{Kind: "Secret"}) {
			wrong = &corev1.Pod{}
		}
		cases := map[string][]runtime.Object{
			"wrong type":        {wrong},
			"nil interface":     {nil},
			"typed nil pointer": {nilOfSampleType(gk)},
		}
		for name, objs := range cases {
			rows, err := Rows(p, objs, testNow)
			if err == nil {
				t.Errorf("%v, %s: no error, rows %v", gk, name, rows)
			}
		}
	}
}

// nilOfSampleType returns a nil pointer of the kind's own Go type.
func nilOfSampleType(gk schema.GroupKind) runtime.Object {
	obj := sampleObjects()[gk]
	return reflect.Zero(reflect.TypeOf(obj)).Interface().(runtime.Object)
}

func TestRowsRejectsNilObjectsForTheDefaultPrinter(t *testing.T) {
	p, _ := For(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"})
	for name, obj := range map[string]runtime.Object{"nil interface": nil, "typed nil": (*rbacv1.Role)(nil)} {
		if _, err := Rows(p, []runtime.Object{obj}, testNow); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRowsRejectsAPrinterWithoutCells(t *testing.T) {
	if _, err := Rows(Printer{}, []runtime.Object{&corev1.Pod{}}, testNow); err == nil {
		t.Error("no error for a printer without Cells")
	}
}

func TestRowsKeepsInputOrderAndLeavesObjectEmpty(t *testing.T) {
	p, _ := For(schema.GroupKind{Kind: "Namespace"})
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: objMeta("b", time.Hour)},
		&corev1.Namespace{ObjectMeta: objMeta("a", time.Hour)},
	}
	rows, err := Rows(p, objs, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Cells[0] != "b" || rows[1].Cells[0] != "a" {
		t.Fatalf("rows %v", rows)
	}
	for _, r := range rows {
		if r.Object.Raw != nil || r.Object.Object != nil {
			t.Errorf("row object filled: %v", r.Object)
		}
	}
}

func TestDefaultPrinterIsNameAndCreatedAt(t *testing.T) {
	kinds := []schema.GroupKind{
		{Group: "rbac.authorization.k8s.io", Kind: "Role"},
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
		{Kind: "LimitRange"},
		{Group: "example.com", Kind: "Widget"},
	}
	for _, gk := range kinds {
		p, ok := For(gk)
		if ok {
			t.Errorf("%v: ok=true, want the default printer", gk)
		}
		if got := header(p); got != "Name;Created At" {
			t.Errorf("%v: header %q", gk, got)
		}
		if p.Columns[1].Type != "date" || p.Columns[0].Format != "name" {
			t.Errorf("%v: columns %+v", gk, p.Columns)
		}
	}
}

func TestDefaultPrinterCells(t *testing.T) {
	created := metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.FixedZone("x", 3600)))
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("example.com/v1")
	cr.SetKind("Widget")
	cr.SetName("w1")
	cr.SetCreationTimestamp(created)
	tests := []struct {
		name string
		obj  runtime.Object
		want []interface{}
	}{
		{"typed role prints UTC RFC 3339", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", CreationTimestamp: created}}, []interface{}{"r", "2024-05-06T06:08:09Z"}},
		{"unstructured custom resource", cr, []interface{}{"w1", "2024-05-06T06:08:09Z"}},
		{"zero timestamp", &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, []interface{}{"l", "0001-01-01T00:00:00Z"}},
	}
	p, _ := For(schema.GroupKind{Group: "example.com", Kind: "Widget"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := Rows(p, []runtime.Object{tt.obj}, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rows[0].Cells, tt.want) {
				t.Errorf("got %#v, want %#v", rows[0].Cells, tt.want)
			}
		})
	}
}

func TestDefaultPrinterRejectsObjectsWithoutMetadata(t *testing.T) {
	p, _ := For(schema.GroupKind{Group: "example.com", Kind: "Widget"})
	if _, err := Rows(p, []runtime.Object{&metav1.Status{}}, testNow); err == nil {
		t.Error("no error for an object without ObjectMeta")
	}
}

func TestUnstructuredObjectsOfAPrintedKindUseTheTypedPrinter(t *testing.T) {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: objMeta("web", 2*time.Hour),
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Kind: "Pod"}
	want := cellsOf(t, gk, pod)
	assertCells(t, gk, &unstructured.Unstructured{Object: u}, want)
}

func TestUnstructuredObjectThatDoesNotConvertIsAnError(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]interface{}{"name": "bad"},
		"spec":     map[string]interface{}{"containers": "not-a-list"},
	}}
	p, _ := For(schema.GroupKind{Kind: "Pod"})
	if _, err := Rows(p, []runtime.Object{u}, testNow); err == nil {
		t.Error("no error for an unconvertible unstructured pod")
	}
}

func TestUnstructuredObjectOfAnotherKindIsAnError(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	u.SetName("s")
	p, _ := For(schema.GroupKind{Kind: "Pod"})
	if _, err := Rows(p, []runtime.Object{u}, testNow); err == nil {
		t.Error("no error for an unstructured Secret given to the pod printer")
	}
}

func TestForReturnsFreshColumnsEachCall(t *testing.T) {
	gk := schema.GroupKind{Kind: "Pod"}
	a, _ := For(gk)
	a.Columns[0].Name = "changed"
	b, _ := For(gk)
	if b.Columns[0].Name != "Name" {
		t.Error("changing one printer's columns changed another's")
	}
}
