// Package defaults fills in the fields that a Kubernetes API server sets on
// the v1 built-in types when a client leaves them empty, so that stored and
// returned objects look exactly like those of an upstream cluster.
//
// The rules follow upstream's pkg/apis/*/v1 defaulting (hand-written and
// declarative). Values that upstream assigns in registry strategies or
// admission (service cluster IPs, pod priority, service account names) are
// left to those parts of the server; GenerateJobSelector is the one strategy
// step offered here because validation depends on it.
package defaults

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Apply sets upstream's v1 defaults on a typed object in place, including the
// pod templates nested in workload objects. Unknown types and nil pointers are
// left alone. Apply is idempotent.
func Apply(obj runtime.Object) {
	if applyCore(obj) || applyWorkloads(obj) {
		return
	}
	// Groups added beside the original switch, one file each.
	if applyFlowcontrol(obj) || applyExtra(obj) || applyNetExtra(obj) || applyCertExtra(obj) || applyAPIRegistration(obj) || applyAPIExtensions(obj) || applyPolicies(obj) || applyWebhookConfigs(obj) {
		return
	}
	applyOtherGroups(obj)
}

func applyCore(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *corev1.Pod:
		if o != nil {
			setPod(o)
		}
	case *corev1.PodTemplate:
		if o != nil {
			setPodSpec(&o.Template.Spec)
		}
	case *corev1.ReplicationController:
		if o != nil {
			setReplicationController(o)
		}
	case *corev1.Service:
		if o != nil {
			setService(o)
		}
	case *corev1.Namespace:
		if o != nil {
			setNamespace(o)
		}
	case *corev1.Secret:
		if o != nil {
			setSecret(o)
		}
	case *corev1.ConfigMap:
		if o != nil {
			setConfigMap(o)
		}
	default:
		return applyCoreStorage(obj)
	}
	return true
}

func applyCoreStorage(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		if o != nil {
			setPV(o)
		}
	case *corev1.PersistentVolumeClaim:
		if o != nil {
			setPVC(o)
		}
	case *corev1.Endpoints:
		if o != nil {
			setEndpoints(o)
		}
	case *corev1.Node:
		if o != nil {
			setNode(o)
		}
	case *corev1.LimitRange:
		if o != nil {
			setLimitRange(o)
		}
	case *corev1.ResourceQuota:
		if o != nil {
			setResourceQuota(o)
		}
	default:
		return false
	}
	return true
}

func applyWorkloads(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if o != nil {
			setDeployment(o)
		}
	case *appsv1.ReplicaSet:
		if o != nil {
			setReplicaSet(o)
		}
	case *appsv1.StatefulSet:
		if o != nil {
			setStatefulSet(o)
		}
	case *appsv1.DaemonSet:
		if o != nil {
			setDaemonSet(o)
		}
	case *batchv1.Job:
		if o != nil {
			setJob(o)
		}
	case *batchv1.CronJob:
		if o != nil {
			setCronJob(o)
		}
	default:
		return false
	}
	return true
}

func applyOtherGroups(obj runtime.Object) {
	switch o := obj.(type) {
	case *networkingv1.NetworkPolicy:
		if o != nil {
			setNetworkPolicy(o)
		}
	case *networkingv1.IngressClass:
		if o != nil {
			setIngressClass(o)
		}
	case *storagev1.StorageClass:
		if o != nil {
			setStorageClass(o)
		}
	case *storagev1.CSIDriver:
		if o != nil {
			setCSIDriver(o)
		}
	case *storagev1.VolumeAttachment:
		if o != nil {
			setVolumeAttachment(o)
		}
	case *rbacv1.RoleBinding:
		if o != nil {
			setRoleRef(&o.RoleRef)
			setSubjects(o.Subjects)
		}
	case *rbacv1.ClusterRoleBinding:
		if o != nil {
			setRoleRef(&o.RoleRef)
			setSubjects(o.Subjects)
		}
	case *schedulingv1.PriorityClass:
		if o != nil {
			setPriorityClass(o)
		}
	case *discoveryv1.EndpointSlice:
		if o != nil {
			setEndpointSlice(o)
		}
	case *certificatesv1.CertificateSigningRequest:
		if o != nil {
			setCSR(o)
		}
	}
}
