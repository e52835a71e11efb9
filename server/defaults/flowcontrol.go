package defaults

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Upstream's v1 defaults (pkg/apis/flowcontrol/v1/defaults.go).
const (
	flowSchemaDefaultMatchingPrecedence int32 = 1000
	plcDefaultHandSize                  int32 = 8
	plcDefaultQueues                    int32 = 64
	plcDefaultQueueLengthLimit          int32 = 50
	plcDefaultNominalConcurrencyShares  int32 = 30
)

// applyFlowcontrol sets the defaults of flowcontrol.apiserver.k8s.io/v1 (FlowSchema, PriorityLevelConfiguration); it reports whether obj is one of them.
func applyFlowcontrol(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *flowcontrolv1.FlowSchema:
		if o != nil && o.Spec.MatchingPrecedence == 0 {
			o.Spec.MatchingPrecedence = flowSchemaDefaultMatchingPrecedence
		}
	case *flowcontrolv1.PriorityLevelConfiguration:
		if o != nil {
			setPriorityLevelConfiguration(&o.Spec)
		}
	default:
		return false
	}
	return true
}

func setPriorityLevelConfiguration(spec *flowcontrolv1.PriorityLevelConfigurationSpec) {
	if e := spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr.To(int32(0))
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr.To(int32(0))
		}
	}
	if l := spec.Limited; l != nil {
		// In v1 an explicit 0 is kept: only a missing value gets the default.
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = ptr.To(plcDefaultNominalConcurrencyShares)
		}
		if l.LendablePercent == nil {
			l.LendablePercent = ptr.To(int32(0))
		}
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = plcDefaultHandSize
			}
			if q.Queues == 0 {
				q.Queues = plcDefaultQueues
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = plcDefaultQueueLengthLimit
			}
		}
	}
}
