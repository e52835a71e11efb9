package printers

import (
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestResourceClaimCells_StateSummarizesAllocationAndReservation(t *testing.T) {
	gk := schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceClaim"}
	deleted := metav1.Now()
	cases := []struct {
		name  string
		claim resourcev1.ResourceClaim
		want  string
	}{
		{"new", resourcev1.ResourceClaim{}, "pending"},
		{"allocated", resourcev1.ResourceClaim{Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{}}}, "allocated"},
		{"in use", resourcev1.ResourceClaim{Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}}}, "allocated,reserved"},
		{"deleted unallocated", resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleted}}, "deleted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.claim
			c.ObjectMeta.Name, c.ObjectMeta.CreationTimestamp = "c", ago(time.Hour)
			assertCells(t, gk, &c, []interface{}{"c", tc.want, "60m"})
		})
	}
}

func TestResourceSliceAndVACCells_UpstreamColumns(t *testing.T) {
	m := metav1.ObjectMeta{Name: "s", CreationTimestamp: ago(2 * time.Hour)}
	assertCells(t, schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceSlice"}, &resourcev1.ResourceSlice{ObjectMeta: m,
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr("n1"), Pool: resourcev1.ResourcePool{Name: "pool"}}},
		[]interface{}{"s", "n1", "gpu.example.com", "pool", "120m"})
	assertCells(t, schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceSlice"}, &resourcev1.ResourceSlice{ObjectMeta: m,
		Spec: resourcev1.ResourceSliceSpec{Driver: "d", AllNodes: ptr(true), Pool: resourcev1.ResourcePool{Name: "p"}}},
		[]interface{}{"s", "<none>", "d", "p", "120m"})
	assertCells(t, schema.GroupKind{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}, &storagev1.VolumeAttributesClass{ObjectMeta: m, DriverName: "csi.example.com"},
		[]interface{}{"s", "csi.example.com", "120m"})
}
