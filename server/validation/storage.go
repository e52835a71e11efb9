package validation

import (
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	maxProvisionerParameters    = 512
	maxProvisionerParameterSize = 256 * (1 << 10)
)

func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, required string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		errs = append(errs, field.Required(fldPath, required))
	}
	rwop, other := false, false
	for _, m := range modes {
		switch m {
		case corev1.ReadWriteOncePod:
			rwop = true
		case corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany:
			other = true
		default:
			errs = append(errs, notSupported(fldPath, m, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod)...)
		}
	}
	if rwop && other {
		errs = append(errs, field.Forbidden(fldPath, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

func positiveQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be greater than zero")}
	}
	return nil
}

func validatePVC(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validateMeta(&pvc.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, validatePVCSpec(&pvc.Spec, specPath)...)
}

func validatePVCSpec(spec *corev1.PersistentVolumeClaimSpec, fldPath *field.Path) field.ErrorList {
	errs := validateAccessModes(spec.AccessModes, "at least 1 access mode is required", fldPath.Child("accessModes"))
	errs = append(errs, validateLabelSelector(spec.Selector, fldPath.Child("selector"))...)
	storagePath := fldPath.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(storagePath, ""))
	} else {
		errs = append(errs, positiveQuantity(q, storagePath)...)
	}
	if spec.StorageClassName != nil && *spec.StorageClassName != "" {
		errs = append(errs, dns1123Subdomain(*spec.StorageClassName, fldPath.Child("storageClassName"))...)
	}
	if spec.VolumeMode != nil {
		errs = append(errs, enum(*spec.VolumeMode, fldPath.Child("volumeMode"), corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem)...)
	}
	if ds := spec.DataSource; ds != nil {
		errs = append(errs, validateDataSource(ds.Name, ds.Kind, fldPath.Child("dataSource"))...)
	}
	if ref := spec.DataSourceRef; ref != nil {
		errs = append(errs, validateDataSource(ref.Name, ref.Kind, fldPath.Child("dataSourceRef"))...)
		crossNamespace := ref.Namespace != nil && *ref.Namespace != ""
		switch {
		case crossNamespace && spec.DataSource != nil:
			errs = append(errs, field.Invalid(fldPath, fldPath.Child("dataSource"), "may not be specified when dataSourceRef.namespace is specified"))
		case spec.DataSource != nil && !dataSourcesMatch(spec.DataSource, ref):
			errs = append(errs, field.Invalid(fldPath, fldPath.Child("dataSource"), "must match dataSourceRef"))
		}
	}
	return errs
}

func validateDataSource(name, kind string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	}
	if kind == "" {
		errs = append(errs, field.Required(fldPath.Child("kind"), ""))
	}
	return errs
}

func dataSourcesMatch(ds *corev1.TypedLocalObjectReference, ref *corev1.TypedObjectReference) bool {
	return reflect.DeepEqual(ds.APIGroup, ref.APIGroup) && ds.Kind == ref.Kind && ds.Name == ref.Name
}

// validatePVCUpdate: a claim is fixed once created, because quota and limit
// checks were made against it; a bound claim may only grow its storage
// request (or shrink it back towards its actual capacity) and change class.
func validatePVCUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validateMetaUpdate(&pvc.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePVCSpec(&pvc.Spec, specPath)...)
	newSpec, oldSpec := pvc.Spec.DeepCopy(), old.Spec.DeepCopy()
	if old.Spec.VolumeName == "" {
		// The volume binder records the bound volume once.
		oldSpec.VolumeName = newSpec.VolumeName
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		if newSpec.Resources.Requests != nil {
			newSpec.Resources.Requests[corev1.ResourceStorage] = old.Spec.Resources.Requests[corev1.ResourceStorage]
		}
		oldSpec.VolumeAttributesClassName = newSpec.VolumeAttributesClassName
	}
	if !semanticEqual(newSpec, oldSpec) {
		errs = append(errs, field.Forbidden(specPath, "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"))
	}
	newSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	oldSize := old.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := old.Status.Capacity[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 && newSize.Cmp(capacity) <= 0 {
		errs = append(errs, field.Forbidden(specPath.Child("resources", "requests", "storage"), "field can not be less than status.capacity"))
	}
	return errs
}

func validatePV(pv *corev1.PersistentVolume) field.ErrorList {
	errs := validateMeta(&pv.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	spec := &pv.Spec
	errs = append(errs, validateAccessModes(spec.AccessModes, "", specPath.Child("accessModes"))...)
	capPath := specPath.Child("capacity")
	if len(spec.Capacity) == 0 {
		errs = append(errs, field.Required(capPath, ""))
	}
	if _, ok := spec.Capacity[corev1.ResourceStorage]; !ok || len(spec.Capacity) > 1 {
		errs = append(errs, notSupported(capPath, corev1.ResourceName(resourceNames(spec.Capacity)), corev1.ResourceStorage)...)
	}
	for name, q := range spec.Capacity {
		errs = append(errs, positiveQuantity(q, capPath.Key(string(name)))...)
	}
	if spec.StorageClassName != "" {
		errs = append(errs, dns1123Subdomain(spec.StorageClassName, specPath.Child("storageClassName"))...)
	}
	if spec.VolumeMode != nil {
		errs = append(errs, enum(*spec.VolumeMode, specPath.Child("volumeMode"), corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem)...)
	}
	errs = append(errs, optionalEnum(spec.PersistentVolumeReclaimPolicy, specPath.Child("persistentVolumeReclaimPolicy"),
		corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain)...)
	if na := spec.NodeAffinity; na != nil && na.Required != nil {
		errs = append(errs, validateNodeSelector(na.Required, specPath.Child("nodeAffinity", "required"))...)
	}
	return append(errs, validatePVSource(spec, specPath)...)
}

func resourceNames(list corev1.ResourceList) string {
	names := make([]string, 0, len(list))
	for n := range list {
		names = append(names, string(n))
	}
	return strings.Join(names, ",")
}

func validatePVSource(spec *corev1.PersistentVolumeSpec, fldPath *field.Path) field.ErrorList {
	s := &spec.PersistentVolumeSource
	checks := []volumeSourceCheck{
		{"gcePersistentDisk", s.GCEPersistentDisk != nil, nil},
		{"awsElasticBlockStore", s.AWSElasticBlockStore != nil, nil},
		{"hostPath", s.HostPath != nil, func(p *field.Path) field.ErrorList { return validateHostPath(s.HostPath, p) }},
		{"glusterfs", s.Glusterfs != nil, nil},
		{"nfs", s.NFS != nil, func(p *field.Path) field.ErrorList { return validateNFS(s.NFS, p) }},
		{"rbd", s.RBD != nil, func(p *field.Path) field.ErrorList { return validateRBD(s.RBD.CephMonitors, s.RBD.RBDImage, p) }},
		{"iscsi", s.ISCSI != nil, func(p *field.Path) field.ErrorList {
			return validateISCSI(s.ISCSI.TargetPortal, s.ISCSI.IQN, s.ISCSI.Lun, p)
		}},
		{"cinder", s.Cinder != nil, nil},
		{"cephfs", s.CephFS != nil, nil},
		{"fc", s.FC != nil, nil},
		{"flocker", s.Flocker != nil, nil},
		{"flexVolume", s.FlexVolume != nil, nil},
		{"azureFile", s.AzureFile != nil, nil},
		{"vsphereVolume", s.VsphereVolume != nil, nil},
		{"quobyte", s.Quobyte != nil, nil},
		{"azureDisk", s.AzureDisk != nil, nil},
		{"photonPersistentDisk", s.PhotonPersistentDisk != nil, nil},
		{"portworxVolume", s.PortworxVolume != nil, nil},
		{"scaleIO", s.ScaleIO != nil, nil},
		{"local", s.Local != nil, func(p *field.Path) field.ErrorList { return validateLocalVolume(spec, p) }},
		{"storageos", s.StorageOS != nil, nil},
		{"csi", s.CSI != nil, func(p *field.Path) field.ErrorList {
			errs := validateCSIDriverName(s.CSI.Driver, p.Child("driver"))
			if s.CSI.VolumeHandle == "" {
				errs = append(errs, field.Required(p.Child("volumeHandle"), ""))
			}
			return errs
		}},
	}
	return validateSources(checks, fldPath)
}

// validateLocalVolume: a local volume exists on one node only, so the
// scheduler must be told which through node affinity.
func validateLocalVolume(spec *corev1.PersistentVolumeSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Local.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	} else if hasBacksteps(spec.Local.Path) {
		errs = append(errs, field.Invalid(fldPath.Child("path"), spec.Local.Path, "must not contain '..'"))
	}
	if spec.NodeAffinity == nil || spec.NodeAffinity.Required == nil {
		errs = append(errs, field.Required(specPath.Child("nodeAffinity"), "Local volume requires node affinity"))
	}
	return errs
}

func validatePVUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	errs := validateMetaUpdate(&pv.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePV(pv)...)
	if !semanticEqual(pv.Spec.PersistentVolumeSource, old.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(specPath.Child("persistentvolumesource"), "spec.persistentvolumesource is immutable after creation"))
	}
	errs = append(errs, immutable(pv.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.NodeAffinity != nil {
		errs = append(errs, immutable(pv.Spec.NodeAffinity, old.Spec.NodeAffinity, field.NewPath("nodeAffinity"))...)
	}
	return errs
}

func validateStorageClass(sc *storagev1.StorageClass) field.ErrorList {
	errs := validateMeta(&sc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	provPath := field.NewPath("provisioner")
	if sc.Provisioner == "" {
		errs = append(errs, field.Required(provPath, ""))
	} else {
		errs = append(errs, qualifiedName(strings.ToLower(sc.Provisioner), provPath)...)
	}
	errs = append(errs, validateProvisionerParameters(sc.Parameters, field.NewPath("parameters"))...)
	if sc.ReclaimPolicy != nil {
		errs = append(errs, optionalEnum(*sc.ReclaimPolicy, field.NewPath("reclaimPolicy"),
			corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain)...)
	}
	if sc.VolumeBindingMode == nil {
		errs = append(errs, field.Required(field.NewPath("volumeBindingMode"), ""))
	} else {
		errs = append(errs, enum(*sc.VolumeBindingMode, field.NewPath("volumeBindingMode"),
			storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer)...)
	}
	topoPath := field.NewPath("allowedTopologies")
	for i, term := range sc.AllowedTopologies {
		termPath := topoPath.Index(i)
		if len(term.MatchLabelExpressions) == 0 {
			errs = append(errs, field.Required(termPath.Child("matchLabelExpressions"), "must contain at least one key/value pair"))
		}
		for j, req := range term.MatchLabelExpressions {
			reqPath := termPath.Child("matchLabelExpressions").Index(j)
			errs = append(errs, qualifiedName(req.Key, reqPath.Child("key"))...)
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(reqPath.Child("values"), "must specify as least one value"))
			}
		}
	}
	return errs
}

func validateProvisionerParameters(params map[string]string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(params) > maxProvisionerParameters {
		errs = append(errs, field.TooLong(fldPath, "Provisioner Parameters exceeded max allowed", maxProvisionerParameters))
	}
	total := 0
	for k, v := range params {
		if k == "" {
			errs = append(errs, field.Invalid(fldPath, k, "field can not be empty."))
		}
		total += len(k) + len(v)
	}
	if total > maxProvisionerParameterSize {
		errs = append(errs, field.TooLong(fldPath, "", maxProvisionerParameterSize))
	}
	return errs
}

// validateStorageClassUpdate: provisioning behaviour may not change under
// volumes that were already provisioned with it.
func validateStorageClassUpdate(sc, old *storagev1.StorageClass) field.ErrorList {
	errs := validateMetaUpdate(&sc.ObjectMeta, &old.ObjectMeta)
	if !reflect.DeepEqual(sc.Parameters, old.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != old.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if deref(sc.ReclaimPolicy, "") != deref(old.ReclaimPolicy, "") {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	return append(errs, immutable(sc.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
}

func validateCSIDriver(d *storagev1.CSIDriver) field.ErrorList {
	errs := validateMeta(&d.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	if d.Name != "" {
		errs = append(errs, validateCSIDriverName(d.Name, metaPath.Child("name"))...)
	}
	if d.Spec.FSGroupPolicy != nil {
		errs = append(errs, enum(*d.Spec.FSGroupPolicy, specPath.Child("fsGroupPolicy"), storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy,
			storagev1.FileFSGroupPolicy, storagev1.NoneFSGroupPolicy)...)
	}
	for i, m := range d.Spec.VolumeLifecycleModes {
		errs = append(errs, enum(m, specPath.Child("volumeLifecycleModes").Index(i), storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral)...)
	}
	return errs
}

func validateCSIDriverUpdate(d, old *storagev1.CSIDriver) field.ErrorList {
	errs := validateMetaUpdate(&d.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateCSIDriver(d)...)
	errs = append(errs, immutable(d.Spec.AttachRequired, old.Spec.AttachRequired, specPath.Child("attachRequired"))...)
	return append(errs, immutable(d.Spec.VolumeLifecycleModes, old.Spec.VolumeLifecycleModes, specPath.Child("volumeLifecycleModes"))...)
}
