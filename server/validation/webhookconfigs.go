package validation

import (
	"fmt"
	"net/url"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/admission/webhook/matchcond"
)

// validateWebhookConfigKind validates admissionregistration.k8s.io/v1
// Mutating- and ValidatingWebhookConfigurations as upstream: what the
// admission webhook plugins (server/admission/webhook) are able to call,
// including match conditions that compile.
func validateWebhookConfigKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		errs := validateMeta(&o.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
		hooks := make([]webhookFields, len(o.Webhooks))
		for i, w := range o.Webhooks {
			hooks[i] = webhookFields{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector,
				w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions}
			if p := w.ReinvocationPolicy; p != nil && *p != admissionregistrationv1.NeverReinvocationPolicy && *p != admissionregistrationv1.IfNeededReinvocationPolicy {
				errs = append(errs, field.NotSupported(field.NewPath("webhooks").Index(i).Child("reinvocationPolicy"), *p,
					[]string{string(admissionregistrationv1.IfNeededReinvocationPolicy), string(admissionregistrationv1.NeverReinvocationPolicy)}))
			}
		}
		return append(errs, validateWebhooks(hooks)...), true
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		errs := validateMeta(&o.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
		hooks := make([]webhookFields, len(o.Webhooks))
		for i, w := range o.Webhooks {
			hooks[i] = webhookFields{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector,
				w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions}
		}
		return append(errs, validateWebhooks(hooks)...), true
	}
	return nil, false
}

// updateWebhookConfigKind: metadata update rules plus those of a new
// configuration.
func updateWebhookConfigKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		prev := old.(*admissionregistrationv1.MutatingWebhookConfiguration)
		errs, _ := validateWebhookConfigKind(obj)
		return append(validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta), errs...), true
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		prev := old.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		errs, _ := validateWebhookConfigKind(obj)
		return append(validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta), errs...), true
	}
	return nil, false
}

// webhookFields are the fields both kinds of webhook share.
type webhookFields struct {
	name              string
	clientConfig      admissionregistrationv1.WebhookClientConfig
	rules             []admissionregistrationv1.RuleWithOperations
	failurePolicy     *admissionregistrationv1.FailurePolicyType
	matchPolicy       *admissionregistrationv1.MatchPolicyType
	namespaceSelector *metav1.LabelSelector
	objectSelector    *metav1.LabelSelector
	sideEffects       *admissionregistrationv1.SideEffectClass
	timeoutSeconds    *int32
	reviewVersions    []string
	matchConditions   []admissionregistrationv1.MatchCondition
}

func validateWebhooks(hooks []webhookFields) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, w := range hooks {
		p := field.NewPath("webhooks").Index(i)
		if names.Has(w.name) {
			errs = append(errs, field.Duplicate(p.Child("name"), w.name))
		}
		names.Insert(w.name)
		errs = append(errs, validateWebhook(w, p)...)
	}
	return errs
}

func validateWebhook(w webhookFields, p *field.Path) field.ErrorList {
	errs := utilvalidation.IsFullyQualifiedName(p.Child("name"), w.name)
	for j, r := range w.rules {
		errs = append(errs, validateRuleWithOperations(r, p.Child("rules").Index(j))...)
	}
	if fp := w.failurePolicy; fp != nil && *fp != admissionregistrationv1.Fail && *fp != admissionregistrationv1.Ignore {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *fp, []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}))
	}
	if mp := w.matchPolicy; mp != nil && *mp != admissionregistrationv1.Exact && *mp != admissionregistrationv1.Equivalent {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *mp, []string{string(admissionregistrationv1.Equivalent), string(admissionregistrationv1.Exact)}))
	}
	switch se := w.sideEffects; {
	case se == nil:
		errs = append(errs, field.Required(p.Child("sideEffects"), "must specify one of None, NoneOnDryRun"))
	case *se != admissionregistrationv1.SideEffectClassNone && *se != admissionregistrationv1.SideEffectClassNoneOnDryRun:
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *se, []string{"None", "NoneOnDryRun"}))
	}
	if t := w.timeoutSeconds; t != nil && (*t < 1 || *t > 30) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *t, "the timeout value must be between 1 and 30 seconds"))
	}
	opts := metav1validation.LabelSelectorValidationOptions{}
	if w.namespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(w.namespaceSelector, opts, p.Child("namespaceSelector"))...)
	}
	if w.objectSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(w.objectSelector, opts, p.Child("objectSelector"))...)
	}
	errs = append(errs, validateReviewVersions(w.reviewVersions, p.Child("admissionReviewVersions"))...)
	errs = append(errs, validateWebhookClientConfig(w.clientConfig, p.Child("clientConfig"))...)
	return append(errs, validateMatchConditions(w.matchConditions, p.Child("matchConditions"))...)
}

func validateRuleWithOperations(r admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ops := p.Child("operations")
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(ops, ""))
	}
	supported := []string{"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}
	for i, op := range r.Operations {
		if op == admissionregistrationv1.OperationAll && len(r.Operations) > 1 {
			errs = append(errs, field.Invalid(ops, r.Operations, "if '*' is present, must not specify other operations"))
		}
		if !sets.New(supported...).Has(string(op)) {
			errs = append(errs, field.NotSupported(ops.Index(i), op, supported))
		}
	}
	for _, x := range []struct {
		name, what string
		list       []string
	}{{"apiGroups", "API groups", r.APIGroups}, {"apiVersions", "API versions", r.APIVersions}} {
		if len(x.list) == 0 {
			errs = append(errs, field.Required(p.Child(x.name), ""))
		}
		if len(x.list) > 1 && sets.New(x.list...).Has("*") {
			errs = append(errs, field.Invalid(p.Child(x.name), x.list, fmt.Sprintf("if '*' is present, must not specify other %s", x.what)))
		}
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateRuleResources(r.Resources, p.Child("resources"))...)
	if s := r.Scope; s != nil && *s != admissionregistrationv1.AllScopes && *s != admissionregistrationv1.ClusterScope && *s != admissionregistrationv1.NamespacedScope {
		errs = append(errs, field.NotSupported(p.Child("scope"), *s, []string{"*", "Cluster", "Namespaced"}))
	}
	return errs
}

// validateRuleResources is upstream's validateResources: wildcards may
// not overlap other entries.
func validateRuleResources(resources []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(p, ""))
	}
	wildSub, wildRes := sets.New[string](), sets.New[string]()
	double, single, plain := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(p.Index(i), ""))
			continue
		}
		double = double || rs == "*/*"
		single = single || rs == "*"
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			plain = plain || rs != "*"
			continue
		}
		if wildSub.Has(res) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if wildRes.Has(sub) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			wildSub.Insert(res)
		}
		if res == "*" {
			wildRes.Insert(sub)
		}
	}
	if len(resources) > 1 && double {
		errs = append(errs, field.Invalid(p, resources, "if '*/*' is present, must not specify other resources"))
	}
	if single && plain {
		errs = append(errs, field.Invalid(p, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

func validateReviewVersions(versions []string, p *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(p, "must specify one of v1, v1beta1")}
	}
	var errs field.ErrorList
	seen, known := map[string]bool{}, false
	for i, v := range versions {
		if seen[v] {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
		known = known || v == "v1" || v == "v1beta1"
	}
	if !known {
		errs = append(errs, field.Invalid(p, versions, "must include at least one of v1, v1beta1"))
	}
	return errs
}

// validateWebhookClientConfig is upstream's: exactly one of an https URL
// (no user, query or fragment) and a Service reference.
func validateWebhookClientConfig(cc admissionregistrationv1.WebhookClientConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		errs = append(errs, field.Required(p, "exactly one of url or service is required"))
	case cc.URL != nil:
		fp := p.Child("url")
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return append(errs, field.Invalid(fp, *cc.URL, err.Error()))
		}
		if u.Scheme != "https" {
			errs = append(errs, field.Invalid(fp, u.Scheme, "'https' is the only allowed URL scheme"))
		}
		if u.Host == "" {
			errs = append(errs, field.Invalid(fp, u.Host, "host must be specified"))
		}
		if u.User != nil {
			errs = append(errs, field.Invalid(fp, u.User.String(), "user information is not permitted in the URL"))
		}
		if u.Fragment != "" {
			errs = append(errs, field.Invalid(fp, u.Fragment, "fragments are not permitted in the URL"))
		}
		if u.RawQuery != "" {
			errs = append(errs, field.Invalid(fp, u.RawQuery, "query parameters are not permitted in the URL"))
		}
	default:
		s, sp := cc.Service, p.Child("service")
		if s.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), "service name is required"))
		}
		if s.Namespace == "" {
			errs = append(errs, field.Required(sp.Child("namespace"), "service namespace is required"))
		}
		if s.Path != nil && *s.Path != "" && !strings.HasPrefix(*s.Path, "/") {
			errs = append(errs, field.Invalid(sp.Child("path"), *s.Path, "must start with a '/'"))
		}
		if s.Port != nil {
			for _, msg := range utilvalidation.IsValidPortNum(int(*s.Port)) {
				errs = append(errs, field.Invalid(sp.Child("port"), *s.Port, "port is not valid: "+msg))
			}
		}
	}
	return errs
}

func validateMatchConditions(conds []admissionregistrationv1.MatchCondition, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > matchcond.MaxConditions {
		errs = append(errs, field.TooMany(p, len(conds), matchcond.MaxConditions))
	}
	names := sets.New[string]()
	for i, c := range conds {
		np := p.Index(i).Child("name")
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(np, ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(np, c.Name))
		default:
			for _, msg := range utilvalidation.IsQualifiedName(c.Name) {
				errs = append(errs, field.Invalid(np, c.Name, msg))
			}
		}
		names.Insert(c.Name)
	}
	_, compileErrs := matchcond.Compile(conds, p)
	return append(errs, compileErrs...)
}
