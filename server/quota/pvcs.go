package quota

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var pvcCountName = CountName(schema.GroupResource{Resource: "persistentvolumeclaims"})

var pvcResources = []corev1.ResourceName{corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage}

// StorageClassSuffix joins a class name and a PVC resource into a
// per-class quota name: gold.storageclass.storage.k8s.io/requests.storage.
const StorageClassSuffix = ".storageclass.storage.k8s.io/"

// ByStorageClass returns the per-class quota name of a PVC resource.
func ByStorageClass(class string, name corev1.ResourceName) corev1.ResourceName {
	return corev1.ResourceName(class + StorageClassSuffix + string(name))
}

type pvcEvaluator struct{}

func (pvcEvaluator) GroupResource() schema.GroupResource {
	return schema.GroupResource{Resource: "persistentvolumeclaims"}
}

// Handles creates and updates (expansion), and status writes that change
// the allocated size or the volume attributes classes (both change usage).
func (pvcEvaluator) Handles(op Operation, subresource string, obj, old runtime.Object) bool {
	switch subresource {
	case "":
		return op == Create || op == Update
	case "status":
		pvc, ok1 := obj.(*corev1.PersistentVolumeClaim)
		oldPVC, ok2 := old.(*corev1.PersistentVolumeClaim)
		if !ok1 || !ok2 {
			return false
		}
		a, b := pvc.Status.AllocatedResources.Storage(), oldPVC.Status.AllocatedResources.Storage()
		return a.Cmp(*b) != 0 || !slices.Equal(vacNames(pvc), vacNames(oldPVC))
	}
	return false
}

func (pvcEvaluator) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range names {
		switch {
		case n == pvcCountName || slices.Contains(pvcResources, n):
			out = append(out, n)
		default:
			for _, r := range pvcResources {
				if strings.HasSuffix(string(n), StorageClassSuffix+string(r)) {
					out = append(out, n)
					break
				}
			}
		}
	}
	return out
}

// MatchesScope knows the VolumeAttributesClass scope (GA and locked on in
// 1.37): the classes named in spec, status and a pending modification.
func (pvcEvaluator) MatchesScope(sel corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	pvc, err := asPVC(obj)
	if err != nil {
		return false, err
	}
	if sel.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
		return false, nil
	}
	names := vacNames(pvc)
	if sel.Operator == corev1.ScopeSelectorOpExists {
		return len(names) != 0, nil
	}
	if len(names) == 0 {
		return selectorMatches(sel, labels.Set{})
	}
	for _, n := range names {
		ok, err := selectorMatches(sel, labels.Set{string(corev1.ResourceQuotaScopeVolumeAttributesClass): n})
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func (pvcEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Usage: one claim (also per class), and its requested storage, or the
// allocated size when that is larger (a failed expansion being recovered
// stays charged at what was allocated), rounded up to whole bytes.
func (pvcEvaluator) Usage(obj runtime.Object) (corev1.ResourceList, error) {
	pvc, err := asPVC(obj)
	if err != nil {
		return nil, err
	}
	out := corev1.ResourceList{
		corev1.ResourcePersistentVolumeClaims: one.DeepCopy(),
		pvcCountName:                          one.DeepCopy(),
	}
	class := pvcClass(pvc)
	if class != "" {
		out[ByStorageClass(class, corev1.ResourcePersistentVolumeClaims)] = one.DeepCopy()
	}
	if storage := storageUsage(pvc); storage != nil {
		out[corev1.ResourceRequestsStorage] = *storage
		if class != "" {
			out[ByStorageClass(class, corev1.ResourceRequestsStorage)] = storage.DeepCopy()
		}
	}
	return out, nil
}

func storageUsage(pvc *corev1.PersistentVolumeClaim) *resource.Quantity {
	req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil
	}
	out := roundUp(req)
	if alloc, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && alloc.Cmp(out) > 0 {
		out = roundUp(alloc)
	}
	return &out
}

func roundUp(q resource.Quantity) resource.Quantity {
	q = q.DeepCopy()
	q.RoundUp(0)
	return q
}

// pvcClass: spec.storageClassName, else the beta annotation.
func pvcClass(pvc *corev1.PersistentVolumeClaim) string {
	if c, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return c
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

func vacNames(pvc *corev1.PersistentVolumeClaim) []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if n := pvc.Spec.VolumeAttributesClassName; n != nil {
		add(*n)
	}
	if n := pvc.Status.CurrentVolumeAttributesClassName; n != nil {
		add(*n)
	}
	if m := pvc.Status.ModifyVolumeStatus; m != nil {
		add(m.TargetVolumeAttributesClassName)
	}
	slices.Sort(out)
	return out
}

func asPVC(obj runtime.Object) (*corev1.PersistentVolumeClaim, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, fmt.Errorf("expect *v1.PersistentVolumeClaim, got %T", obj)
	}
	return pvc, nil
}
