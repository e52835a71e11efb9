package openapi

import "strings"

// Upstream's generator decides whether a property is required from comment
// markers that reflection cannot see: a field is required unless its json
// tag has omitempty, but +optional overrides the missing omitempty and
// +required overrides omitempty. The two lists below name, as
// "<definition>.<json field>", every field of k8s.io/api v0.37.2 where a
// marker overrides the json tag; they were extracted from the +optional and
// +required markers of its types.go files. k8s.io/apimachinery's meta types
// have no such overrides.

// requiredness answers whether upstream lists a field in "required".
type requiredness struct {
	optional, required map[string]bool
}

func newRequiredness() requiredness {
	return requiredness{optional: fieldSet(markedOptional), required: fieldSet(markedRequired)}
}

func (r requiredness) isRequired(def, field string, omitEmpty bool) bool {
	key := def + "." + field
	if omitEmpty {
		return r.required[key]
	}
	return !r.optional[key]
}

func fieldSet(list string) map[string]bool {
	out := map[string]bool{}
	for _, f := range strings.Fields(list) {
		out[f] = true
	}
	return out
}

// markedOptional lists fields without omitempty that are marked +optional.
const markedOptional = `
io.k8s.api.admission.v1.AdmissionRequest.kind
io.k8s.api.admission.v1.AdmissionRequest.operation
io.k8s.api.admission.v1.AdmissionRequest.resource
io.k8s.api.admission.v1.AdmissionRequest.uid
io.k8s.api.admission.v1.AdmissionRequest.userInfo
io.k8s.api.admission.v1.AdmissionResponse.allowed
io.k8s.api.admission.v1.AdmissionResponse.uid
io.k8s.api.admission.v1beta1.AdmissionRequest.kind
io.k8s.api.admission.v1beta1.AdmissionRequest.operation
io.k8s.api.admission.v1beta1.AdmissionRequest.resource
io.k8s.api.admission.v1beta1.AdmissionRequest.uid
io.k8s.api.admission.v1beta1.AdmissionRequest.userInfo
io.k8s.api.admission.v1beta1.AdmissionResponse.allowed
io.k8s.api.admission.v1beta1.AdmissionResponse.uid
io.k8s.api.apidiscovery.v2.APIGroupDiscoveryList.items
io.k8s.api.apidiscovery.v2.APIResourceDiscovery.resource
io.k8s.api.apidiscovery.v2.APIResourceDiscovery.scope
io.k8s.api.apidiscovery.v2.APIResourceDiscovery.singularResource
io.k8s.api.apidiscovery.v2.APIResourceDiscovery.verbs
io.k8s.api.apidiscovery.v2.APISubresourceDiscovery.subresource
io.k8s.api.apidiscovery.v2.APISubresourceDiscovery.verbs
io.k8s.api.apidiscovery.v2.APIVersionDiscovery.version
io.k8s.api.apidiscovery.v2beta1.APIGroupDiscoveryList.items
io.k8s.api.apidiscovery.v2beta1.APIResourceDiscovery.resource
io.k8s.api.apidiscovery.v2beta1.APIResourceDiscovery.scope
io.k8s.api.apidiscovery.v2beta1.APIResourceDiscovery.singularResource
io.k8s.api.apidiscovery.v2beta1.APIResourceDiscovery.verbs
io.k8s.api.apidiscovery.v2beta1.APISubresourceDiscovery.subresource
io.k8s.api.apidiscovery.v2beta1.APISubresourceDiscovery.verbs
io.k8s.api.apidiscovery.v2beta1.APIVersionDiscovery.version
io.k8s.api.apiserverinternal.v1alpha1.StorageVersion.spec
io.k8s.api.apiserverinternal.v1alpha1.StorageVersion.status
io.k8s.api.apps.v1.ControllerRevision.revision
io.k8s.api.apps.v1.DaemonSetCondition.status
io.k8s.api.apps.v1.DaemonSetCondition.type
io.k8s.api.apps.v1.DeploymentCondition.status
io.k8s.api.apps.v1.DeploymentCondition.type
io.k8s.api.apps.v1.ReplicaSetCondition.status
io.k8s.api.apps.v1.ReplicaSetCondition.type
io.k8s.api.apps.v1.StatefulSetCondition.status
io.k8s.api.apps.v1.StatefulSetCondition.type
io.k8s.api.apps.v1.StatefulSetOrdinals.start
io.k8s.api.apps.v1.StatefulSetSpec.serviceName
io.k8s.api.apps.v1.StatefulSetStatus.availableReplicas
io.k8s.api.apps.v1beta1.ControllerRevision.revision
io.k8s.api.apps.v1beta1.DeploymentCondition.status
io.k8s.api.apps.v1beta1.DeploymentCondition.type
io.k8s.api.apps.v1beta1.DeploymentRollback.rollbackTo
io.k8s.api.apps.v1beta1.ScaleStatus.replicas
io.k8s.api.apps.v1beta1.StatefulSetCondition.status
io.k8s.api.apps.v1beta1.StatefulSetCondition.type
io.k8s.api.apps.v1beta1.StatefulSetOrdinals.start
io.k8s.api.apps.v1beta1.StatefulSetSpec.serviceName
io.k8s.api.apps.v1beta1.StatefulSetStatus.availableReplicas
io.k8s.api.apps.v1beta2.ControllerRevision.revision
io.k8s.api.apps.v1beta2.DaemonSetCondition.status
io.k8s.api.apps.v1beta2.DaemonSetCondition.type
io.k8s.api.apps.v1beta2.DeploymentCondition.status
io.k8s.api.apps.v1beta2.DeploymentCondition.type
io.k8s.api.apps.v1beta2.ReplicaSetCondition.status
io.k8s.api.apps.v1beta2.ReplicaSetCondition.type
io.k8s.api.apps.v1beta2.ScaleStatus.replicas
io.k8s.api.apps.v1beta2.StatefulSetCondition.status
io.k8s.api.apps.v1beta2.StatefulSetCondition.type
io.k8s.api.apps.v1beta2.StatefulSetOrdinals.start
io.k8s.api.apps.v1beta2.StatefulSetSpec.serviceName
io.k8s.api.apps.v1beta2.StatefulSetStatus.availableReplicas
io.k8s.api.authentication.v1.TokenRequest.spec
io.k8s.api.authentication.v1.TokenRequestSpec.audiences
io.k8s.api.authentication.v1.TokenRequestSpec.boundObjectRef
io.k8s.api.authentication.v1.TokenRequestSpec.expirationSeconds
io.k8s.api.authentication.v1.TokenRequestStatus.expirationTimestamp
io.k8s.api.authentication.v1.TokenRequestStatus.token
io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus.currentMetrics
io.k8s.api.batch.v1.PodFailurePolicyOnPodConditionsPattern.status
io.k8s.api.certificates.v1beta1.CertificateSigningRequestCondition.status
io.k8s.api.certificates.v1beta1.PodCertificateRequestSpec.pkixPublicKey
io.k8s.api.certificates.v1beta1.PodCertificateRequestSpec.proofOfPossession
io.k8s.api.core.v1.AzureFilePersistentVolumeSource.secretNamespace
io.k8s.api.core.v1.ContainerImage.names
io.k8s.api.core.v1.Event.reportingComponent
io.k8s.api.core.v1.Event.reportingInstance
io.k8s.api.core.v1.GRPCAction.service
io.k8s.api.core.v1.NodeRuntimeHandler.name
io.k8s.api.core.v1.ProjectedVolumeSource.sources
io.k8s.api.core.v1.TypedLocalObjectReference.apiGroup
io.k8s.api.core.v1.TypedObjectReference.apiGroup
io.k8s.api.discovery.v1.EndpointSlice.endpoints
io.k8s.api.discovery.v1.EndpointSlice.ports
io.k8s.api.discovery.v1beta1.EndpointSlice.ports
io.k8s.api.events.v1.Event.metadata
io.k8s.api.events.v1beta1.Event.metadata
io.k8s.api.flowcontrol.v1.FlowSchemaSpec.matchingPrecedence
io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration.nominalConcurrencyShares
io.k8s.api.flowcontrol.v1.QueuingConfiguration.handSize
io.k8s.api.flowcontrol.v1.QueuingConfiguration.queueLengthLimit
io.k8s.api.flowcontrol.v1.QueuingConfiguration.queues
io.k8s.api.flowcontrol.v1.ResourcePolicyRule.namespaces
io.k8s.api.flowcontrol.v1beta1.FlowSchemaSpec.matchingPrecedence
io.k8s.api.flowcontrol.v1beta1.LimitedPriorityLevelConfiguration.assuredConcurrencyShares
io.k8s.api.flowcontrol.v1beta1.QueuingConfiguration.handSize
io.k8s.api.flowcontrol.v1beta1.QueuingConfiguration.queueLengthLimit
io.k8s.api.flowcontrol.v1beta1.QueuingConfiguration.queues
io.k8s.api.flowcontrol.v1beta1.ResourcePolicyRule.namespaces
io.k8s.api.flowcontrol.v1beta2.FlowSchemaSpec.matchingPrecedence
io.k8s.api.flowcontrol.v1beta2.LimitedPriorityLevelConfiguration.assuredConcurrencyShares
io.k8s.api.flowcontrol.v1beta2.QueuingConfiguration.handSize
io.k8s.api.flowcontrol.v1beta2.QueuingConfiguration.queueLengthLimit
io.k8s.api.flowcontrol.v1beta2.QueuingConfiguration.queues
io.k8s.api.flowcontrol.v1beta2.ResourcePolicyRule.namespaces
io.k8s.api.flowcontrol.v1beta3.FlowSchemaSpec.matchingPrecedence
io.k8s.api.flowcontrol.v1beta3.LimitedPriorityLevelConfiguration.nominalConcurrencyShares
io.k8s.api.flowcontrol.v1beta3.QueuingConfiguration.handSize
io.k8s.api.flowcontrol.v1beta3.QueuingConfiguration.queueLengthLimit
io.k8s.api.flowcontrol.v1beta3.QueuingConfiguration.queues
io.k8s.api.flowcontrol.v1beta3.ResourcePolicyRule.namespaces
io.k8s.api.imagepolicy.v1alpha1.ImageReview.spec
io.k8s.api.imagepolicy.v1alpha1.ImageReviewStatus.allowed
io.k8s.api.networking.v1.IngressClassParametersReference.scope
io.k8s.api.networking.v1.NetworkPolicySpec.podSelector
io.k8s.api.policy.v1.PodDisruptionBudgetStatus.currentHealthy
io.k8s.api.policy.v1.PodDisruptionBudgetStatus.desiredHealthy
io.k8s.api.policy.v1.PodDisruptionBudgetStatus.disruptionsAllowed
io.k8s.api.policy.v1.PodDisruptionBudgetStatus.expectedPods
io.k8s.api.policy.v1beta1.PodDisruptionBudgetStatus.currentHealthy
io.k8s.api.policy.v1beta1.PodDisruptionBudgetStatus.desiredHealthy
io.k8s.api.policy.v1beta1.PodDisruptionBudgetStatus.disruptionsAllowed
io.k8s.api.policy.v1beta1.PodDisruptionBudgetStatus.expectedPods
io.k8s.api.rbac.v1.ClusterRole.rules
io.k8s.api.rbac.v1.Role.rules
io.k8s.api.rbac.v1.RoleRef.apiGroup
io.k8s.api.rbac.v1alpha1.ClusterRole.rules
io.k8s.api.rbac.v1alpha1.Role.rules
io.k8s.api.rbac.v1alpha1.RoleRef.apiGroup
io.k8s.api.rbac.v1beta1.ClusterRole.rules
io.k8s.api.rbac.v1beta1.Role.rules
io.k8s.api.rbac.v1beta1.RoleRef.apiGroup
io.k8s.api.resource.v1.AllocatedDeviceStatus.conditions
io.k8s.api.resource.v1.CapacityRequestPolicy.default
io.k8s.api.resource.v1.DeviceClaim.requests
io.k8s.api.resource.v1.DeviceClass.spec
io.k8s.api.resource.v1.ResourceClaim.spec
io.k8s.api.resource.v1.ResourceClaimSpec.devices
io.k8s.api.resource.v1.ResourceClaimTemplate.spec
io.k8s.api.resource.v1.ResourceClaimTemplateSpec.spec
io.k8s.api.resource.v1beta1.AllocatedDeviceStatus.conditions
io.k8s.api.resource.v1beta1.CapacityRequestPolicy.default
io.k8s.api.resource.v1beta1.DeviceClaim.requests
io.k8s.api.resource.v1beta1.DeviceClass.spec
io.k8s.api.resource.v1beta1.DeviceRequest.deviceClassName
io.k8s.api.resource.v1beta1.ResourceClaim.spec
io.k8s.api.resource.v1beta1.ResourceClaimSpec.devices
io.k8s.api.resource.v1beta1.ResourceClaimTemplate.spec
io.k8s.api.resource.v1beta1.ResourceClaimTemplateSpec.spec
io.k8s.api.resource.v1beta2.AllocatedDeviceStatus.conditions
io.k8s.api.resource.v1beta2.CapacityRequestPolicy.default
io.k8s.api.resource.v1beta2.DeviceClaim.requests
io.k8s.api.resource.v1beta2.DeviceClass.spec
io.k8s.api.resource.v1beta2.ResourceClaim.spec
io.k8s.api.resource.v1beta2.ResourceClaimSpec.devices
io.k8s.api.resource.v1beta2.ResourceClaimTemplate.spec
io.k8s.api.resource.v1beta2.ResourceClaimTemplateSpec.spec
io.k8s.api.scheduling.v1.PriorityClass.value
io.k8s.api.scheduling.v1alpha3.PodGroupTemplate.schedulingConstraints
io.k8s.api.scheduling.v1alpha3.WorkloadSpec.podGroupTemplates
io.k8s.api.scheduling.v1beta1.PodGroupTemplate.schedulingConstraints
io.k8s.api.scheduling.v1beta1.PriorityClass.value
io.k8s.api.scheduling.v1beta1.WorkloadSpec.podGroupTemplates
io.k8s.api.storage.v1.CSINodeDriver.topologyKeys
io.k8s.api.storage.v1beta1.CSINodeDriver.topologyKeys
`

// markedRequired lists omitempty fields that are marked +required.
const markedRequired = `
io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding.spec
io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec.policyName
io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec.validationActions
io.k8s.api.admissionregistration.v1alpha1.ValidatingAdmissionPolicyBinding.spec
io.k8s.api.admissionregistration.v1alpha1.ValidatingAdmissionPolicyBindingSpec.policyName
io.k8s.api.admissionregistration.v1alpha1.ValidatingAdmissionPolicyBindingSpec.validationActions
io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicyBinding.spec
io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicyBindingSpec.policyName
io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicyBindingSpec.validationActions
io.k8s.api.apiserverinternal.v1alpha1.ServerStorageVersion.apiServerID
io.k8s.api.apiserverinternal.v1alpha1.ServerStorageVersion.decodableVersions
io.k8s.api.apiserverinternal.v1alpha1.ServerStorageVersion.encodingVersion
io.k8s.api.apiserverinternal.v1alpha1.StorageVersion.metadata
io.k8s.api.apiserverinternal.v1alpha1.StorageVersionCondition.message
io.k8s.api.apps.v1.DaemonSet.spec
io.k8s.api.apps.v1.Deployment.spec
io.k8s.api.apps.v1.ReplicaSet.spec
io.k8s.api.apps.v1.StatefulSet.spec
io.k8s.api.apps.v1beta1.Deployment.spec
io.k8s.api.apps.v1beta1.StatefulSet.spec
io.k8s.api.apps.v1beta1.StatefulSetSpec.selector
io.k8s.api.apps.v1beta2.DaemonSet.spec
io.k8s.api.apps.v1beta2.Deployment.spec
io.k8s.api.apps.v1beta2.ReplicaSet.spec
io.k8s.api.apps.v1beta2.StatefulSet.spec
io.k8s.api.authentication.v1.TokenReviewSpec.token
io.k8s.api.authentication.v1beta1.TokenReviewSpec.token
io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler.spec
io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler.spec
io.k8s.api.batch.v1.CronJob.spec
io.k8s.api.batch.v1beta1.CronJob.spec
io.k8s.api.coordination.v1alpha2.LeaseCandidate.spec
io.k8s.api.coordination.v1alpha2.LeaseCandidateSpec.strategy
io.k8s.api.coordination.v1beta1.LeaseCandidate.spec
io.k8s.api.coordination.v1beta1.LeaseCandidateSpec.strategy
io.k8s.api.core.v1.ContainerRestartRule.action
io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes.operator
io.k8s.api.core.v1.ImageVolumeStatus.imageRef
io.k8s.api.core.v1.PodCertificateProjection.keyType
io.k8s.api.core.v1.PodCertificateProjection.signerName
io.k8s.api.flowcontrol.v1.FlowSchema.spec
io.k8s.api.flowcontrol.v1.FlowSchemaCondition.type
io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration.limitResponse
io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration.spec
io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationCondition.type
io.k8s.api.flowcontrol.v1beta1.FlowSchema.spec
io.k8s.api.flowcontrol.v1beta1.FlowSchemaCondition.type
io.k8s.api.flowcontrol.v1beta1.LimitedPriorityLevelConfiguration.limitResponse
io.k8s.api.flowcontrol.v1beta1.PriorityLevelConfiguration.spec
io.k8s.api.flowcontrol.v1beta1.PriorityLevelConfigurationCondition.type
io.k8s.api.flowcontrol.v1beta2.FlowSchema.spec
io.k8s.api.flowcontrol.v1beta2.FlowSchemaCondition.type
io.k8s.api.flowcontrol.v1beta2.LimitedPriorityLevelConfiguration.limitResponse
io.k8s.api.flowcontrol.v1beta2.PriorityLevelConfiguration.spec
io.k8s.api.flowcontrol.v1beta2.PriorityLevelConfigurationCondition.type
io.k8s.api.flowcontrol.v1beta3.FlowSchema.spec
io.k8s.api.flowcontrol.v1beta3.FlowSchemaCondition.type
io.k8s.api.flowcontrol.v1beta3.LimitedPriorityLevelConfiguration.limitResponse
io.k8s.api.flowcontrol.v1beta3.PriorityLevelConfiguration.spec
io.k8s.api.flowcontrol.v1beta3.PriorityLevelConfigurationCondition.type
io.k8s.api.networking.v1.IPAddress.spec
io.k8s.api.networking.v1.IPAddressSpec.parentRef
io.k8s.api.networking.v1.ParentReference.name
io.k8s.api.networking.v1.ParentReference.resource
io.k8s.api.networking.v1beta1.IPAddress.spec
io.k8s.api.networking.v1beta1.IPAddressSpec.parentRef
io.k8s.api.networking.v1beta1.ParentReference.name
io.k8s.api.networking.v1beta1.ParentReference.resource
io.k8s.api.resource.v1.CapacityRequestPolicyRange.min
io.k8s.api.resource.v1.CounterSet.counters
io.k8s.api.resource.v1.DeviceCounterConsumption.counters
io.k8s.api.resource.v1.DeviceTaintRuleSpec.taint
io.k8s.api.resource.v1alpha3.DeviceTaintRuleSpec.taint
io.k8s.api.resource.v1alpha3.PartitionTypeStatus.allocatable
io.k8s.api.resource.v1alpha3.PartitionTypeStatus.attribute
io.k8s.api.resource.v1alpha3.PartitionTypeStatus.total
io.k8s.api.resource.v1alpha3.PartitionTypeStatus.type
io.k8s.api.resource.v1alpha3.PoolStatus.driver
io.k8s.api.resource.v1alpha3.PoolStatus.poolName
io.k8s.api.resource.v1alpha3.ResourcePoolStatusRequest.metadata
io.k8s.api.resource.v1alpha3.ResourcePoolStatusRequestStatus.poolCount
io.k8s.api.resource.v1alpha3.ShareableCapacityStatus.available
io.k8s.api.resource.v1alpha3.ShareableCapacityStatus.consumed
io.k8s.api.resource.v1alpha3.ShareableCapacityStatus.name
io.k8s.api.resource.v1alpha3.ShareableCapacityStatus.total
io.k8s.api.resource.v1alpha3.ShareableSummaryStatus.fullyAvailableDevices
io.k8s.api.resource.v1alpha3.ShareableSummaryStatus.partiallyAvailableDevices
io.k8s.api.resource.v1beta1.CapacityRequestPolicyRange.min
io.k8s.api.resource.v1beta1.CounterSet.counters
io.k8s.api.resource.v1beta1.DeviceCounterConsumption.counters
io.k8s.api.resource.v1beta2.CapacityRequestPolicyRange.min
io.k8s.api.resource.v1beta2.CounterSet.counters
io.k8s.api.resource.v1beta2.DeviceCounterConsumption.counters
io.k8s.api.resource.v1beta2.DeviceTaintRuleSpec.taint
`
