package validation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateFlowcontrolKind validates the kinds of flowcontrol.apiserver.k8s.io/v1 (FlowSchema, PriorityLevelConfiguration).
func validateFlowcontrolKind(obj runtime.Object) (field.ErrorList, bool) {
	return nil, false
}

// updateFlowcontrolKind validates updates of the kinds of flowcontrol.apiserver.k8s.io/v1 (FlowSchema, PriorityLevelConfiguration).
func updateFlowcontrolKind(obj, old runtime.Object) (field.ErrorList, bool) {
	return nil, false
}
