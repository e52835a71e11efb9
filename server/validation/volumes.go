package validation

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

// validateVolumes returns the errors and the volumes that are valid, by name;
// containers may only mount those, so a broken volume also fails its mounts.
func validateVolumes(volumes []corev1.Volume, fldPath *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	valid := map[string]corev1.VolumeSource{}
	names := sets.New[string]()
	for i, v := range volumes {
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		el := validateVolumeSource(&v.VolumeSource, idxPath)
		if v.Name == "" {
			el = append(el, field.Required(namePath, ""))
		} else {
			el = append(el, dns1123Label(v.Name, namePath)...)
		}
		if names.Has(v.Name) {
			el = append(el, field.Duplicate(namePath, v.Name))
		}
		if len(el) == 0 {
			names.Insert(v.Name)
			valid[v.Name] = v.VolumeSource
		}
		errs = append(errs, el...)
	}
	return valid, errs
}

// volumeSourceCheck is one possible source of a volume: whether it is set and
// how to validate it.
type volumeSourceCheck struct {
	name     string
	set      bool
	validate func(*field.Path) field.ErrorList
}

// validateSources enforces that exactly one source is set and validates it.
func validateSources(checks []volumeSourceCheck, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	count := 0
	for _, c := range checks {
		if !c.set {
			continue
		}
		if count > 0 {
			errs = append(errs, field.Forbidden(fldPath.Child(c.name), "may not specify more than 1 volume type"))
			continue
		}
		count++
		if c.validate != nil {
			errs = append(errs, c.validate(fldPath.Child(c.name))...)
		}
	}
	if count == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a volume type"))
	}
	return errs
}

func validateVolumeSource(s *corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	checks := []volumeSourceCheck{
		{"hostPath", s.HostPath != nil, func(p *field.Path) field.ErrorList { return validateHostPath(s.HostPath, p) }},
		{"emptyDir", s.EmptyDir != nil, func(p *field.Path) field.ErrorList { return validateEmptyDir(s.EmptyDir, p) }},
		{"gcePersistentDisk", s.GCEPersistentDisk != nil, nil},
		{"awsElasticBlockStore", s.AWSElasticBlockStore != nil, nil},
		{"secret", s.Secret != nil, func(p *field.Path) field.ErrorList { return validateSecretVolume(s.Secret, p) }},
		{"nfs", s.NFS != nil, func(p *field.Path) field.ErrorList { return validateNFS(s.NFS, p) }},
		{"iscsi", s.ISCSI != nil, func(p *field.Path) field.ErrorList {
			return validateISCSI(s.ISCSI.TargetPortal, s.ISCSI.IQN, s.ISCSI.Lun, p)
		}},
		{"glusterfs", s.Glusterfs != nil, nil},
		{"persistentVolumeClaim", s.PersistentVolumeClaim != nil, func(p *field.Path) field.ErrorList {
			if s.PersistentVolumeClaim.ClaimName == "" {
				return field.ErrorList{field.Required(p.Child("claimName"), "")}
			}
			return nil
		}},
		{"rbd", s.RBD != nil, func(p *field.Path) field.ErrorList { return validateRBD(s.RBD.CephMonitors, s.RBD.RBDImage, p) }},
		{"quobyte", s.Quobyte != nil, nil},
		{"gitRepo", s.GitRepo != nil, func(p *field.Path) field.ErrorList { return validateGitRepo(s.GitRepo, p) }},
		{"cinder", s.Cinder != nil, nil},
		{"cephfs", s.CephFS != nil, nil},
		{"flocker", s.Flocker != nil, nil},
		{"flexVolume", s.FlexVolume != nil, nil},
		{"downwardAPI", s.DownwardAPI != nil, func(p *field.Path) field.ErrorList { return validateDownwardAPIVolume(s.DownwardAPI, p) }},
		{"fc", s.FC != nil, nil},
		{"azureFile", s.AzureFile != nil, nil},
		{"vsphereVolume", s.VsphereVolume != nil, nil},
		{"azureDisk", s.AzureDisk != nil, nil},
		{"photonPersistentDisk", s.PhotonPersistentDisk != nil, nil},
		{"portworxVolume", s.PortworxVolume != nil, nil},
		{"scaleIO", s.ScaleIO != nil, nil},
		{"storageos", s.StorageOS != nil, nil},
		{"configMap", s.ConfigMap != nil, func(p *field.Path) field.ErrorList { return validateConfigMapVolume(s.ConfigMap, p) }},
		{"projected", s.Projected != nil, func(p *field.Path) field.ErrorList { return validateProjected(s.Projected, p) }},
		{"csi", s.CSI != nil, func(p *field.Path) field.ErrorList { return validateCSIDriverName(s.CSI.Driver, p.Child("driver")) }},
		{"ephemeral", s.Ephemeral != nil, func(p *field.Path) field.ErrorList { return validateEphemeral(s.Ephemeral, p) }},
		{"image", s.Image != nil, func(p *field.Path) field.ErrorList { return validateImageVolume(s.Image, p) }},
	}
	return validateSources(checks, fldPath)
}

func validateHostPath(h *corev1.HostPathVolumeSource, fldPath *field.Path) field.ErrorList {
	if h.Path == "" {
		return field.ErrorList{field.Required(fldPath.Child("path"), "")}
	}
	var errs field.ErrorList
	if hasBacksteps(h.Path) {
		errs = append(errs, field.Invalid(fldPath.Child("path"), h.Path, "must not contain '..'"))
	}
	if h.Type != nil && *h.Type != corev1.HostPathUnset {
		errs = append(errs, enum(*h.Type, fldPath.Child("type"), corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
			corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev)...)
	}
	return errs
}

func validateEmptyDir(e *corev1.EmptyDirVolumeSource, fldPath *field.Path) field.ErrorList {
	if e.SizeLimit != nil && e.SizeLimit.Sign() < 0 {
		return field.ErrorList{field.Forbidden(fldPath.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity")}
	}
	return nil
}

func validateFileMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0o777 || *mode < 0) {
		return field.ErrorList{field.Invalid(fldPath, *mode, fileModeErrorMsg)}
	}
	return nil
}

func validateSecretVolume(s *corev1.SecretVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.SecretName == "" {
		errs = append(errs, field.Required(fldPath.Child("secretName"), ""))
	}
	errs = append(errs, validateFileMode(s.DefaultMode, fldPath.Child("defaultMode"))...)
	for i := range s.Items {
		errs = append(errs, validateKeyToPath(&s.Items[i], fldPath.Child("items").Index(i))...)
	}
	return errs
}

func validateConfigMapVolume(s *corev1.ConfigMapVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	}
	errs = append(errs, validateFileMode(s.DefaultMode, fldPath.Child("defaultMode"))...)
	for i := range s.Items {
		errs = append(errs, validateKeyToPath(&s.Items[i], fldPath.Child("items").Index(i))...)
	}
	return errs
}

func validateKeyToPath(kp *corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if kp.Key == "" {
		errs = append(errs, field.Required(fldPath.Child("key"), ""))
	}
	if kp.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	}
	errs = append(errs, localNonReservedPath(kp.Path, fldPath.Child("path"))...)
	return append(errs, validateFileMode(kp.Mode, fldPath.Child("mode"))...)
}

// localNonReservedPath also rejects "..name": the kubelet keeps its own
// bookkeeping files under names starting with "..".
func localNonReservedPath(p string, fldPath *field.Path) field.ErrorList {
	errs := localDescendingPath(p, fldPath)
	if strings.HasPrefix(p, "..") && !strings.HasPrefix(p, "../") {
		errs = append(errs, field.Invalid(fldPath, p, "must not start with '..'"))
	}
	return errs
}

func validateNFS(n *corev1.NFSVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n.Server == "" {
		errs = append(errs, field.Required(fldPath.Child("server"), ""))
	}
	if n.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	}
	if !path.IsAbs(n.Path) {
		errs = append(errs, field.Invalid(fldPath.Child("path"), n.Path, "must be an absolute path"))
	}
	return errs
}

func validateISCSI(portal, iqn string, lun int32, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if portal == "" {
		errs = append(errs, field.Required(fldPath.Child("targetPortal"), ""))
	}
	if iqn == "" {
		errs = append(errs, field.Required(fldPath.Child("iqn"), ""))
	}
	if lun < 0 || lun > 255 {
		errs = append(errs, field.Invalid(fldPath.Child("lun"), lun, utilvalidation.InclusiveRangeError(0, 255)))
	}
	return errs
}

func validateRBD(monitors []string, image string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(monitors) == 0 {
		errs = append(errs, field.Required(fldPath.Child("monitors"), ""))
	}
	if image == "" {
		errs = append(errs, field.Required(fldPath.Child("image"), ""))
	}
	return errs
}

func validateGitRepo(g *corev1.GitRepoVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if g.Repository == "" {
		errs = append(errs, field.Required(fldPath.Child("repository"), ""))
	}
	return append(errs, localDescendingPath(g.Directory, fldPath.Child("directory"))...)
}

func validateDownwardAPIVolume(d *corev1.DownwardAPIVolumeSource, fldPath *field.Path) field.ErrorList {
	errs := validateFileMode(d.DefaultMode, fldPath.Child("defaultMode"))
	for i := range d.Items {
		errs = append(errs, validateDownwardAPIFile(&d.Items[i], fldPath.Child("items").Index(i))...)
	}
	return errs
}

func validateDownwardAPIFile(f *corev1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if f.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	}
	errs = append(errs, localNonReservedPath(f.Path, fldPath.Child("path"))...)
	switch {
	case f.FieldRef != nil:
		errs = append(errs, validateFieldSelector(f.FieldRef, volumeFieldPaths, fldPath.Child("fieldRef"))...)
		if f.ResourceFieldRef != nil {
			errs = append(errs, field.Invalid(fldPath, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case f.ResourceFieldRef != nil:
		errs = append(errs, validateResourceFieldSelector(f.ResourceFieldRef, true, fldPath.Child("resourceFieldRef"))...)
	default:
		errs = append(errs, field.Required(fldPath, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(errs, validateFileMode(f.Mode, fldPath.Child("mode"))...)
}

func validateProjected(p *corev1.ProjectedVolumeSource, fldPath *field.Path) field.ErrorList {
	errs := validateFileMode(p.DefaultMode, fldPath.Child("defaultMode"))
	paths := sets.New[string]()
	// addPath reports two sources writing the same file of the volume.
	addPath := func(file, owner string) {
		if file == "" {
			return
		}
		if paths.Has(file) {
			errs = append(errs, field.Invalid(fldPath, owner, "conflicting duplicate paths"))
		}
		paths.Insert(file)
	}
	for i, src := range p.Sources {
		srcPath := fldPath.Child("sources").Index(i)
		errs = append(errs, validateProjection(&src, srcPath, addPath)...)
	}
	return errs
}

func validateProjection(src *corev1.VolumeProjection, srcPath *field.Path, addPath func(file, owner string)) field.ErrorList {
	var errs field.ErrorList
	count := 0
	if s := src.Secret; s != nil {
		count++
		errs = append(errs, validateProjectedItems(s.Name, s.Items, srcPath.Child("secret"), addPath)...)
	}
	if c := src.ConfigMap; c != nil {
		count++
		errs = append(errs, validateProjectedItems(c.Name, c.Items, srcPath.Child("configMap"), addPath)...)
	}
	if d := src.DownwardAPI; d != nil {
		count++
		for j := range d.Items {
			errs = append(errs, validateDownwardAPIFile(&d.Items[j], srcPath.Child("downwardAPI", "items").Index(j))...)
			addPath(d.Items[j].Path, d.Items[j].Path)
		}
	}
	if t := src.ServiceAccountToken; t != nil {
		count++
		errs = append(errs, validateTokenProjection(t, srcPath.Child("serviceAccountToken"))...)
		addPath(t.Path, t.Path)
	}
	if src.ClusterTrustBundle != nil {
		count++
		errs = append(errs, validateCTBProjection(src.ClusterTrustBundle, srcPath.Child("clusterTrustBundle"))...) // certprojection.go
		addPath(src.ClusterTrustBundle.Path, src.ClusterTrustBundle.Path)
	}
	if src.PodCertificate != nil {
		count++
		errs = append(errs, validatePodCertificateProjection(src.PodCertificate, srcPath.Child("podCertificate"), addPath)...)
	}
	if count > 1 {
		errs = append(errs, field.Forbidden(srcPath, "may not specify more than 1 volume type per source"))
	}
	return errs
}

func validateProjectedItems(name string, items []corev1.KeyToPath, fldPath *field.Path, addPath func(file, owner string)) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	}
	for i := range items {
		errs = append(errs, validateKeyToPath(&items[i], fldPath.Child("items").Index(i))...)
		addPath(items[i].Path, name)
	}
	return errs
}

// validateTokenProjection bounds token lifetimes: short tokens would be
// refreshed constantly, and the kubelet cannot represent longer ones.
func validateTokenProjection(t *corev1.ServiceAccountTokenProjection, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.ExpirationSeconds != nil {
		exp := *t.ExpirationSeconds
		if exp < 10*60 {
			errs = append(errs, field.Invalid(fldPath.Child("expirationSeconds"), exp, "may not specify a duration less than 10 minutes"))
		}
		if exp > 1<<32 {
			errs = append(errs, field.Invalid(fldPath.Child("expirationSeconds"), exp, "may not specify a duration larger than 2^32 seconds"))
		}
	}
	if t.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	}
	return errs
}

func validateCSIDriverName(driver string, fldPath *field.Path) field.ErrorList {
	if driver == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if len(driver) > 63 {
		return field.ErrorList{field.TooLong(fldPath, driver, 63)}
	}
	return dns1123Subdomain(strings.ToLower(driver), fldPath)
}

func validateEphemeral(e *corev1.EphemeralVolumeSource, fldPath *field.Path) field.ErrorList {
	tmpl := e.VolumeClaimTemplate
	if tmpl == nil {
		return field.ErrorList{field.Required(fldPath.Child("volumeClaimTemplate"), "")}
	}
	tmplPath := fldPath.Child("volumeClaimTemplate")
	errs := validateTemplateMeta(&tmpl.ObjectMeta, tmplPath.Child("metadata"))
	return append(errs, validatePVCSpec(&tmpl.Spec, tmplPath.Child("spec"))...)
}

// validateTemplateMeta allows only labels and annotations: the object made
// from the template gets its identity from its owner.
func validateTemplateMeta(m *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	errs := validateLabels(m.Labels, fldPath.Child("labels"))
	errs = append(errs, validateAnnotations(m.Annotations, fldPath.Child("annotations"))...)
	const msg = "cannot be set for a template"
	set := []struct {
		name string
		set  bool
	}{
		{"name", m.Name != ""}, {"generateName", m.GenerateName != ""}, {"namespace", m.Namespace != ""},
		{"finalizers", len(m.Finalizers) > 0}, {"ownerReferences", len(m.OwnerReferences) > 0},
	}
	for _, f := range set {
		if f.set {
			errs = append(errs, field.Forbidden(fldPath.Child(f.name), msg))
		}
	}
	return errs
}

func validateImageVolume(i *corev1.ImageVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if i.Reference == "" {
		errs = append(errs, field.Required(fldPath.Child("reference"), ""))
	}
	return append(errs, optionalEnum(i.PullPolicy, fldPath.Child("pullPolicy"), corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)...)
}
