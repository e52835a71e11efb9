package validation

import (
	"fmt"
	"reflect"
	"testing"

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
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/defaults"
)

// handledTypes returns a fresh zero value of every type the two packages
// know about.
func handledTypes() []runtime.Object {
	return []runtime.Object{
		&corev1.Pod{}, &corev1.PodTemplate{}, &corev1.ReplicationController{}, &corev1.Service{}, &corev1.Endpoints{},
		&corev1.Namespace{}, &corev1.Node{}, &corev1.ConfigMap{}, &corev1.Secret{}, &corev1.ServiceAccount{},
		&corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}, &corev1.Event{}, &corev1.LimitRange{},
		&corev1.ResourceQuota{}, &corev1.Binding{},
		&appsv1.Deployment{}, &appsv1.ReplicaSet{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &appsv1.ControllerRevision{},
		&batchv1.Job{}, &batchv1.CronJob{},
		&rbacv1.Role{}, &rbacv1.ClusterRole{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRoleBinding{},
		&networkingv1.NetworkPolicy{}, &networkingv1.Ingress{}, &networkingv1.IngressClass{},
		&storagev1.StorageClass{}, &storagev1.CSIDriver{}, &storagev1.VolumeAttachment{},
		&discoveryv1.EndpointSlice{}, &coordinationv1.Lease{}, &eventsv1.Event{},
		&schedulingv1.PriorityClass{}, &policyv1.PodDisruptionBudget{}, &policyv1.Eviction{},
		&certificatesv1.CertificateSigningRequest{},
	}
}

// exercise runs every entry point on obj and reports a panic as an error.
func exercise(obj, old runtime.Object) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	_ = Validate(obj)
	_ = ValidateUpdate(obj, old)
	defaults.Apply(obj)
	defaults.Apply(old)
	_ = Validate(obj)
	_ = ValidateUpdate(obj, old)
	return nil
}

func TestZeroValuesNeverPanic(t *testing.T) {
	for _, obj := range handledTypes() {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			if err := exercise(obj, obj.DeepCopyObject()); err != nil {
				t.Fatal(err)
			}
			nilPtr := reflect.Zero(reflect.TypeOf(obj)).Interface().(runtime.Object)
			if err := exercise(nilPtr, nilPtr); err != nil {
				t.Fatalf("typed nil: %v", err)
			}
		})
	}
}

// TestSparseObjectsNeverPanic fills every slice with one zero element and
// every pointer with a zero struct, down to a fixed depth, so that code
// reading nested optional fields meets empty-but-present values everywhere.
func TestSparseObjectsNeverPanic(t *testing.T) {
	for _, obj := range handledTypes() {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			fillSparse(reflect.ValueOf(obj).Elem(), 0)
			if err := exercise(obj, obj.DeepCopyObject()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestUpdateRejectsMismatchedTypes(t *testing.T) {
	errs := ValidateUpdate(&corev1.Pod{}, &corev1.Service{})
	if len(errs) != 1 {
		t.Fatalf("expected one internal error, got %v", errs)
	}
}

func TestUnknownTypesAreIgnored(t *testing.T) {
	obj := &corev1.PodList{}
	if errs := Validate(obj); len(errs) != 0 {
		t.Fatalf("unknown type produced errors: %v", errs)
	}
	defaults.Apply(obj)
	if len(obj.Items) != 0 {
		t.Fatalf("unknown type was modified: %+v", obj)
	}
}

func fillSparse(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() {
				fillSparse(f, depth+1)
			}
		}
	case reflect.Pointer:
		if v.IsNil() && v.Type().Elem().Kind() == reflect.Struct {
			v.Set(reflect.New(v.Type().Elem()))
			fillSparse(v.Elem(), depth+1)
		}
	case reflect.Slice:
		if v.Len() == 0 && v.Type().Elem().Kind() != reflect.Uint8 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			fillSparse(v.Index(0), depth+1)
		}
	}
}
