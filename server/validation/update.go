package validation

import (
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The update functions below are only called with obj and old of the same
// type, which ValidateUpdate has checked.

func updateCoreKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return validatePodUpdate(o, old.(*corev1.Pod)), true
	case *corev1.Service:
		return validateServiceUpdate(o, old.(*corev1.Service)), true
	case *corev1.ConfigMap:
		return validateConfigMapUpdate(o, old.(*corev1.ConfigMap)), true
	case *corev1.Secret:
		return validateSecretUpdate(o, old.(*corev1.Secret)), true
	case *corev1.PersistentVolumeClaim:
		return validatePVCUpdate(o, old.(*corev1.PersistentVolumeClaim)), true
	case *corev1.PersistentVolume:
		return validatePVUpdate(o, old.(*corev1.PersistentVolume)), true
	case *corev1.Node:
		return validateNodeUpdate(o, old.(*corev1.Node)), true
	case *corev1.ResourceQuota:
		return validateResourceQuotaUpdate(o, old.(*corev1.ResourceQuota)), true
	}
	return nil, false
}

func updateWorkloadKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return withImmutableSelector(validateDeployment(o), o, old, o.Spec.Selector, old.(*appsv1.Deployment).Spec.Selector), true
	case *appsv1.ReplicaSet:
		return withImmutableSelector(validateReplicaSet(o), o, old, o.Spec.Selector, old.(*appsv1.ReplicaSet).Spec.Selector), true
	case *appsv1.DaemonSet:
		return withImmutableSelector(validateDaemonSet(o), o, old, o.Spec.Selector, old.(*appsv1.DaemonSet).Spec.Selector), true
	case *appsv1.StatefulSet:
		return validateStatefulSetUpdate(o, old.(*appsv1.StatefulSet)), true
	case *appsv1.ControllerRevision:
		errs := validateMetaUpdate(&o.ObjectMeta, &old.(*appsv1.ControllerRevision).ObjectMeta)
		errs = append(errs, validateControllerRevision(o)...)
		return append(errs, immutable(o.Data, old.(*appsv1.ControllerRevision).Data, field.NewPath("data"))...), true
	case *batchv1.Job:
		return validateJobUpdate(o, old.(*batchv1.Job)), true
	case *batchv1.CronJob:
		return validateCronJobUpdate(o, old.(*batchv1.CronJob)), true
	}
	return nil, false
}

// withImmutableSelector adds the apps/v1 rule that a controller's selector
// is fixed: changing it would orphan the pods it already owns.
func withImmutableSelector(errs field.ErrorList, obj, old runtime.Object, sel, oldSel *metav1.LabelSelector) field.ErrorList {
	errs = append(errs, validateMetaUpdate(objectMeta(obj), objectMeta(old))...)
	return append(errs, immutable(sel, oldSel, specPath.Child("selector"))...)
}

func updateOtherKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *rbacv1.RoleBinding:
		errs := append(validateMetaUpdate(&o.ObjectMeta, &old.(*rbacv1.RoleBinding).ObjectMeta), validateRoleBinding(o)...)
		return append(errs, roleRefUnchanged(o.RoleRef, old.(*rbacv1.RoleBinding).RoleRef)...), true
	case *rbacv1.ClusterRoleBinding:
		errs := append(validateMetaUpdate(&o.ObjectMeta, &old.(*rbacv1.ClusterRoleBinding).ObjectMeta), validateClusterRoleBinding(o)...)
		return append(errs, roleRefUnchanged(o.RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef)...), true
	case *schedulingv1.PriorityClass:
		return append(validatePriorityClassUpdate(o, old.(*schedulingv1.PriorityClass)), validatePriorityClass(o)...), true
	case *storagev1.StorageClass:
		return append(validateStorageClassUpdate(o, old.(*storagev1.StorageClass)), validateStorageClass(o)...), true
	case *storagev1.CSIDriver:
		return validateCSIDriverUpdate(o, old.(*storagev1.CSIDriver)), true
	case *discoveryv1.EndpointSlice:
		oldSlice := old.(*discoveryv1.EndpointSlice)
		errs := append(validateMetaUpdate(&o.ObjectMeta, &oldSlice.ObjectMeta), validateEndpointSlice(o)...)
		return append(errs, immutable(o.AddressType, oldSlice.AddressType, field.NewPath("addressType"))...), true
	case *eventsv1.Event:
		return validateEventsV1EventUpdate(o, old.(*eventsv1.Event)), true
	case *networkingv1.IngressClass:
		oldIC := old.(*networkingv1.IngressClass)
		errs := append(validateMetaUpdate(&o.ObjectMeta, &oldIC.ObjectMeta), validateIngressClass(o)...)
		return append(errs, immutable(o.Spec.Controller, oldIC.Spec.Controller, specPath.Child("controller"))...), true
	}
	return nil, false
}

func isNil(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// objectMeta returns the metadata of a built-in object, or nil for objects
// without standard metadata.
func objectMeta(obj runtime.Object) *metav1.ObjectMeta {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("ObjectMeta")
	if !f.IsValid() || f.Type() != reflect.TypeFor[metav1.ObjectMeta]() {
		return nil
	}
	return f.Addr().Interface().(*metav1.ObjectMeta)
}

// dedupe drops repeated errors: the create-time and update-time metadata
// checks overlap (labels, annotations), and one problem should be reported
// once.
func dedupe(errs field.ErrorList) field.ErrorList {
	seen := map[string]bool{}
	out := errs[:0:0]
	for _, e := range errs {
		key := fmt.Sprintf("%s|%s|%s|%#v", e.Type, e.Field, e.Detail, e.BadValue)
		if !seen[key] {
			seen[key] = true
			out = append(out, e)
		}
	}
	return out
}
