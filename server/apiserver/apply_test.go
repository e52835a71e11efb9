package apiserver_test

import (
	"testing"

	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The conformance CRUD tests apply only labels to an object created by
// another manager; fields the configuration does not name stay as they
// are, also those whose Go type has no omitempty (a typed decode of the
// configuration would add them as zero values, owned by the applier).
func TestApply_LabelsOnly_KeepsFieldsWithoutOmitempty(t *testing.T) {
	h := newHarness(t)
	ctx := extraCtx(t)
	svms := h.client.StoragemigrationV1().StorageVersionMigrations()
	if _, err := svms.Create(ctx, &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Spec: storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "apps", Resource: "foos"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := []byte(`{"apiVersion":"storagemigration.k8s.io/v1","kind":"StorageVersionMigration","metadata":{"name":"m","labels":{"a":"b"}}}`)
	got, err := svms.Patch(ctx, "m", types.ApplyPatchType, cfg, metav1.PatchOptions{FieldManager: "test-apply", Force: ptr.To(true)})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got.Labels["a"] != "b" || got.Spec.Resource.Group != "apps" || got.Spec.Resource.Resource != "foos" {
		t.Errorf("after apply: labels %v, spec.resource %+v; want the label added and the spec kept", got.Labels, got.Spec.Resource)
	}
}
