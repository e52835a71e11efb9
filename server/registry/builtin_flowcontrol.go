package registry

import flowcontrolv1 "k8s.io/api/flowcontrol/v1"

// flowcontrolRows are the rows of flowcontrol.apiserver.k8s.io/v1 (FlowSchema, PriorityLevelConfiguration).
// Upstream gives them no short names; the server's flow-control filter
// enforces them and keeps the bootstrap objects. As upstream, a /status
// write changes no metadata.
func flowcontrolRows() []*Resource {
	const group = "flowcontrol.apiserver.k8s.io"
	return []*Resource{
		with(row[flowcontrolv1.FlowSchema, flowcontrolv1.FlowSchemaList](group, "v1", "flowschemas", "flowschema", "FlowSchema", clusterScope), statusOnly, statusKeepsMeta, generation),
		with(row[flowcontrolv1.PriorityLevelConfiguration, flowcontrolv1.PriorityLevelConfigurationList](group, "v1", "prioritylevelconfigurations", "prioritylevelconfiguration", "PriorityLevelConfiguration", clusterScope), statusOnly, statusKeepsMeta, generation),
	}
}
