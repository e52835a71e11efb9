package registry

// flowcontrolRows are the rows of flowcontrol.apiserver.k8s.io/v1 (FlowSchema, PriorityLevelConfiguration).
func flowcontrolRows() []*Resource {
	return nil
}
