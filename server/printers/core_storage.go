package printers

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func persistentVolumePrinter() Printer {
	spec := corev1.PersistentVolumeSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Capacity", "string", spec["capacity"]),
			column("Access Modes", "string", spec["accessModes"]),
			column("Reclaim Policy", "string", spec["persistentVolumeReclaimPolicy"]),
			column("Status", "string", status["phase"]),
			column("Claim", "string", spec["claimRef"]),
			column("StorageClass", "string", "StorageClass of the pv"),
			column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
			column("Reason", "string", status["reason"]),
			ageColumn(),
			wideColumn("VolumeMode", "string", spec["volumeMode"]),
		},
		Cells: persistentVolumeCells,
	}
}

func persistentVolumeCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	pv, err := typed[corev1.PersistentVolume](obj)
	if err != nil {
		return nil, err
	}
	claim := ""
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	class := pv.Spec.StorageClassName
	if c, found := pv.Annotations[corev1.BetaStorageClassAnnotation]; found {
		class = c
	}
	return []interface{}{
		pv.Name,
		size.String(),
		accessModesString(pv.Spec.AccessModes),
		string(pv.Spec.PersistentVolumeReclaimPolicy),
		phase,
		claim,
		class,
		orUnset(pv.Spec.VolumeAttributesClassName),
		pv.Status.Reason,
		translateTimestampSince(pv.CreationTimestamp, now),
		volumeModeString(pv.Spec.VolumeMode),
	}, nil
}

func persistentVolumeClaimPrinter() Printer {
	spec := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", status["phase"]),
			column("Volume", "string", spec["volumeName"]),
			column("Capacity", "string", status["capacity"]),
			column("Access Modes", "string", status["accessModes"]),
			column("StorageClass", "string", "StorageClass of the pvc"),
			column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
			ageColumn(),
			wideColumn("VolumeMode", "string", spec["volumeMode"]),
		},
		Cells: persistentVolumeClaimCells,
	}
}

func persistentVolumeClaimCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	pvc, err := typed[corev1.PersistentVolumeClaim](obj)
	if err != nil {
		return nil, err
	}
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	// Capacity and access modes are those of the bound volume, so they stay
	// blank until the claim is bound.
	capacity, accessModes := "", ""
	if pvc.Spec.VolumeName != "" {
		accessModes = accessModesString(pvc.Status.AccessModes)
		q := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity = q.String()
	}
	class := derefString(pvc.Spec.StorageClassName)
	if c, found := pvc.Annotations[corev1.BetaStorageClassAnnotation]; found {
		class = c
	}
	return []interface{}{
		pvc.Name,
		phase,
		pvc.Spec.VolumeName,
		capacity,
		accessModes,
		class,
		orUnset(pvc.Spec.VolumeAttributesClassName),
		translateTimestampSince(pvc.CreationTimestamp, now),
		volumeModeString(pvc.Spec.VolumeMode),
	}, nil
}

// accessModesString abbreviates access modes in a fixed order whatever the
// order (or duplicates) in the object.
func accessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"},
		{corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"},
		{corev1.ReadWriteOncePod, "RWOP"},
	} {
		if slices.Contains(modes, m.mode) {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

func volumeModeString(mode *corev1.PersistentVolumeMode) string {
	if mode == nil {
		return "<unset>"
	}
	return string(*mode)
}

func orUnset(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return *s
}
