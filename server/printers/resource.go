package printers

import (
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Printers of resource.k8s.io/v1 and VolumeAttributesClass, with upstream's
// columns.

func nameAgePrinter[T any, PT interface {
	*T
	metav1.Object
}]() func() Printer {
	return func() Printer {
		return Printer{
			Columns: []metav1.TableColumnDefinition{nameColumn(), ageColumn()},
			Cells: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
				o, err := typed[T](obj)
				if err != nil {
					return nil, err
				}
				m := PT(o)
				return []interface{}{m.GetName(), translateTimestampSince(m.GetCreationTimestamp(), now)}, nil
			},
		}
	}
}

func resourceClaimPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(),
			column("State", "string", "A summary of the current state (allocated, pending, reserved, etc.)."), ageColumn()},
		Cells: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			c, err := typed[resourcev1.ResourceClaim](obj)
			if err != nil {
				return nil, err
			}
			return []interface{}{c.Name, resourceClaimState(c), translateTimestampSince(c.CreationTimestamp, now)}, nil
		},
	}
}

func resourceClaimState(c *resourcev1.ResourceClaim) string {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	switch {
	case c.Status.Allocation == nil && c.DeletionTimestamp == nil:
		states = append(states, "pending")
	case c.Status.Allocation != nil:
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	}
	return strings.Join(states, ",")
}

func resourceSlicePrinter() Printer {
	spec := resourcev1.ResourceSliceSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), column("Node", "string", spec["nodeName"]), column("Driver", "string", spec["driver"]),
			column("Pool", "string", resourcev1.ResourcePool{}.SwaggerDoc()["name"]), ageColumn()},
		Cells: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			s, err := typed[resourcev1.ResourceSlice](obj)
			if err != nil {
				return nil, err
			}
			node := "<none>"
			if s.Spec.NodeName != nil {
				node = *s.Spec.NodeName
			}
			return []interface{}{s.Name, node, s.Spec.Driver, s.Spec.Pool.Name, translateTimestampSince(s.CreationTimestamp, now)}, nil
		},
	}
}

func volumeAttributesClassPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), column("DriverName", "string", storagev1.VolumeAttributesClass{}.SwaggerDoc()["driverName"]), ageColumn()},
		Cells: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			c, err := typed[storagev1.VolumeAttributesClass](obj)
			if err != nil {
				return nil, err
			}
			return []interface{}{c.Name, c.DriverName, translateTimestampSince(c.CreationTimestamp, now)}, nil
		},
	}
}
