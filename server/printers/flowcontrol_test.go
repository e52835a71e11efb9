package printers

import (
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestFlowcontrolPrinters_UpstreamColumnsAndCells(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-2 * time.Hour))
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "probes", CreationTimestamp: created},
		Spec:       flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 2, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "exempt"}},
		Status:     flowcontrolv1.FlowSchemaStatus{Conditions: []flowcontrolv1.FlowSchemaCondition{{Type: "Dangling", Status: "False"}}},
	}
	queuing := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "workload-low", CreationTimestamp: created},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Limited", Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr(int32(100)),
			LimitResponse:            flowcontrolv1.LimitResponse{Type: "Queue", Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 128, HandSize: 6, QueueLengthLimit: 50}},
		}},
	}
	exempt := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "exempt", CreationTimestamp: created},
		Spec:       flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Exempt", Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{}},
	}
	tests := []struct {
		name    string
		kind    string
		obj     runtime.Object
		columns []string
		cells   []interface{}
	}{
		{"flow schema without distinguisher", "FlowSchema", fs,
			[]string{"Name", "PriorityLevel", "MatchingPrecedence", "DistinguisherMethod", "Age", "MissingPL"},
			[]interface{}{"probes", "exempt", int64(2), "<none>", "120m", "False"}},
		{"queuing level", "PriorityLevelConfiguration", queuing,
			[]string{"Name", "Type", "NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit", "Age"},
			[]interface{}{"workload-low", "Limited", int32(100), int32(128), int32(6), int32(50), "120m"}},
		{"exempt level", "PriorityLevelConfiguration", exempt, nil,
			[]interface{}{"exempt", "Exempt", "<none>", "<none>", "<none>", "<none>", "120m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := For(schema.GroupKind{Group: "flowcontrol.apiserver.k8s.io", Kind: tt.kind})
			if !ok {
				t.Fatalf("no printer for %s", tt.kind)
			}
			for i, c := range tt.columns {
				if p.Columns[i].Name != c {
					t.Errorf("column %d = %q, want %q", i, p.Columns[i].Name, c)
				}
			}
			rows, err := Rows(p, []runtime.Object{tt.obj}, now)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.cells {
				if got := rows[0].Cells[i]; got != want {
					t.Errorf("cell %d = %#v, want %#v", i, got, want)
				}
			}
		})
	}
}
