package printers

import (
	"time"

	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PriorityClass (scheduling.k8s.io) and RuntimeClass (node.k8s.io) both
// decide where and how pods run.

func priorityClassPrinter() Printer {
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Value", "integer", doc["value"]),
			column("Global-Default", "boolean", doc["globalDefault"]),
			ageColumn(),
			// Upstream gives this wide-only cell no Priority, so kubectl
			// shows it always.
			column("PreemptionPolicy", "string", doc["preemptionPolicy"]),
		},
		Cells: priorityClassCells,
	}
}

func priorityClassCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	pc, err := typed[schedulingv1.PriorityClass](obj)
	if err != nil {
		return nil, err
	}
	policy := ""
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, translateTimestampSince(pc.CreationTimestamp, now), policy}, nil
}

func runtimeClassPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			// Upstream looks this description up in ObjectMeta's docs, where
			// it does not exist, so it is empty there too.
			column("Handler", "string", objectMetaDoc("handler")),
			ageColumn(),
		},
		Cells: runtimeClassCells,
	}
}

func runtimeClassCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	rc, err := typed[nodev1.RuntimeClass](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{rc.Name, rc.Handler, translateTimestampSince(rc.CreationTimestamp, now)}, nil
}
