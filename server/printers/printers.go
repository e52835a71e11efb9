// Package printers turns API objects into the rows of a metav1.Table, the
// server-side printing that `kubectl get` asks for with
// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
//
// Columns and cell values follow what an upstream kube-apiserver returns for
// the same objects, so kubectl output looks the same against skiff. The server
// always produces every column, including priority 1 ("wide") columns: kubectl
// hides those itself unless run with `-o wide`. For the same reason nothing is
// truncated here (upstream only clips load-balancer addresses in non-wide
// client-side printing).
package printers

import (
	"fmt"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Printer makes table rows for one kind.
type Printer struct {
	Columns []metav1.TableColumnDefinition
	// Cells returns one row's cells, in Columns order, for one object (a
	// typed k8s.io/api object such as *corev1.Pod; an *unstructured.Unstructured
	// of the same kind is converted first).
	Cells func(obj runtime.Object, now time.Time) ([]interface{}, error)
	// Conditions, when set, returns the row conditions upstream attaches (only
	// pods use it: finished pods are marked Completed so clients may dim them).
	Conditions func(obj runtime.Object) []metav1.TableRowCondition
}

// For returns the printer for a group/kind. Kinds without a dedicated printer
// (roles, limitranges, custom resources, ...) get upstream's default table,
// Name and Created At, and ok=false.
func For(gk schema.GroupKind) (p Printer, ok bool) {
	if build, found := registry[gk]; found {
		return build(), true
	}
	return defaultPrinter(), false
}

// Rows builds the table rows for objects of one kind. Only Cells (and
// Conditions where the printer has them) are filled: the caller sets
// TableRow.Object according to the request's includeObject.
func Rows(p Printer, objs []runtime.Object, now time.Time) ([]metav1.TableRow, error) {
	if p.Cells == nil {
		return nil, fmt.Errorf("printers: printer has no Cells function")
	}
	rows := make([]metav1.TableRow, 0, len(objs))
	for i, obj := range objs {
		if obj == nil {
			return nil, fmt.Errorf("printers: object %d is nil", i)
		}
		cells, err := p.Cells(obj, now)
		if err != nil {
			return nil, fmt.Errorf("printers: object %d: %w", i, err)
		}
		if len(cells) != len(p.Columns) {
			return nil, fmt.Errorf("printers: object %d: %d cells for %d columns", i, len(cells), len(p.Columns))
		}
		row := metav1.TableRow{Cells: cells}
		if p.Conditions != nil {
			row.Conditions = p.Conditions(obj)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// defaultPrinter mirrors the apiserver's DefaultTableConvertor, which prints
// the creation time as an RFC 3339 date rather than an age.
func defaultPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Created At", Type: "date", Description: objectMetaDoc("creationTimestamp")},
		},
		Cells: defaultCells,
	}
}

func defaultCells(obj runtime.Object, _ time.Time) ([]interface{}, error) {
	if isNil(obj) {
		return nil, fmt.Errorf("nil object")
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("object %T has no metadata: %w", obj, err)
	}
	created := m.GetCreationTimestamp()
	return []interface{}{m.GetName(), created.UTC().Format(time.RFC3339)}, nil
}

// registry maps each kind that has a dedicated printer to its constructor.
// Constructors, not Printers, so every caller gets its own column slice.
var registry = map[schema.GroupKind]func() Printer{
	{Group: "", Kind: "Pod"}:                   podPrinter,
	{Group: "", Kind: "Node"}:                  nodePrinter,
	{Group: "", Kind: "Namespace"}:             namespacePrinter,
	{Group: "", Kind: "Service"}:               servicePrinter,
	{Group: "", Kind: "Endpoints"}:             endpointsPrinter,
	{Group: "", Kind: "ConfigMap"}:             configMapPrinter,
	{Group: "", Kind: "Secret"}:                secretPrinter,
	{Group: "", Kind: "ServiceAccount"}:        serviceAccountPrinter,
	{Group: "", Kind: "Event"}:                 coreEventPrinter,
	{Group: "", Kind: "PersistentVolume"}:      persistentVolumePrinter,
	{Group: "", Kind: "PersistentVolumeClaim"}: persistentVolumeClaimPrinter,
	{Group: "", Kind: "ResourceQuota"}:         resourceQuotaPrinter,
	{Group: "", Kind: "ReplicationController"}: replicationControllerPrinter,
	{Group: "", Kind: "PodTemplate"}:           podTemplatePrinter,
	{Group: "", Kind: "ComponentStatus"}:       componentStatusPrinter,

	{Group: "events.k8s.io", Kind: "Event"}:                 eventsV1Printer,
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:      endpointSlicePrinter,
	{Group: "coordination.k8s.io", Kind: "Lease"}:           leasePrinter,
	{Group: "policy", Kind: "PodDisruptionBudget"}:          podDisruptionBudgetPrinter,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:     priorityClassPrinter,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:            runtimeClassPrinter,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: horizontalPodAutoscalerPrinter,

	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                 flowSchemaPrinter,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}: priorityLevelConfigurationPrinter,

	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}: certificateSigningRequestPrinter,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:        clusterTrustBundlePrinter, // certificates_extra.go
	{Group: "certificates.k8s.io", Kind: "PodCertificateRequest"}:     podCertificateRequestPrinter,

	{Group: "apps", Kind: "Deployment"}:         deploymentPrinter,
	{Group: "apps", Kind: "ReplicaSet"}:         replicaSetPrinter,
	{Group: "apps", Kind: "StatefulSet"}:        statefulSetPrinter,
	{Group: "apps", Kind: "DaemonSet"}:          daemonSetPrinter,
	{Group: "apps", Kind: "ControllerRevision"}: controllerRevisionPrinter,

	{Group: "batch", Kind: "Job"}:     jobPrinter,
	{Group: "batch", Kind: "CronJob"}: cronJobPrinter,

	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:        roleBindingPrinter,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: clusterRoleBindingPrinter,

	{Group: "storage.k8s.io", Kind: "StorageClass"}:       storageClassPrinter,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:          csiDriverPrinter,
	{Group: "storage.k8s.io", Kind: "CSINode"}:            csiNodePrinter,
	{Group: "storage.k8s.io", Kind: "CSIStorageCapacity"}: csiStorageCapacityPrinter,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:   volumeAttachmentPrinter,

	// resource.go
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:  volumeAttributesClassPrinter,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:           nameAgePrinter[resourcev1.DeviceClass](),
	{Group: "resource.k8s.io", Kind: "ResourceClaim"}:         resourceClaimPrinter,
	{Group: "resource.k8s.io", Kind: "ResourceClaimTemplate"}: nameAgePrinter[resourcev1.ResourceClaimTemplate](),
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:         resourceSlicePrinter,

	{Group: "networking.k8s.io", Kind: "Ingress"}:       ingressPrinter,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:  ingressClassPrinter,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}: networkPolicyPrinter,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:   serviceCIDRPrinter,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:     ipAddressPrinter,

	{Group: "apiregistration.k8s.io", Kind: "APIService"}: apiServicePrinter, // apiregistration.go

	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     mutatingWebhookConfigurationPrinter,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   validatingWebhookConfigurationPrinter,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        validatingAdmissionPolicyPrinter,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          mutatingAdmissionPolicyPrinter,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   mutatingAdmissionPolicyBindingPrinter,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: validatingAdmissionPolicyBindingPrinter,

	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: customResourceDefinitionPrinter, // apiextensions.go
}
