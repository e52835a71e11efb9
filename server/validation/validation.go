// Package validation checks built-in API objects the way an upstream API
// server does, returning field errors with upstream's paths and wording so
// that clients see the same 422 responses.
//
// Callers are expected to apply defaults (package defaults) first, as the
// upstream server does before validating; several checks report fields that
// defaulting would have filled. The request namespace and the assignment of
// allocated values (service IPs and ports, job selectors) are the server's
// business and happen before validation.
package validation

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a new object before it is created. Field paths are those
// of upstream (metadata.name, spec.containers[0].image, ...). Unknown types
// and nil pointers yield no errors.
func Validate(obj runtime.Object) field.ErrorList {
	if isNil(obj) {
		return nil
	}
	for _, v := range []func(runtime.Object) (field.ErrorList, bool){validateCoreKind, validateCoreStorageKind, validateWorkloadKind, validateOtherKind,
		validateFlowcontrolKind, validateExtraKind, validateNetExtraKind, validateCertExtraKind, validateAPIRegistrationKind, validateAPIExtensionsKind, validateWebhookConfigKind, validatePoliciesKind, validateMutatingPoliciesKind} {
		if errs, ok := v(obj); ok {
			return dedupe(errs)
		}
	}
	return nil
}

// ValidateUpdate checks obj as a replacement for old, including the fields
// that may not change after creation. Both must be of the same type.
func ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	if isNil(obj) || isNil(old) {
		return nil
	}
	if fmt.Sprintf("%T", obj) != fmt.Sprintf("%T", old) {
		return field.ErrorList{field.InternalError(field.NewPath(""), fmt.Errorf("cannot update a %T with a %T", old, obj))}
	}
	for _, v := range []func(runtime.Object, runtime.Object) (field.ErrorList, bool){updateCoreKind, updateWorkloadKind, updateOtherKind,
		updateFlowcontrolKind, updateExtraKind, updateNetExtraKind, updateCertExtraKind, updateAPIRegistrationKind, updateAPIExtensionsKind, updateWebhookConfigKind, updatePoliciesKind, updateMutatingPoliciesKind} {
		if errs, ok := v(obj, old); ok {
			return dedupe(errs)
		}
	}
	// Kinds without update rules of their own: metadata rules plus the
	// rules for a new object.
	m, oldMeta := objectMeta(obj), objectMeta(old)
	if m == nil || oldMeta == nil {
		return nil
	}
	return dedupe(append(apivalidation.ValidateObjectMetaUpdate(m, oldMeta, metaPath), Validate(obj)...))
}

func validateCoreKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return validatePod(o), true
	case *corev1.PodTemplate:
		return validatePodTemplate(o), true
	case *corev1.ReplicationController:
		return validateReplicationController(o), true
	case *corev1.Service:
		return validateService(o), true
	case *corev1.Endpoints:
		return validateEndpoints(o), true
	case *corev1.Namespace:
		return validateNamespace(o), true
	case *corev1.Node:
		return validateNode(o), true
	case *corev1.ConfigMap:
		return validateConfigMap(o), true
	case *corev1.Secret:
		return validateSecret(o), true
	case *corev1.ServiceAccount:
		return validateServiceAccount(o), true
	case *corev1.Event:
		return validateCoreEvent(o), true
	case *corev1.Binding:
		return validateBinding(o), true
	}
	return nil, false
}

func validateCoreStorageKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		return validatePV(o), true
	case *corev1.PersistentVolumeClaim:
		return validatePVC(o), true
	case *corev1.LimitRange:
		return validateLimitRange(o), true
	case *corev1.ResourceQuota:
		return validateResourceQuota(o), true
	case *storagev1.StorageClass:
		return validateStorageClass(o), true
	case *storagev1.CSIDriver:
		return validateCSIDriver(o), true
	}
	return nil, false
}

func validateWorkloadKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return validateDeployment(o), true
	case *appsv1.ReplicaSet:
		return validateReplicaSet(o), true
	case *appsv1.StatefulSet:
		return validateStatefulSet(o), true
	case *appsv1.DaemonSet:
		return validateDaemonSet(o), true
	case *appsv1.ControllerRevision:
		return validateControllerRevision(o), true
	case *batchv1.Job:
		return validateJob(o), true
	case *batchv1.CronJob:
		return validateCronJob(o), true
	}
	return nil, false
}

func validateOtherKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *rbacv1.Role:
		return validateRole(o), true
	case *rbacv1.ClusterRole:
		return validateClusterRole(o), true
	case *rbacv1.RoleBinding:
		return validateRoleBinding(o), true
	case *rbacv1.ClusterRoleBinding:
		return validateClusterRoleBinding(o), true
	case *networkingv1.NetworkPolicy:
		return validateNetworkPolicy(o), true
	case *networkingv1.Ingress:
		return validateIngress(o), true
	case *networkingv1.IngressClass:
		return validateIngressClass(o), true
	case *discoveryv1.EndpointSlice:
		return validateEndpointSlice(o), true
	case *coordinationv1.Lease:
		return validateLease(o), true
	case *eventsv1.Event:
		return validateEventsV1Event(o), true
	case *schedulingv1.PriorityClass:
		return validatePriorityClass(o), true
	case *policyv1.PodDisruptionBudget:
		return validatePDB(o), true
	case *policyv1.Eviction:
		return validateEviction(o), true
	case *certificatesv1.CertificateSigningRequest:
		return validateCSR(o), true
	}
	return nil, false
}
