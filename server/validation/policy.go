package validation

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// highestUserPriority keeps user classes below the system-critical ones,
	// so that user pods can never preempt cluster components.
	highestUserPriority  = 1000000000
	systemPriorityPrefix = "system-"
)

// systemPriorityClasses are the reserved classes and their fixed values.
var systemPriorityClasses = map[string]int32{
	"system-cluster-critical": 2000000000,
	"system-node-critical":    2000001000,
}

func validatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	errs := validateMeta(&pc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	if strings.HasPrefix(pc.Name, systemPriorityPrefix) {
		if err := knownSystemPriorityClass(pc); err != nil {
			errs = append(errs, field.Forbidden(metaPath.Child("name"),
				"priority class names with '"+systemPriorityPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > highestUserPriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("maximum allowed value of a user defined priority is %v", highestUserPriority)))
	}
	if pc.PreemptionPolicy != nil {
		errs = append(errs, enum(*pc.PreemptionPolicy, field.NewPath("preemptionPolicy"), corev1.PreemptLowerPriority, corev1.PreemptNever)...)
	}
	return errs
}

func knownSystemPriorityClass(pc *schedulingv1.PriorityClass) error {
	value, ok := systemPriorityClasses[pc.Name]
	switch {
	case !ok:
		return fmt.Errorf("%v is not a known system priority class", pc.Name)
	case pc.Value != value:
		return fmt.Errorf("value of %v PriorityClass must be %v", pc.Name, value)
	case pc.GlobalDefault:
		return fmt.Errorf("globalDefault of %v PriorityClass must be false", pc.Name)
	}
	return nil
}

// validatePriorityClassUpdate: running pods carry the value they were
// admitted with, so changing it would silently split the class in two.
func validatePriorityClassUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	errs := validateMetaUpdate(&pc.ObjectMeta, &old.ObjectMeta)
	if pc.Value != old.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	return append(errs, immutable(pc.PreemptionPolicy, old.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
}

func validatePDB(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := validateMeta(&pdb.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	spec := &pdb.Spec
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(specPath, spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	errs = append(errs, positiveIntOrPercent(spec.MinAvailable, specPath.Child("minAvailable"))...)
	errs = append(errs, notMoreThan100Percent(spec.MinAvailable, specPath.Child("minAvailable"))...)
	errs = append(errs, positiveIntOrPercent(spec.MaxUnavailable, specPath.Child("maxUnavailable"))...)
	errs = append(errs, notMoreThan100Percent(spec.MaxUnavailable, specPath.Child("maxUnavailable"))...)
	errs = append(errs, validateLabelSelector(spec.Selector, specPath.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil {
		errs = append(errs, enum(*p, specPath.Child("unhealthyPodEvictionPolicy"), policyv1.AlwaysAllow, policyv1.IfHealthyBudget)...)
	}
	return errs
}

func validateEviction(ev *policyv1.Eviction) field.ErrorList {
	errs := validateMeta(&ev.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	if ev.DeleteOptions != nil {
		errs = append(errs, metavalidation.ValidateDeleteOptions(ev.DeleteOptions)...)
	}
	return errs
}

func validateLease(l *coordinationv1.Lease) field.ErrorList {
	errs := validateMeta(&l.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	spec := &l.Spec
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	if t := spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseTransitions"), *t, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		errs = append(errs, enum(*spec.Strategy, specPath.Child("strategy"), coordinationv1.OldestEmulationVersion)...)
	}
	if deref(spec.PreferredHolder, "") != "" && deref(spec.Strategy, "") == "" {
		errs = append(errs, field.Forbidden(specPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// csrUsages are the key usages a certificate signing request may ask for.
var csrUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
	certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment,
	certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly,
	certificatesv1.UsageDecipherOnly, certificatesv1.UsageAny, certificatesv1.UsageServerAuth,
	certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning, certificatesv1.UsageEmailProtection,
	certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem, certificatesv1.UsageIPsecTunnel,
	certificatesv1.UsageIPsecUser, certificatesv1.UsageTimestamping, certificatesv1.UsageOCSPSigning,
	certificatesv1.UsageMicrosoftSGC, certificatesv1.UsageNetscapeSGC,
}

// validateCSR checks a certificate signing request. Any object name is
// accepted, as upstream accepts any.
func validateCSR(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	errs := validateMeta(&csr.ObjectMeta, false, func(string, bool) []string { return nil })
	if err := checkCSRRequest(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(specPath.Child("request"), csr.Spec.Request, err.Error()))
	}
	usagesPath := specPath.Child("usages")
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(usagesPath, ""))
	}
	seen := sets.New[certificatesv1.KeyUsage]()
	valid := sets.New(csrUsages...)
	for i, u := range csr.Spec.Usages {
		if !valid.Has(u) {
			errs = append(errs, field.NotSupported(usagesPath.Index(i), u, csrUsages))
		}
		if seen.Has(u) {
			errs = append(errs, field.Duplicate(usagesPath.Index(i), u))
		}
		seen.Insert(u)
	}
	if e := csr.Spec.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, field.Invalid(specPath.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	errs = append(errs, validateSignerName(csr.Spec.SignerName, specPath.Child("signerName"))...)
	for i, c := range csr.Status.Conditions {
		if c.Type == "" {
			errs = append(errs, field.Required(field.NewPath("status", "conditions").Index(i).Child("type"), ""))
		}
	}
	return errs
}

func checkCSRRequest(request []byte) error {
	block, _ := pem.Decode(request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	parsed, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return fmt.Errorf("parse certificate request: %w", err)
	}
	if err := parsed.CheckSignature(); err != nil {
		return fmt.Errorf("check certificate request signature: %w", err)
	}
	return nil
}

// validateSignerName requires "domain/path": RBAC grants on signers are
// written as "domain/*", so the domain part must stand on its own.
func validateSignerName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	domain, path, ok := strings.Cut(name, "/")
	if !ok || strings.Contains(path, "/") {
		return field.ErrorList{field.Invalid(fldPath, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	if len(domain) > 253 {
		errs = append(errs, field.TooLong(fldPath, domain, 253))
	}
	labels := strings.Split(domain, ".")
	for _, l := range labels {
		if msgs := content.IsDNS1123Label(l); len(msgs) != 0 {
			errs = append(errs, field.Invalid(fldPath, domain, fmt.Sprintf("validating label %q: %s", l, msgs[0])))
			break
		}
	}
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(fldPath, domain, "should be a domain with at least two segments separated by dots"))
	}
	for _, l := range strings.Split(path, ".") {
		if msgs := content.IsDNS1123Subdomain(l); len(msgs) != 0 {
			errs = append(errs, field.Invalid(fldPath, path, fmt.Sprintf("validating component %q: %s", l, msgs[0])))
			break
		}
	}
	return errs
}
