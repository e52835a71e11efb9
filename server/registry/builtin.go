package registry

import (
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Hooks are the defaulting and validation functions for built-in types; the
// server wires them so this table does not depend on their packages.
type Hooks struct {
	Default        func(obj runtime.Object)
	Validate       func(obj runtime.Object) field.ErrorList
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
	// ValidateSubresource: see Resource.ValidateSubresource.
	ValidateSubresource func(subresource string, obj, old runtime.Object) (field.ErrorList, bool)
}

const (
	clusterScope = false
	nsScope      = true
)

func crudVerbs() []string {
	return []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
}

// row builds one built-in resource.
func row[T any, L any, PT interface {
	*T
	runtime.Object
}, PL interface {
	*L
	runtime.Object
}](group, version, name, singular, kind string, namespaced bool, short ...string) *Resource {
	return &Resource{
		Group: group, Version: version, Name: name, Singular: singular, Kind: kind, ListKind: kind + "List",
		Namespaced: namespaced, ShortNames: short, Verbs: crudVerbs(),
		New:     func() runtime.Object { return PT(new(T)) },
		NewList: func() runtime.Object { return PL(new(L)) },
	}
}

// Builtin returns the built-in resources, one row each.
func Builtin(h Hooks) []*Resource {
	rows := []*Resource{
		// core/v1
		// Namespaces have no deletecollection upstream: deleting one is a
		// long, finalizer-driven affair, not a bulk operation.
		with(row[corev1.Namespace, corev1.NamespaceList]("", "v1", "namespaces", "namespace", "Namespace", clusterScope, "ns"), statusOnly, fields(namespaceFields),
			verbs("create", "delete", "get", "list", "patch", "update", "watch")),
		with(row[corev1.Node, corev1.NodeList]("", "v1", "nodes", "node", "Node", clusterScope, "no"), statusOnly, fields(nodeFields)),
		with(row[corev1.Pod, corev1.PodList]("", "v1", "pods", "pod", "Pod", nsScope, "po"), statusOnly, statusKeeps("ownerReferences"), generation, categories("all"), fields(podFields)),
		with(row[corev1.Service, corev1.ServiceList]("", "v1", "services", "service", "Service", nsScope, "svc"), statusOnly, categories("all"), fields(serviceFields)),
		row[corev1.Endpoints, corev1.EndpointsList]("", "v1", "endpoints", "endpoints", "Endpoints", nsScope, "ep"),
		row[corev1.ConfigMap, corev1.ConfigMapList]("", "v1", "configmaps", "configmap", "ConfigMap", nsScope, "cm"),
		with(row[corev1.Secret, corev1.SecretList]("", "v1", "secrets", "secret", "Secret", nsScope), fields(secretFields)),
		row[corev1.ServiceAccount, corev1.ServiceAccountList]("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", nsScope, "sa"),
		with(row[corev1.Event, corev1.EventList]("", "v1", "events", "event", "Event", nsScope, "ev"), fields(eventFields)),
		with(row[corev1.PersistentVolume, corev1.PersistentVolumeList]("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", clusterScope, "pv"), statusOnly),
		with(row[corev1.PersistentVolumeClaim, corev1.PersistentVolumeClaimList]("", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", nsScope, "pvc"), statusOnly),
		with(row[corev1.LimitRange, corev1.LimitRangeList]("", "v1", "limitranges", "limitrange", "LimitRange", nsScope, "limits")),
		with(row[corev1.ResourceQuota, corev1.ResourceQuotaList]("", "v1", "resourcequotas", "resourcequota", "ResourceQuota", nsScope, "quota"), statusOnly),
		with(row[corev1.ReplicationController, corev1.ReplicationControllerList]("", "v1", "replicationcontrollers", "replicationcontroller", "ReplicationController", nsScope, "rc"), statusOnly, scaled, generation, categories("all")),
		row[corev1.PodTemplate, corev1.PodTemplateList]("", "v1", "podtemplates", "podtemplate", "PodTemplate", nsScope),
		// bindings: the older form of pods/binding (create only, never stored).
		virtual(row[corev1.Binding, corev1.Binding]("", "v1", "bindings", "binding", "Binding", nsScope)),
		// apps/v1
		with(row[appsv1.Deployment, appsv1.DeploymentList]("apps", "v1", "deployments", "deployment", "Deployment", nsScope, "deploy"), statusOnly, statusKeeps("labels"), scaled, generation, categories("all")),
		with(row[appsv1.ReplicaSet, appsv1.ReplicaSetList]("apps", "v1", "replicasets", "replicaset", "ReplicaSet", nsScope, "rs"), statusOnly, scaled, generation, categories("all"), fields(replicaSetFields)),
		with(row[appsv1.StatefulSet, appsv1.StatefulSetList]("apps", "v1", "statefulsets", "statefulset", "StatefulSet", nsScope, "sts"), statusOnly, scaled, generation, categories("all")),
		with(row[appsv1.DaemonSet, appsv1.DaemonSetList]("apps", "v1", "daemonsets", "daemonset", "DaemonSet", nsScope, "ds"), statusOnly, generation, categories("all")),
		row[appsv1.ControllerRevision, appsv1.ControllerRevisionList]("apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", nsScope),
		// batch/v1
		with(row[batchv1.Job, batchv1.JobList]("batch", "v1", "jobs", "job", "Job", nsScope), statusOnly, generation, categories("all"), fields(jobFields)),
		with(row[batchv1.CronJob, batchv1.CronJobList]("batch", "v1", "cronjobs", "cronjob", "CronJob", nsScope, "cj"), statusOnly, generation, categories("all")),
		// autoscaling/v2
		with(row[autoscalingv2.HorizontalPodAutoscaler, autoscalingv2.HorizontalPodAutoscalerList]("autoscaling", "v2", "horizontalpodautoscalers", "horizontalpodautoscaler", "HorizontalPodAutoscaler", nsScope, "hpa"), statusOnly, categories("all")),
		// coordination.k8s.io/v1
		row[coordinationv1.Lease, coordinationv1.LeaseList]("coordination.k8s.io", "v1", "leases", "lease", "Lease", nsScope),
		// discovery.k8s.io/v1
		with(row[discoveryv1.EndpointSlice, discoveryv1.EndpointSliceList]("discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", nsScope), generation, fields(endpointSliceFields)),
		// events.k8s.io/v1: the core/v1 events, converted (builtin_events.go)
		with(row[eventsv1.Event, eventsv1.EventList]("events.k8s.io", "v1", "events", "event", "Event", nsScope, "ev"), converted(eventsV1Conversion()), fields(eventsV1Fields)),
		// networking.k8s.io/v1
		with(row[networkingv1.Ingress, networkingv1.IngressList]("networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", nsScope, "ing"), statusOnly, generation),
		row[networkingv1.IngressClass, networkingv1.IngressClassList]("networking.k8s.io", "v1", "ingressclasses", "ingressclass", "IngressClass", clusterScope),
		with(row[networkingv1.NetworkPolicy, networkingv1.NetworkPolicyList]("networking.k8s.io", "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", nsScope, "netpol"), generation),
		// policy/v1
		with(row[policyv1.PodDisruptionBudget, policyv1.PodDisruptionBudgetList]("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", nsScope, "pdb"), statusOnly, generation),
		// rbac.authorization.k8s.io/v1
		row[rbacv1.Role, rbacv1.RoleList]("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", nsScope),
		row[rbacv1.RoleBinding, rbacv1.RoleBindingList]("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", nsScope),
		row[rbacv1.ClusterRole, rbacv1.ClusterRoleList]("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", clusterScope),
		row[rbacv1.ClusterRoleBinding, rbacv1.ClusterRoleBindingList]("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", clusterScope),
		// storage.k8s.io/v1
		row[storagev1.StorageClass, storagev1.StorageClassList]("storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", clusterScope, "sc"),
		row[storagev1.CSIDriver, storagev1.CSIDriverList]("storage.k8s.io", "v1", "csidrivers", "csidriver", "CSIDriver", clusterScope),
		with(row[storagev1.CSINode, storagev1.CSINodeList]("storage.k8s.io", "v1", "csinodes", "csinode", "CSINode", clusterScope), statusOnly),
		with(row[storagev1.VolumeAttachment, storagev1.VolumeAttachmentList]("storage.k8s.io", "v1", "volumeattachments", "volumeattachment", "VolumeAttachment", clusterScope), statusOnly, statusKeepsMeta),
		// scheduling.k8s.io/v1
		row[schedulingv1.PriorityClass, schedulingv1.PriorityClassList]("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", clusterScope, "pc"),
		// node.k8s.io/v1
		row[nodev1.RuntimeClass, nodev1.RuntimeClassList]("node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", clusterScope),
		// certificates.k8s.io/v1
		with(row[certificatesv1.CertificateSigningRequest, certificatesv1.CertificateSigningRequestList]("certificates.k8s.io", "v1", "certificatesigningrequests", "certificatesigningrequest", "CertificateSigningRequest", clusterScope, "csr"), statusOnly, fields(csrFields)),
		// admissionregistration.k8s.io/v1 (webhooks called by server/admission/webhook)
		row[admissionregistrationv1.MutatingWebhookConfiguration, admissionregistrationv1.MutatingWebhookConfigurationList]("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", clusterScope),
		row[admissionregistrationv1.ValidatingWebhookConfiguration, admissionregistrationv1.ValidatingWebhookConfigurationList]("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", clusterScope),
		// Review resources: create-only, never stored.
		virtual(row[authenticationv1.TokenReview, authenticationv1.TokenReview]("authentication.k8s.io", "v1", "tokenreviews", "tokenreview", "TokenReview", clusterScope)),
		virtual(row[authenticationv1.SelfSubjectReview, authenticationv1.SelfSubjectReview]("authentication.k8s.io", "v1", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", clusterScope)),
		virtual(row[authorizationv1.SubjectAccessReview, authorizationv1.SubjectAccessReview]("authorization.k8s.io", "v1", "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview", clusterScope)),
		virtual(row[authorizationv1.SelfSubjectAccessReview, authorizationv1.SelfSubjectAccessReview]("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "selfsubjectaccessreview", "SelfSubjectAccessReview", clusterScope)),
		virtual(row[authorizationv1.SelfSubjectRulesReview, authorizationv1.SelfSubjectRulesReview]("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "selfsubjectrulesreview", "SelfSubjectRulesReview", clusterScope)),
		virtual(row[authorizationv1.LocalSubjectAccessReview, authorizationv1.LocalSubjectAccessReview]("authorization.k8s.io", "v1", "localsubjectaccessreviews", "localsubjectaccessreview", "LocalSubjectAccessReview", nsScope)),
	}
	// Groups added beside the original table, one file each.
	rows = append(rows, flowcontrolRows()...)
	rows = append(rows, extraRows()...)
	rows = append(rows, netExtraRows()...)
	rows = append(rows, certExtraRows()...)
	for _, r := range rows {
		r.Default, r.Validate, r.ValidateUpdate = h.Default, h.Validate, h.ValidateUpdate
		r.ValidateSubresource = h.ValidateSubresource
	}
	return rows
}

type option func(*Resource)

func with(r *Resource, opts ...option) *Resource {
	for _, o := range opts {
		o(r)
	}
	return r
}

func statusOnly(r *Resource) { r.Status = true }

// statusKeeps names the metadata a kind's /status writes keep as stored.
func statusKeeps(meta ...string) option { return func(r *Resource) { r.StatusKeeps = meta } }

// statusKeepsMeta is upstream's ResetObjectMetaForStatus: /status writes
// change no metadata that users or controllers set.
func statusKeepsMeta(r *Resource) {
	r.StatusKeeps = []string{"labels", "annotations", "finalizers", "ownerReferences"}
}
func scaled(r *Resource)     { r.Scale = true }
func generation(r *Resource) { r.Generation = true }

func verbs(v ...string) option { return func(r *Resource) { r.Verbs = v } }

func categories(c ...string) option { return func(r *Resource) { r.Categories = c } }

func fields[T runtime.Object](f func(T) map[string]string) option {
	return func(r *Resource) {
		r.Fields = func(obj runtime.Object) map[string]string {
			t, ok := obj.(T)
			if !ok {
				return nil
			}
			return f(t)
		}
	}
}

// virtual marks a create-only resource whose objects are computed, not stored.
func virtual(r *Resource) *Resource {
	r.Verbs = []string{"create"}
	return r
}

// The field selectors upstream supports per kind.

func namespaceFields(ns *corev1.Namespace) map[string]string {
	return map[string]string{"status.phase": string(ns.Status.Phase)}
}

func nodeFields(n *corev1.Node) map[string]string {
	return map[string]string{"spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
}

func podFields(p *corev1.Pod) map[string]string {
	return map[string]string{
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             p.Status.PodIP,
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

func serviceFields(s *corev1.Service) map[string]string {
	return map[string]string{"spec.clusterIP": s.Spec.ClusterIP, "spec.type": string(s.Spec.Type)}
}

func secretFields(s *corev1.Secret) map[string]string {
	return map[string]string{"type": string(s.Type)}
}

func eventFields(e *corev1.Event) map[string]string {
	// An event recorded through events.k8s.io names its reporter only in
	// reportingController; upstream's source selector falls back to it.
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return map[string]string{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

func replicaSetFields(rs *appsv1.ReplicaSet) map[string]string {
	return map[string]string{"status.replicas": strconv.Itoa(int(rs.Status.Replicas))}
}

func jobFields(j *batchv1.Job) map[string]string {
	return map[string]string{"status.successful": strconv.Itoa(int(j.Status.Succeeded))}
}

func csrFields(c *certificatesv1.CertificateSigningRequest) map[string]string {
	return map[string]string{"spec.signerName": c.Spec.SignerName}
}

func endpointSliceFields(s *discoveryv1.EndpointSlice) map[string]string {
	return map[string]string{"addressType": string(s.AddressType)}
}
