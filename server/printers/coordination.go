package printers

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func leasePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
			ageColumn(),
		},
		Cells: leaseCells,
	}
}

func leaseCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	l, err := typed[coordinationv1.Lease](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{l.Name, derefString(l.Spec.HolderIdentity), translateTimestampSince(l.CreationTimestamp, now)}, nil
}
