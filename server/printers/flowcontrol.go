package printers

import (
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// FlowSchema and PriorityLevelConfiguration (flowcontrol.apiserver.k8s.io),
// with upstream's columns. Upstream types every cell column as "string",
// whatever it holds.

func flowSchemaPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("PriorityLevel", "string", flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]),
			column("MatchingPrecedence", "string", flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"]),
			column("DistinguisherMethod", "string", flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"]),
			ageColumn(),
			column("MissingPL", "string", "references a broken or non-existent PriorityLevelConfiguration"),
		},
		Cells: flowSchemaCells,
	}
}

func flowSchemaCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	fs, err := typed[flowcontrolv1.FlowSchema](obj)
	if err != nil {
		return nil, err
	}
	method := "<none>"
	if fs.Spec.DistinguisherMethod != nil {
		method = string(fs.Spec.DistinguisherMethod.Type)
	}
	// "?" until the server has looked at the schema's priority level.
	missing := "?"
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			missing = string(c.Status)
			break
		}
	}
	return []interface{}{fs.Name, fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence), method,
		translateTimestampSince(fs.CreationTimestamp, now), missing}, nil
}

func priorityLevelConfigurationPrinter() Printer {
	queuing := flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Type", "string", flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]),
			column("NominalConcurrencyShares", "string", flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]),
			column("Queues", "string", queuing["queues"]),
			column("HandSize", "string", queuing["handSize"]),
			column("QueueLengthLimit", "string", queuing["queueLengthLimit"]),
			ageColumn(),
		},
		Cells: priorityLevelConfigurationCells,
	}
}

func priorityLevelConfigurationCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	pl, err := typed[flowcontrolv1.PriorityLevelConfiguration](obj)
	if err != nil {
		return nil, err
	}
	var shares, queues, handSize, queueLength interface{} = "<none>", "<none>", "<none>", "<none>"
	if l := pl.Spec.Limited; l != nil {
		shares = derefInt32(l.NominalConcurrencyShares)
		if q := l.LimitResponse.Queuing; q != nil {
			queues, handSize, queueLength = q.Queues, q.HandSize, q.QueueLengthLimit
		}
	}
	return []interface{}{pl.Name, string(pl.Spec.Type), shares, queues, handSize, queueLength, translateTimestampSince(pl.CreationTimestamp, now)}, nil
}
