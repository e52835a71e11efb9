package printers

import (
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func podDisruptionBudgetPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Min Available", "string", "The minimum number of pods that must be available."),
			column("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
			column("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
			ageColumn(),
		},
		Cells: podDisruptionBudgetCells,
	}
}

func podDisruptionBudgetCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	pdb, err := typed[policyv1.PodDisruptionBudget](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{
		pdb.Name,
		intOrStringOrNA(pdb.Spec.MinAvailable),
		intOrStringOrNA(pdb.Spec.MaxUnavailable),
		int64(pdb.Status.DisruptionsAllowed),
		translateTimestampSince(pdb.CreationTimestamp, now),
	}, nil
}

func intOrStringOrNA(v *intstr.IntOrString) string {
	if v == nil {
		return "N/A"
	}
	return v.String()
}
