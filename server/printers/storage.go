package printers

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	isDefaultStorageClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaIsDefaultStorageClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

func storageClassPrinter() Printer {
	doc := storagev1.StorageClass{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Provisioner", "string", doc["provisioner"]),
			column("ReclaimPolicy", "string", doc["reclaimPolicy"]),
			column("VolumeBindingMode", "string", doc["volumeBindingMode"]),
			column("AllowVolumeExpansion", "string", doc["allowVolumeExpansion"]),
			ageColumn(),
		},
		Cells: storageClassCells,
	}
}

func storageClassCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	sc, err := typed[storagev1.StorageClass](obj)
	if err != nil {
		return nil, err
	}
	name := sc.Name
	if sc.Annotations[isDefaultStorageClassAnnotation] == "true" || sc.Annotations[betaIsDefaultStorageClassAnnotation] == "true" {
		name += " (default)"
	}
	reclaim := string(corev1.PersistentVolumeReclaimDelete)
	if sc.ReclaimPolicy != nil {
		reclaim = string(*sc.ReclaimPolicy)
	}
	binding := string(storagev1.VolumeBindingImmediate)
	if sc.VolumeBindingMode != nil {
		binding = string(*sc.VolumeBindingMode)
	}
	expand := sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
	return []interface{}{name, sc.Provisioner, reclaim, binding, expand, translateTimestampSince(sc.CreationTimestamp, now)}, nil
}

func csiDriverPrinter() Printer {
	doc := storagev1.CSIDriverSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("AttachRequired", "boolean", doc["attachRequired"]),
			column("PodInfoOnMount", "boolean", doc["podInfoOnMount"]),
			column("StorageCapacity", "boolean", doc["storageCapacity"]),
			column("TokenRequests", "string", doc["tokenRequests"]),
			column("RequiresRepublish", "boolean", doc["requiresRepublish"]),
			column("Modes", "string", doc["volumeLifecycleModes"]),
			ageColumn(),
		},
		Cells: csiDriverCells,
	}
}

func csiDriverCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	d, err := typed[storagev1.CSIDriver](obj)
	if err != nil {
		return nil, err
	}
	// attachRequired defaults to true, the other flags to false.
	attach := d.Spec.AttachRequired == nil || *d.Spec.AttachRequired
	tokens := "<unset>"
	if d.Spec.TokenRequests != nil {
		audiences := make([]string, 0, len(d.Spec.TokenRequests))
		for _, t := range d.Spec.TokenRequests {
			audiences = append(audiences, t.Audience)
		}
		tokens = strings.Join(audiences, ",")
	}
	modes := make([]string, 0, len(d.Spec.VolumeLifecycleModes))
	for _, m := range d.Spec.VolumeLifecycleModes {
		modes = append(modes, string(m))
	}
	return []interface{}{
		d.Name,
		attach,
		d.Spec.PodInfoOnMount != nil && *d.Spec.PodInfoOnMount,
		d.Spec.StorageCapacity != nil && *d.Spec.StorageCapacity,
		tokens,
		d.Spec.RequiresRepublish != nil && *d.Spec.RequiresRepublish,
		orNone(strings.Join(modes, ",")),
		translateTimestampSince(d.CreationTimestamp, now),
	}, nil
}

func csiNodePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node"),
			ageColumn(),
		},
		Cells: csiNodeCells,
	}
}

func csiNodeCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	n, err := typed[storagev1.CSINode](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{n.Name, int64(len(n.Spec.Drivers)), translateTimestampSince(n.CreationTimestamp, now)}, nil
}

func csiStorageCapacityPrinter() Printer {
	doc := storagev1.CSIStorageCapacity{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("StorageClassName", "string", doc["storageClassName"]),
			column("Capacity", "string", doc["capacity"]),
		},
		Cells: csiStorageCapacityCells,
	}
}

func csiStorageCapacityCells(obj runtime.Object, _ time.Time) ([]interface{}, error) {
	c, err := typed[storagev1.CSIStorageCapacity](obj)
	if err != nil {
		return nil, err
	}
	capacity := "<unset>"
	if c.Capacity != nil {
		capacity = c.Capacity.String()
	}
	return []interface{}{c.Name, c.StorageClassName, capacity}, nil
}

func volumeAttachmentPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			// Upstream marks this column as a name too; kubectl only
			// decorates the first such column, so it has no visible effect.
			{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
			column("PV", "string", storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]),
			column("Node", "string", storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"]),
			column("Attached", "boolean", storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]),
			ageColumn(),
		},
		Cells: volumeAttachmentCells,
	}
}

func volumeAttachmentCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	va, err := typed[storagev1.VolumeAttachment](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{
		va.Name,
		va.Spec.Attacher,
		derefString(va.Spec.Source.PersistentVolumeName),
		va.Spec.NodeName,
		va.Status.Attached,
		translateTimestampSince(va.CreationTimestamp, now),
	}, nil
}
