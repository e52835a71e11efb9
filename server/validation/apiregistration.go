package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// validateAPIRegistrationKind validates apiregistration.k8s.io/v1 APIService.
func validateAPIRegistrationKind(obj runtime.Object) (field.ErrorList, bool) {
	if o, ok := obj.(*apiregistrationv1.APIService); ok {
		return validateAPIService(o), true
	}
	return nil, false
}

// updateAPIRegistrationKind validates updates of APIServices. A write to
// the main resource keeps the stored status and one to /status the stored
// spec, so checking both against upstream's rules covers either path.
func updateAPIRegistrationKind(obj, old runtime.Object) (field.ErrorList, bool) {
	o, ok := obj.(*apiregistrationv1.APIService)
	if !ok {
		return nil, false
	}
	prev := old.(*apiregistrationv1.APIService)
	errs := validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta)
	errs = append(errs, validateAPIService(o)...)
	return append(errs, validateAPIServiceStatus(&o.Status)...), true
}

// validateAPIService is upstream's ValidateAPIService: the name is
// <version>.<group>, only the legacy v1 has no group, priorities are in
// range, and a local APIService (no service) carries no TLS settings.
func validateAPIService(s *apiregistrationv1.APIService) field.ErrorList {
	required := s.Spec.Version + "." + s.Spec.Group
	errs := validateMeta(&s.ObjectMeta, false, func(name string, _ bool) []string {
		if failures := content.IsPathSegmentName(name); len(failures) > 0 {
			return failures
		}
		if name != required {
			return []string{fmt.Sprintf("must be `spec.version+\".\"+spec.group`: %q", required)}
		}
		return nil
	})
	if s.Spec.Group == "" && s.Spec.Version != "v1" {
		errs = append(errs, field.Required(specPath.Child("group"), "only v1 may have an empty group and it better be legacy kube"))
	}
	if s.Spec.Group != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(s.Spec.Group) {
			errs = append(errs, field.Invalid(specPath.Child("group"), s.Spec.Group, msg))
		}
	}
	for _, msg := range utilvalidation.IsDNS1035Label(s.Spec.Version) {
		errs = append(errs, field.Invalid(specPath.Child("version"), s.Spec.Version, msg))
	}
	if s.Spec.GroupPriorityMinimum <= 0 || s.Spec.GroupPriorityMinimum > 20000 {
		errs = append(errs, field.Invalid(specPath.Child("groupPriorityMinimum"), s.Spec.GroupPriorityMinimum, "must be positive and less than 20000"))
	}
	if s.Spec.VersionPriority <= 0 || s.Spec.VersionPriority > 1000 {
		errs = append(errs, field.Invalid(specPath.Child("versionPriority"), s.Spec.VersionPriority, "must be positive and less than 1000"))
	}
	if s.Spec.Service == nil {
		if len(s.Spec.CABundle) != 0 {
			errs = append(errs, field.Invalid(specPath.Child("caBundle"), fmt.Sprintf("%d bytes", len(s.Spec.CABundle)), "local APIServices may not have a caBundle"))
		}
		if s.Spec.InsecureSkipTLSVerify {
			errs = append(errs, field.Invalid(specPath.Child("insecureSkipTLSVerify"), s.Spec.InsecureSkipTLSVerify, "local APIServices may not have insecureSkipTLSVerify"))
		}
		return errs
	}
	svcPath := specPath.Child("service")
	if s.Spec.Service.Namespace == "" {
		errs = append(errs, field.Required(svcPath.Child("namespace"), ""))
	}
	if s.Spec.Service.Name == "" {
		errs = append(errs, field.Required(svcPath.Child("name"), ""))
	}
	var port int32 // defaulted to 443; nil only when defaults did not run
	if s.Spec.Service.Port != nil {
		port = *s.Spec.Service.Port
	}
	if msgs := utilvalidation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(svcPath.Child("port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if s.Spec.InsecureSkipTLSVerify && len(s.Spec.CABundle) > 0 {
		errs = append(errs, field.Invalid(specPath.Child("insecureSkipTLSVerify"), s.Spec.InsecureSkipTLSVerify, "may not be true if caBundle is present"))
	}
	return errs
}

// validateAPIServiceStatus is upstream's ValidateAPIServiceStatus: every
// condition's status is True, False or Unknown.
func validateAPIServiceStatus(st *apiregistrationv1.APIServiceStatus) field.ErrorList {
	var errs field.ErrorList
	allowed := []string{string(apiregistrationv1.ConditionTrue), string(apiregistrationv1.ConditionFalse), string(apiregistrationv1.ConditionUnknown)}
	for i, c := range st.Conditions {
		switch c.Status {
		case apiregistrationv1.ConditionTrue, apiregistrationv1.ConditionFalse, apiregistrationv1.ConditionUnknown:
		default:
			errs = append(errs, field.NotSupported(statusPath.Child("conditions").Index(i).Child("status"), c.Status, allowed))
		}
	}
	return errs
}
