package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validPVC() *corev1.PersistentVolumeClaim {
	return defaulted(&corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: new("local-path"),
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}})
}

func TestValidatePVC(t *testing.T) {
	runCreateCases(t, validPVC, []errCase[*corev1.PersistentVolumeClaim]{
		{"access modes required", func(p *corev1.PersistentVolumeClaim) { p.Spec.AccessModes = nil },
			field.ErrorTypeRequired, "spec.accessModes", "at least 1 access mode is required"},
		{"access mode enum", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadWriteSometimes"}
		},
			field.ErrorTypeNotSupported, "spec.accessModes", ""},
		{"ReadWriteOncePod stands alone", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.AccessModes = append(p.Spec.AccessModes, corev1.ReadWriteOncePod)
		},
			field.ErrorTypeForbidden, "spec.accessModes", "may not use ReadWriteOncePod with other access modes"},
		{"storage request required", func(p *corev1.PersistentVolumeClaim) { p.Spec.Resources.Requests = nil },
			field.ErrorTypeRequired, "spec.resources[storage]", ""},
		{"storage request positive", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
		},
			field.ErrorTypeInvalid, "spec.resources[storage]", "must be greater than zero"},
		{"volume mode enum", func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeMode = new(corev1.PersistentVolumeMode("Raw")) },
			field.ErrorTypeNotSupported, "spec.volumeMode", ""},
	})
	storedPVC := func() *corev1.PersistentVolumeClaim {
		p := stored(validPVC())
		p.Status.Phase = corev1.ClaimBound
		p.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
		return p
	}
	runUpdateCases(t, storedPVC, []updateCase[*corev1.PersistentVolumeClaim]{
		{"bound claim may grow", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		}, "", "", ""},
		{"binder may set the volume name", func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeName = "pv-1" }, "", "", ""},
		{"storage class is immutable", func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = new("fast") },
			field.ErrorTypeForbidden, "spec", "spec is immutable after creation except resources.requests"},
		{"storage may not shrink below capacity", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("512Mi")
		}, field.ErrorTypeForbidden, "spec.resources.requests.storage", "field can not be less than status.capacity"},
	})
}

func validPV() *corev1.PersistentVolume {
	return defaulted(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/pv-1"}},
	}})
}

func TestValidatePV(t *testing.T) {
	runCreateCases(t, validPV, []errCase[*corev1.PersistentVolume]{
		{"capacity required", func(p *corev1.PersistentVolume) { p.Spec.Capacity = nil }, field.ErrorTypeRequired, "spec.capacity", ""},
		{"only storage capacity", func(p *corev1.PersistentVolume) { p.Spec.Capacity[corev1.ResourceCPU] = resource.MustParse("1") },
			field.ErrorTypeNotSupported, "spec.capacity", ""},
		{"access modes required", func(p *corev1.PersistentVolume) { p.Spec.AccessModes = nil }, field.ErrorTypeRequired, "spec.accessModes", ""},
		{"reclaim policy enum", func(p *corev1.PersistentVolume) { p.Spec.PersistentVolumeReclaimPolicy = "Keep" },
			field.ErrorTypeNotSupported, "spec.persistentVolumeReclaimPolicy", ""},
		{"one volume source", func(p *corev1.PersistentVolume) { p.Spec.HostPath = nil }, field.ErrorTypeRequired, "spec", "must specify a volume type"},
		{"local volume needs node affinity", func(p *corev1.PersistentVolume) {
			p.Spec.HostPath = nil
			p.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disk"}
		}, field.ErrorTypeRequired, "spec.nodeAffinity", "Local volume requires node affinity"},
	})
	runUpdateCases(t, func() *corev1.PersistentVolume { return stored(validPV()) }, []updateCase[*corev1.PersistentVolume]{
		{"reclaim policy may change", func(p *corev1.PersistentVolume) {
			p.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		}, "", "", ""},
		{"source is immutable", func(p *corev1.PersistentVolume) { p.Spec.HostPath.Path = "/srv/other" },
			field.ErrorTypeForbidden, "spec.persistentvolumesource", "is immutable after creation"},
	})
}

func TestValidateStorageClass(t *testing.T) {
	valid := func() *storagev1.StorageClass {
		return defaulted(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: "rancher.io/local-path",
			Parameters: map[string]string{"type": "ssd"}})
	}
	runCreateCases(t, valid, []errCase[*storagev1.StorageClass]{
		{"provisioner required", func(s *storagev1.StorageClass) { s.Provisioner = "" }, field.ErrorTypeRequired, "provisioner", ""},
		{"reclaim policy Delete or Retain", func(s *storagev1.StorageClass) { s.ReclaimPolicy = new(corev1.PersistentVolumeReclaimRecycle) },
			field.ErrorTypeNotSupported, "reclaimPolicy", ""},
		{"binding mode required", func(s *storagev1.StorageClass) { s.VolumeBindingMode = nil }, field.ErrorTypeRequired, "volumeBindingMode", ""},
	})
	runUpdateCases(t, func() *storagev1.StorageClass { return stored(valid()) }, []updateCase[*storagev1.StorageClass]{
		{"labels may change", func(s *storagev1.StorageClass) { s.Labels = map[string]string{"default": "yes"} }, "", "", ""},
		{"parameters are fixed", func(s *storagev1.StorageClass) { s.Parameters["type"] = "hdd" },
			field.ErrorTypeForbidden, "parameters", "updates to parameters are forbidden."},
		{"binding mode is immutable", func(s *storagev1.StorageClass) {
			s.VolumeBindingMode = new(storagev1.VolumeBindingWaitForFirstConsumer)
		},
			field.ErrorTypeInvalid, "volumeBindingMode", "field is immutable"},
	})
}
