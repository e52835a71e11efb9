package openapi

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// res is shorthand for the built-in resources the tests serve.
func res(gv schema.GroupVersion, kind, plural string, namespaced bool, obj, list runtime.Object, subs ...string) Resource {
	return Resource{
		GVK: gv.WithKind(kind), ListKind: kind + "List", Plural: plural, Namespaced: namespaced,
		Object: obj, List: list, Subresources: subs,
	}
}

// builtinResources is roughly what a small cluster serves: about fifty
// resources over sixteen group-versions.
func builtinResources() []Resource {
	core, apps := corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion
	return []Resource{
		res(core, "Pod", "pods", true, &corev1.Pod{}, &corev1.PodList{}, "status", "log", "eviction", "binding", "ephemeralcontainers", "resize", "exec"),
		res(core, "Service", "services", true, &corev1.Service{}, &corev1.ServiceList{}, "status"),
		res(core, "Endpoints", "endpoints", true, &corev1.Endpoints{}, &corev1.EndpointsList{}),
		res(core, "ConfigMap", "configmaps", true, &corev1.ConfigMap{}, &corev1.ConfigMapList{}),
		res(core, "Secret", "secrets", true, &corev1.Secret{}, &corev1.SecretList{}),
		res(core, "Namespace", "namespaces", false, &corev1.Namespace{}, &corev1.NamespaceList{}, "status", "finalize"),
		res(core, "Node", "nodes", false, &corev1.Node{}, &corev1.NodeList{}, "status"),
		res(core, "ServiceAccount", "serviceaccounts", true, &corev1.ServiceAccount{}, &corev1.ServiceAccountList{}, "token"),
		res(core, "Event", "events", true, &corev1.Event{}, &corev1.EventList{}),
		res(core, "PersistentVolume", "persistentvolumes", false, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{}, "status"),
		res(core, "PersistentVolumeClaim", "persistentvolumeclaims", true, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{}, "status"),
		res(core, "LimitRange", "limitranges", true, &corev1.LimitRange{}, &corev1.LimitRangeList{}),
		res(core, "ResourceQuota", "resourcequotas", true, &corev1.ResourceQuota{}, &corev1.ResourceQuotaList{}, "status"),
		res(core, "ReplicationController", "replicationcontrollers", true, &corev1.ReplicationController{}, &corev1.ReplicationControllerList{}, "status", "scale"),
		res(core, "PodTemplate", "podtemplates", true, &corev1.PodTemplate{}, &corev1.PodTemplateList{}),
		res(apps, "Deployment", "deployments", true, &appsv1.Deployment{}, &appsv1.DeploymentList{}, "status", "scale"),
		res(apps, "ReplicaSet", "replicasets", true, &appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{}, "status", "scale"),
		res(apps, "StatefulSet", "statefulsets", true, &appsv1.StatefulSet{}, &appsv1.StatefulSetList{}, "status", "scale"),
		res(apps, "DaemonSet", "daemonsets", true, &appsv1.DaemonSet{}, &appsv1.DaemonSetList{}, "status"),
		res(apps, "ControllerRevision", "controllerrevisions", true, &appsv1.ControllerRevision{}, &appsv1.ControllerRevisionList{}),
		res(batchv1.SchemeGroupVersion, "Job", "jobs", true, &batchv1.Job{}, &batchv1.JobList{}, "status"),
		res(batchv1.SchemeGroupVersion, "CronJob", "cronjobs", true, &batchv1.CronJob{}, &batchv1.CronJobList{}, "status"),
		res(networkingv1.SchemeGroupVersion, "Ingress", "ingresses", true, &networkingv1.Ingress{}, &networkingv1.IngressList{}, "status"),
		res(networkingv1.SchemeGroupVersion, "IngressClass", "ingressclasses", false, &networkingv1.IngressClass{}, &networkingv1.IngressClassList{}),
		res(networkingv1.SchemeGroupVersion, "NetworkPolicy", "networkpolicies", true, &networkingv1.NetworkPolicy{}, &networkingv1.NetworkPolicyList{}),
		res(rbacv1.SchemeGroupVersion, "Role", "roles", true, &rbacv1.Role{}, &rbacv1.RoleList{}),
		res(rbacv1.SchemeGroupVersion, "RoleBinding", "rolebindings", true, &rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{}),
		res(rbacv1.SchemeGroupVersion, "ClusterRole", "clusterroles", false, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleList{}),
		res(rbacv1.SchemeGroupVersion, "ClusterRoleBinding", "clusterrolebindings", false, &rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRoleBindingList{}),
		res(storagev1.SchemeGroupVersion, "StorageClass", "storageclasses", false, &storagev1.StorageClass{}, &storagev1.StorageClassList{}),
		res(storagev1.SchemeGroupVersion, "CSIDriver", "csidrivers", false, &storagev1.CSIDriver{}, &storagev1.CSIDriverList{}),
		res(storagev1.SchemeGroupVersion, "CSINode", "csinodes", false, &storagev1.CSINode{}, &storagev1.CSINodeList{}),
		res(storagev1.SchemeGroupVersion, "VolumeAttachment", "volumeattachments", false, &storagev1.VolumeAttachment{}, &storagev1.VolumeAttachmentList{}, "status"),
		res(coordinationv1.SchemeGroupVersion, "Lease", "leases", true, &coordinationv1.Lease{}, &coordinationv1.LeaseList{}),
		res(discoveryv1.SchemeGroupVersion, "EndpointSlice", "endpointslices", true, &discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{}),
		res(policyv1.SchemeGroupVersion, "PodDisruptionBudget", "poddisruptionbudgets", true, &policyv1.PodDisruptionBudget{}, &policyv1.PodDisruptionBudgetList{}, "status"),
		res(autoscalingv2.SchemeGroupVersion, "HorizontalPodAutoscaler", "horizontalpodautoscalers", true, &autoscalingv2.HorizontalPodAutoscaler{}, &autoscalingv2.HorizontalPodAutoscalerList{}, "status"),
		res(schedulingv1.SchemeGroupVersion, "PriorityClass", "priorityclasses", false, &schedulingv1.PriorityClass{}, &schedulingv1.PriorityClassList{}),
		res(nodev1.SchemeGroupVersion, "RuntimeClass", "runtimeclasses", false, &nodev1.RuntimeClass{}, &nodev1.RuntimeClassList{}),
		res(eventsv1.SchemeGroupVersion, "Event", "events", true, &eventsv1.Event{}, &eventsv1.EventList{}),
		res(certificatesv1.SchemeGroupVersion, "CertificateSigningRequest", "certificatesigningrequests", false, &certificatesv1.CertificateSigningRequest{}, &certificatesv1.CertificateSigningRequestList{}, "status", "approval"),
		res(admissionregistrationv1.SchemeGroupVersion, "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false, &admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfigurationList{}),
		res(admissionregistrationv1.SchemeGroupVersion, "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false, &admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfigurationList{}),
		res(admissionregistrationv1.SchemeGroupVersion, "ValidatingAdmissionPolicy", "validatingadmissionpolicies", false, &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyList{}, "status"),
		res(admissionregistrationv1.SchemeGroupVersion, "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", false, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}),
		res(flowcontrolv1.SchemeGroupVersion, "FlowSchema", "flowschemas", false, &flowcontrolv1.FlowSchema{}, &flowcontrolv1.FlowSchemaList{}, "status"),
		res(flowcontrolv1.SchemeGroupVersion, "PriorityLevelConfiguration", "prioritylevelconfigurations", false, &flowcontrolv1.PriorityLevelConfiguration{}, &flowcontrolv1.PriorityLevelConfigurationList{}, "status"),
		res(storagev1.SchemeGroupVersion, "CSIStorageCapacity", "csistoragecapacities", true, &storagev1.CSIStorageCapacity{}, &storagev1.CSIStorageCapacityList{}),
		res(core, "ComponentStatus", "componentstatuses", false, &corev1.ComponentStatus{}, &corev1.ComponentStatusList{}),
		res(networkingv1.SchemeGroupVersion, "IPAddress", "ipaddresses", false, &networkingv1.IPAddress{}, &networkingv1.IPAddressList{}),
		res(networkingv1.SchemeGroupVersion, "ServiceCIDR", "servicecidrs", false, &networkingv1.ServiceCIDR{}, &networkingv1.ServiceCIDRList{}, "status"),
	}
}
