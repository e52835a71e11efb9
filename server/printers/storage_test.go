package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestPersistentVolumeCells(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	tests := []struct {
		name string
		pv   func() *corev1.PersistentVolume
		want []interface{}
	}{
		{"bound volume", func() *corev1.PersistentVolume {
			return &corev1.PersistentVolume{
				ObjectMeta: objMeta("pv-1", time.Hour),
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					ClaimRef:                      &corev1.ObjectReference{Namespace: "db", Name: "data"},
					StorageClassName:              "local-path",
					VolumeMode:                    &block,
					VolumeAttributesClassName:     ptr("gold"),
				},
				Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
			}
		}, []interface{}{"pv-1", "10Gi", "RWO,ROX,RWOP", "Retain", "Bound", "db/data", "local-path", "gold", "", "60m", "Block"}},
		{"released volume being deleted, class from the beta annotation", func() *corev1.PersistentVolume {
			pv := &corev1.PersistentVolume{
				ObjectMeta: objMeta("pv-2", time.Hour),
				Spec:       corev1.PersistentVolumeSpec{StorageClassName: "ignored"},
				Status:     corev1.PersistentVolumeStatus{Phase: corev1.VolumeFailed, Reason: "Recycle failed"},
			}
			pv.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "slow"}
			pv.DeletionTimestamp = agoPtr(time.Second)
			return pv
		}, []interface{}{"pv-2", "0", "", "", "Terminating", "", "slow", "<unset>", "Recycle failed", "60m", "<unset>"}},
	}
	gk := schema.GroupKind{Kind: "PersistentVolume"}
	p, _ := For(gk)
	if got, want := header(p), "Name;Capacity;Access Modes;Reclaim Policy;Status;Claim;StorageClass;VolumeAttributesClass;Reason;Age;*VolumeMode"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, gk, tt.pv(), tt.want)
		})
	}
}

func TestPersistentVolumeClaimCells(t *testing.T) {
	fs := corev1.PersistentVolumeFilesystem
	tests := []struct {
		name string
		pvc  func() *corev1.PersistentVolumeClaim
		want []interface{}
	}{
		{"bound claim shows the volume's capacity", func() *corev1.PersistentVolumeClaim {
			return &corev1.PersistentVolumeClaim{
				ObjectMeta: objMeta("data", 2*time.Hour),
				Spec: corev1.PersistentVolumeClaimSpec{
					VolumeName:       "pv-1",
					StorageClassName: ptr("local-path"),
					VolumeMode:       &fs,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
				Status: corev1.PersistentVolumeClaimStatus{
					Phase:       corev1.ClaimBound,
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				},
			}
		}, []interface{}{"data", "Bound", "pv-1", "10Gi", "RWO", "local-path", "<unset>", "120m", "Filesystem"}},
		{"pending claim has no capacity", func() *corev1.PersistentVolumeClaim {
			return &corev1.PersistentVolumeClaim{
				ObjectMeta: objMeta("data", 2*time.Hour),
				Spec:       corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
				Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
			}
		}, []interface{}{"data", "Pending", "", "", "", "", "<unset>", "120m", "<unset>"}},
		{"claim being deleted", func() *corev1.PersistentVolumeClaim {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data", 2*time.Hour), Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
			pvc.DeletionTimestamp = agoPtr(time.Second)
			pvc.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "beta"}
			return pvc
		}, []interface{}{"data", "Terminating", "", "", "", "beta", "<unset>", "120m", "<unset>"}},
	}
	gk := schema.GroupKind{Kind: "PersistentVolumeClaim"}
	p, _ := For(gk)
	if got, want := header(p), "Name;Status;Volume;Capacity;Access Modes;StorageClass;VolumeAttributesClass;Age;*VolumeMode"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, gk, tt.pvc(), tt.want)
		})
	}
}

func TestStorageGroupCells(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	defaultClass := objMeta("local-path", time.Hour)
	defaultClass.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	betaDefault := objMeta("old", time.Hour)
	betaDefault.Annotations = map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}
	tests := []struct {
		name   string
		kind   string
		header string
		obj    runtime.Object
		want   []interface{}
	}{
		{"default storage class", "StorageClass", "Name;Provisioner;ReclaimPolicy;VolumeBindingMode;AllowVolumeExpansion;Age",
			&storagev1.StorageClass{ObjectMeta: defaultClass, Provisioner: "rancher.io/local-path", ReclaimPolicy: &retain, VolumeBindingMode: &wait, AllowVolumeExpansion: ptr(true)},
			[]interface{}{"local-path (default)", "rancher.io/local-path", "Retain", "WaitForFirstConsumer", true, "60m"}},
		{"storage class defaults", "StorageClass", "Name;Provisioner;ReclaimPolicy;VolumeBindingMode;AllowVolumeExpansion;Age",
			&storagev1.StorageClass{ObjectMeta: betaDefault, Provisioner: "x"},
			[]interface{}{"old (default)", "x", "Delete", "Immediate", false, "60m"}},
		{"csi driver", "CSIDriver", "Name;AttachRequired;PodInfoOnMount;StorageCapacity;TokenRequests;RequiresRepublish;Modes;Age",
			&storagev1.CSIDriver{ObjectMeta: objMeta("csi.example.com", time.Hour), Spec: storagev1.CSIDriverSpec{
				AttachRequired: ptr(false), PodInfoOnMount: ptr(true), StorageCapacity: ptr(true), RequiresRepublish: ptr(true),
				TokenRequests:        []storagev1.TokenRequest{{Audience: "a"}, {Audience: "b"}},
				VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
			}},
			[]interface{}{"csi.example.com", false, true, true, "a,b", true, "Persistent,Ephemeral", "60m"}},
		{"csi driver defaults", "CSIDriver", "Name;AttachRequired;PodInfoOnMount;StorageCapacity;TokenRequests;RequiresRepublish;Modes;Age",
			&storagev1.CSIDriver{ObjectMeta: objMeta("d", time.Hour)},
			[]interface{}{"d", true, false, false, "<unset>", false, "<none>", "60m"}},
		{"csi node", "CSINode", "Name;Drivers;Age",
			&storagev1.CSINode{ObjectMeta: objMeta("node-1", time.Hour), Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "a"}, {Name: "b"}}}},
			[]interface{}{"node-1", int64(2), "60m"}},
		{"csi storage capacity", "CSIStorageCapacity", "Name;StorageClassName;Capacity",
			&storagev1.CSIStorageCapacity{ObjectMeta: objMeta("cap", time.Hour), StorageClassName: "fast", Capacity: ptr(resource.MustParse("100Gi"))},
			[]interface{}{"cap", "fast", "100Gi"}},
		{"csi storage capacity unset", "CSIStorageCapacity", "Name;StorageClassName;Capacity",
			&storagev1.CSIStorageCapacity{ObjectMeta: objMeta("cap", time.Hour)},
			[]interface{}{"cap", "", "<unset>"}},
		{"volume attachment", "VolumeAttachment", "Name;Attacher;PV;Node;Attached;Age",
			&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va", CreationTimestamp: ago(time.Hour)},
				Spec:   storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "node-1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr("pv-1")}},
				Status: storagev1.VolumeAttachmentStatus{Attached: true}},
			[]interface{}{"va", "csi.example.com", "pv-1", "node-1", true, "60m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gk := schema.GroupKind{Group: "storage.k8s.io", Kind: tt.kind}
			p, _ := For(gk)
			if got := header(p); got != tt.header {
				t.Errorf("header %q, want %q", got, tt.header)
			}
			assertCells(t, gk, tt.obj, tt.want)
		})
	}
}
