package validation

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	sysctlSegmentFmt = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
	sysctlNameFmt    = "(" + sysctlSegmentFmt + "[\\./])*" + sysctlSegmentFmt
	sysctlMaxLength  = 253
)

var sysctlNameRegexp = regexp.MustCompile("^" + sysctlNameFmt + "$")

func validateSecurityContext(sc *corev1.SecurityContext, fldPath *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	if sc.RunAsUser != nil {
		errs = append(errs, messages(fldPath.Child("runAsUser"), *sc.RunAsUser, utilvalidation.IsValidUserID(*sc.RunAsUser))...)
	}
	if sc.RunAsGroup != nil {
		errs = append(errs, messages(fldPath.Child("runAsGroup"), *sc.RunAsGroup, utilvalidation.IsValidGroupID(*sc.RunAsGroup))...)
	}
	if sc.ProcMount != nil {
		errs = append(errs, enum(*sc.ProcMount, fldPath.Child("procMount"), corev1.DefaultProcMount, corev1.UnmaskedProcMount)...)
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmorProfile(sc.AppArmorProfile, fldPath.Child("appArmorProfile"))...)
	// Without privilege escalation the kernel cannot grant what privileged
	// mode or CAP_SYS_ADMIN promise, so the combination is contradictory.
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if deref(sc.Privileged, false) {
			errs = append(errs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if c == "CAP_SYS_ADMIN" {
					errs = append(errs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	return errs
}

func validatePodSecurityContext(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	scPath := fldPath.Child("securityContext")
	if deref(spec.ShareProcessNamespace, false) && spec.HostPID {
		errs = append(errs, field.Invalid(scPath.Child("shareProcessNamespace"), true, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	sc := spec.SecurityContext
	if sc == nil {
		return errs
	}
	if sc.FSGroup != nil {
		errs = append(errs, messages(scPath.Child("fsGroup"), *sc.FSGroup, utilvalidation.IsValidGroupID(*sc.FSGroup))...)
	}
	if sc.RunAsUser != nil {
		errs = append(errs, messages(scPath.Child("runAsUser"), *sc.RunAsUser, utilvalidation.IsValidUserID(*sc.RunAsUser))...)
	}
	if sc.RunAsGroup != nil {
		errs = append(errs, messages(scPath.Child("runAsGroup"), *sc.RunAsGroup, utilvalidation.IsValidGroupID(*sc.RunAsGroup))...)
	}
	for i, gid := range sc.SupplementalGroups {
		errs = append(errs, messages(scPath.Child("supplementalGroups").Index(i), gid, utilvalidation.IsValidGroupID(gid))...)
	}
	if sc.SupplementalGroupsPolicy != nil {
		errs = append(errs, enum(*sc.SupplementalGroupsPolicy, scPath.Child("supplementalGroupsPolicy"),
			corev1.SupplementalGroupsPolicyMerge, corev1.SupplementalGroupsPolicyStrict)...)
	}
	if sc.FSGroupChangePolicy != nil {
		errs = append(errs, enum(*sc.FSGroupChangePolicy, scPath.Child("fsGroupChangePolicy"),
			corev1.FSGroupChangeOnRootMismatch, corev1.FSGroupChangeAlways)...)
	}
	if sc.SELinuxChangePolicy != nil {
		errs = append(errs, enum(*sc.SELinuxChangePolicy, scPath.Child("seLinuxChangePolicy"),
			corev1.SELinuxChangePolicyMountOption, corev1.SELinuxChangePolicyRecursive)...)
	}
	errs = append(errs, validateSysctls(sc.Sysctls, scPath.Child("sysctls"))...)
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, scPath.Child("seccompProfile"))...)
	return append(errs, validateAppArmorProfile(sc.AppArmorProfile, scPath.Child("appArmorProfile"))...)
}

func validateSysctls(sysctls []corev1.Sysctl, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, s := range sysctls {
		namePath := fldPath.Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlNameRegexp.MatchString(s.Name):
			errs = append(errs, field.Invalid(namePath, s.Name,
				fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlNameFmt)))
		case names.Has(s.Name):
			errs = append(errs, field.Duplicate(namePath, s.Name))
		}
		names.Insert(s.Name)
	}
	return errs
}

func validateSeccompProfile(sp *corev1.SeccompProfile, fldPath *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	typePath := fldPath.Child("type")
	switch sp.Type {
	case corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
	case "":
		return field.ErrorList{field.Required(typePath, "type is required when seccompProfile is set")}
	default:
		return notSupported(typePath, sp.Type, corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined)
	}
	profilePath := fldPath.Child("localhostProfile")
	if sp.Type != corev1.SeccompProfileTypeLocalhost {
		if sp.LocalhostProfile != nil {
			return field.ErrorList{field.Invalid(profilePath, sp, "can only be set when seccomp type is Localhost")}
		}
		return nil
	}
	if sp.LocalhostProfile == nil {
		return field.ErrorList{field.Required(profilePath, "must be set when seccomp type is Localhost")}
	}
	return localDescendingPath(*sp.LocalhostProfile, profilePath)
}

func validateAppArmorProfile(ap *corev1.AppArmorProfile, fldPath *field.Path) field.ErrorList {
	if ap == nil {
		return nil
	}
	typePath := fldPath.Child("type")
	switch ap.Type {
	case corev1.AppArmorProfileTypeLocalhost, corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined:
	case "":
		return field.ErrorList{field.Required(typePath, "type is required when appArmorProfile is set")}
	default:
		return notSupported(typePath, ap.Type, corev1.AppArmorProfileTypeLocalhost, corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined)
	}
	profilePath := fldPath.Child("localhostProfile")
	if ap.Type != corev1.AppArmorProfileTypeLocalhost {
		if ap.LocalhostProfile != nil {
			return field.ErrorList{field.Invalid(profilePath, ap, "can only be set when AppArmor type is Localhost")}
		}
		return nil
	}
	if ap.LocalhostProfile == nil {
		return field.ErrorList{field.Required(profilePath, "must be set when AppArmor type is Localhost")}
	}
	if strings.TrimSpace(*ap.LocalhostProfile) == "" {
		return field.ErrorList{field.Invalid(profilePath, *ap.LocalhostProfile, "must be non-empty")}
	}
	return nil
}
