package validation

import (
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateExtraKind validates the kinds of resource.k8s.io/v1, storagemigration.k8s.io/v1, storage.k8s.io/v1 VolumeAttributesClass and CSIStorageCapacity, autoscaling/v1, ComponentStatus.
func validateExtraKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *resourcev1.DeviceClass:
		return validateDeviceClass(o), true
	case *resourcev1.ResourceClaim:
		return validateResourceClaim(o), true
	case *resourcev1.ResourceClaimTemplate:
		return validateResourceClaimTemplate(o), true
	case *resourcev1.ResourceSlice:
		return validateResourceSlice(o, nil), true
	case *resourcev1.DeviceTaintRule:
		return validateDeviceTaintRule(o, nil), true
	case *storagemigrationv1.StorageVersionMigration:
		return validateStorageVersionMigration(o), true
	case *storagev1.VolumeAttributesClass:
		return validateVolumeAttributesClass(o), true
	case *storagev1.CSIStorageCapacity:
		return validateCSIStorageCapacity(o), true
	case *autoscalingv1.HorizontalPodAutoscaler:
		return validateHPAV1(o), true
	case *corev1.ComponentStatus:
		return nil, true // computed, never written
	}
	return nil, false
}

// updateExtraKind validates updates of the kinds of resource.k8s.io/v1, storagemigration.k8s.io/v1, storage.k8s.io/v1 VolumeAttributesClass and CSIStorageCapacity, autoscaling/v1, ComponentStatus.
func updateExtraKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *resourcev1.DeviceClass:
		return append(validateMetaUpdate(&o.ObjectMeta, &old.(*resourcev1.DeviceClass).ObjectMeta), validateDeviceClass(o)...), true
	case *resourcev1.ResourceClaim:
		return validateResourceClaimUpdate(o, old.(*resourcev1.ResourceClaim)), true
	case *resourcev1.ResourceClaimTemplate:
		return validateResourceClaimTemplateUpdate(o, old.(*resourcev1.ResourceClaimTemplate)), true
	case *resourcev1.ResourceSlice:
		return validateResourceSlice(o, old.(*resourcev1.ResourceSlice)), true
	case *resourcev1.DeviceTaintRule:
		return validateDeviceTaintRule(o, old.(*resourcev1.DeviceTaintRule)), true
	case *storagemigrationv1.StorageVersionMigration:
		return validateStorageVersionMigrationUpdate(o, old.(*storagemigrationv1.StorageVersionMigration)), true
	case *storagev1.VolumeAttributesClass:
		return validateVolumeAttributesClassUpdate(o, old.(*storagev1.VolumeAttributesClass)), true
	case *storagev1.CSIStorageCapacity:
		return validateCSIStorageCapacityUpdate(o, old.(*storagev1.CSIStorageCapacity)), true
	case *autoscalingv1.HorizontalPodAutoscaler:
		return append(validateMetaUpdate(&o.ObjectMeta, &old.(*autoscalingv1.HorizontalPodAutoscaler).ObjectMeta), validateHPAV1(o)...), true
	case *corev1.ComponentStatus:
		return nil, true
	}
	return nil, false
}

func validateVolumeAttributesClass(c *storagev1.VolumeAttributesClass) field.ErrorList {
	errs := validateMeta(&c.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	p := field.NewPath("driverName")
	if c.DriverName == "" {
		errs = append(errs, field.Required(p, ""))
	} else {
		errs = append(errs, validateCSIDriverName(c.DriverName, p)...)
	}
	pp := field.NewPath("parameters")
	errs = append(errs, validateProvisionerParameters(c.Parameters, pp)...)
	if len(c.Parameters) == 0 {
		errs = append(errs, field.Required(pp, "must contain at least one key/value pair"))
	}
	return errs
}

func validateVolumeAttributesClassUpdate(c, old *storagev1.VolumeAttributesClass) field.ErrorList {
	errs := validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	if c.DriverName != old.DriverName {
		errs = append(errs, field.Forbidden(field.NewPath("driverName"), "updates to driverName are forbidden."))
	}
	if !semanticEqual(c.Parameters, old.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	return append(errs, validateVolumeAttributesClass(c)...)
}

func validateCSIStorageCapacity(c *storagev1.CSIStorageCapacity) field.ErrorList {
	errs := validateMeta(&c.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, metavalidation.ValidateLabelSelector(c.NodeTopology, metavalidation.LabelSelectorValidationOptions{}, field.NewPath("nodeTopology"))...)
	errs = append(errs, messages(field.NewPath("storageClassName"), c.StorageClassName, apivalidation.NameIsDNSSubdomain(c.StorageClassName, false))...)
	if c.Capacity != nil {
		errs = append(errs, quantityNonNegative(*c.Capacity, field.NewPath("capacity"))...)
	}
	return errs
}

func validateCSIStorageCapacityUpdate(c, old *storagev1.CSIStorageCapacity) field.ErrorList {
	errs := validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	// the inputs of the driver's GetCapacity call
	if !semanticEqual(c.NodeTopology, old.NodeTopology) {
		errs = append(errs, field.Invalid(field.NewPath("nodeTopology"), c.NodeTopology, "field is immutable"))
	}
	if c.StorageClassName != old.StorageClassName {
		errs = append(errs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, "field is immutable"))
	}
	return append(errs, validateCSIStorageCapacity(c)...)
}

// validateHPAV1 checks a v1 HorizontalPodAutoscaler with upstream's rules
// for what v1 can express (the rest is carried over from v2 and was
// validated there).
func validateHPAV1(h *autoscalingv1.HorizontalPodAutoscaler) field.ErrorList {
	errs := validateMeta(&h.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	ref, refPath := h.Spec.ScaleTargetRef, specPath.Child("scaleTargetRef")
	if ref.Kind == "" {
		errs = append(errs, field.Required(refPath.Child("kind"), ""))
	} else {
		errs = append(errs, messages(refPath.Child("kind"), ref.Kind, nameIsPathSegment(ref.Kind, false))...)
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(refPath.Child("name"), ""))
	} else {
		errs = append(errs, messages(refPath.Child("name"), ref.Name, nameIsPathSegment(ref.Name, false))...)
	}
	if min := h.Spec.MinReplicas; min != nil && *min < 1 {
		// upstream allows 0 only behind the HPAScaleToZero gate (off)
		errs = append(errs, field.Invalid(specPath.Child("minReplicas"), *min, "must be greater than or equal to 1"))
	}
	if h.Spec.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(specPath.Child("maxReplicas"), h.Spec.MaxReplicas, "must be greater than 0"))
	}
	if min := h.Spec.MinReplicas; min != nil && h.Spec.MaxReplicas < *min {
		errs = append(errs, field.Invalid(specPath.Child("maxReplicas"), h.Spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	if p := h.Spec.TargetCPUUtilizationPercentage; p != nil && *p < 1 {
		errs = append(errs, field.Invalid(specPath.Child("targetCPUUtilizationPercentage"), *p, "must be greater than 0"))
	}
	return errs
}

func validateStorageVersionMigration(m *storagemigrationv1.StorageVersionMigration) field.ErrorList {
	errs := validateMeta(&m.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	rp := specPath.Child("resource")
	if m.Spec.Resource.Resource == "" {
		errs = append(errs, field.Required(rp.Child("resource"), "resource is required to be set"))
	} else {
		errs = append(errs, joined(rp.Child("resource"), m.Spec.Resource.Resource, dns1035Label(m.Spec.Resource.Resource))...)
	}
	if g := m.Spec.Resource.Group; g != "" {
		errs = append(errs, joined(rp.Child("group"), g, dns1123SubdomainMsgs(g))...)
	}
	return errs
}

// validateStorageVersionMigrationUpdate covers spec and status writes: the
// spec is immutable, the status keeps upstream's invariants.
func validateStorageVersionMigrationUpdate(m, old *storagemigrationv1.StorageVersionMigration) field.ErrorList {
	errs := append(validateStorageVersionMigration(m), validateMetaUpdate(&m.ObjectMeta, &old.ObjectMeta)...)
	errs = append(errs, immutable(m.Spec, old.Spec, specPath)...)
	sp := field.NewPath("status")
	if rv := m.Status.ResourceVersion; rv != "" && !isResourceVersion(rv) {
		errs = append(errs, field.Invalid(sp.Child("resourceVersion"), rv, fmt.Sprintf("unable to compare resource versions, %s is not a valid resource version", rv)))
	}
	errs = append(errs, metavalidation.ValidateConditions(m.Status.Conditions, sp.Child("conditions"))...)
	if old.Status.ResourceVersion != "" && old.Status.ResourceVersion != m.Status.ResourceVersion {
		errs = append(errs, field.Invalid(sp.Child("resourceVersion"), m.Status.ResourceVersion, "field is immutable"))
	}
	succeeded, failed := svmCondition(m, storagemigrationv1.MigrationSucceeded), svmCondition(m, storagemigrationv1.MigrationFailed)
	if succeeded && failed {
		errs = append(errs, field.Invalid(sp.Child("conditions"), m.Status.Conditions, "Both success and failed conditions cannot be true at the same time"))
	}
	if svmCondition(old, storagemigrationv1.MigrationSucceeded) && !succeeded {
		errs = append(errs, field.Invalid(sp.Child("conditions"), m.Status.Conditions, "Success condition cannot be set to false once it is true"))
	}
	if svmCondition(old, storagemigrationv1.MigrationFailed) && !failed {
		errs = append(errs, field.Invalid(sp.Child("conditions"), m.Status.Conditions, "Failed condition cannot be set to false once it is true"))
	}
	return errs
}

func svmCondition(m *storagemigrationv1.StorageVersionMigration, t storagemigrationv1.MigrationConditionType) bool {
	for _, c := range m.Status.Conditions {
		if c.Type == string(t) {
			return c.Status == "True"
		}
	}
	return false
}

// isResourceVersion: upstream compares resourceVersions as unsigned
// decimal integers without leading zeros.
func isResourceVersion(rv string) bool {
	if rv == "" || (len(rv) > 1 && rv[0] == '0') {
		return false
	}
	for _, c := range rv {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func dns1035Label(v string) []string { return utilvalidation.IsDNS1035Label(v) }

func dns1123SubdomainMsgs(v string) []string { return utilvalidation.IsDNS1123Subdomain(v) }

// joined is one Invalid error carrying all messages, as upstream reports
// the resource and group of a migration.
func joined(fldPath *field.Path, value string, msgs []string) field.ErrorList {
	if len(msgs) == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, value, strings.Join(msgs, ","))}
}
