package validation

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/jsonpath"

	"skiff/server/cel"
)

// The parts of a CRD version beside its schema: subresources, printer
// columns, selectable fields, and the conversion webhook.

const maxSelectableFields = 8

var (
	printerColumnTypes   = []string{"boolean", "date", "integer", "number", "string"}
	printerColumnFormats = []string{"byte", "date", "date-time", "double", "float", "int32", "int64", "password"}
	// ConversionReview versions this server sends.
	conversionReviewVersions = []string{"v1", "v1beta1"}
	validationReasons        = []string{
		string(apiextensionsv1.FieldValueDuplicate), string(apiextensionsv1.FieldValueForbidden),
		string(apiextensionsv1.FieldValueInvalid), string(apiextensionsv1.FieldValueRequired),
	}
)

// validateCRDSubresources: the scale paths are simple JSON paths, the
// replicas under .spec and .status, the selector under either.
func validateCRDSubresources(s *apiextensionsv1.CustomResourceSubresources, fldPath *field.Path) field.ErrorList {
	if s == nil || s.Scale == nil {
		return nil
	}
	var errs field.ErrorList
	scale := s.Scale
	under := func(child, path, msg string, prefixes ...string) {
		p := fldPath.Child("scale", child)
		if e := validateSimpleJSONPath(path, p); len(e) > 0 {
			errs = append(errs, e...)
			return
		}
		for _, pre := range prefixes {
			if strings.HasPrefix(path, pre) {
				return
			}
		}
		errs = append(errs, field.Invalid(p, path, msg))
	}
	if scale.SpecReplicasPath == "" {
		errs = append(errs, field.Required(fldPath.Child("scale", "specReplicasPath"), ""))
	} else {
		under("specReplicasPath", scale.SpecReplicasPath, "should be a json path under .spec", ".spec.")
	}
	if scale.StatusReplicasPath == "" {
		errs = append(errs, field.Required(fldPath.Child("scale", "statusReplicasPath"), ""))
	} else {
		under("statusReplicasPath", scale.StatusReplicasPath, "should be a json path under .status", ".status.")
	}
	if scale.LabelSelectorPath != nil && *scale.LabelSelectorPath != "" {
		under("labelSelectorPath", *scale.LabelSelectorPath, "should be a json path under either .spec or .status", ".spec.", ".status.")
	}
	return errs
}

func validateSimpleJSONPath(s string, fldPath *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Invalid(fldPath, s, "must not be empty")}
	case s[0] != '.':
		return field.ErrorList{field.Invalid(fldPath, s, "must be a simple json path starting with .")}
	}
	return nil
}

// validateColumn checks one additionalPrinterColumn. Beyond upstream, the
// path must parse as the table printer will parse it: upstream accepts
// such a column and then silently prints the default table instead.
func validateColumn(c *apiextensionsv1.CustomResourceColumnDefinition, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	}
	typesMsg := "must be one of " + strings.Join(printerColumnTypes, ",")
	switch {
	case c.Type == "":
		errs = append(errs, field.Required(fldPath.Child("type"), typesMsg))
	case !slices.Contains(printerColumnTypes, c.Type):
		errs = append(errs, field.Invalid(fldPath.Child("type"), c.Type, typesMsg))
	}
	if c.Format != "" && !slices.Contains(printerColumnFormats, c.Format) {
		errs = append(errs, field.Invalid(fldPath.Child("format"), c.Format, "must be one of "+strings.Join(printerColumnFormats, ",")))
	}
	jp := fldPath.Child("JSONPath")
	if c.JSONPath == "" {
		return append(errs, field.Required(jp, ""))
	}
	if e := validateSimpleJSONPath(c.JSONPath, jp); len(e) > 0 {
		return append(errs, e...)
	}
	if err := jsonpath.New(c.Name).Parse("{" + c.JSONPath + "}"); err != nil {
		errs = append(errs, field.Invalid(jp, c.JSONPath, "must be a valid JSONPath expression: "+err.Error()))
	}
	return errs
}

// validateSelectableFields: each path names a string, boolean or integer
// field of the schema outside metadata, once; at most eight fields.
func validateSelectableFields(fields []apiextensionsv1.SelectableField, s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path, allowTooMany bool) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, f := range fields {
		p := fldPath.Index(i).Child("jsonPath")
		if f.JSONPath == "" {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		path, found, err := cel.ValidFieldPath(f.JSONPath, s, false)
		if err != nil {
			errs = append(errs, field.Invalid(p, f.JSONPath, fmt.Sprintf("is an invalid path: %v", err)))
			continue
		}
		if path != nil && path.Root().String() == "metadata" {
			errs = append(errs, field.Invalid(p, f.JSONPath, "must not point to fields in metadata"))
		}
		if found == nil || (found.Type != "string" && found.Type != "boolean" && found.Type != "integer") {
			errs = append(errs, field.Invalid(p, f.JSONPath, "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."))
		}
		if seen[path.String()] {
			errs = append(errs, field.Duplicate(p, f.JSONPath))
		}
		seen[path.String()] = true
	}
	if len(seen) > maxSelectableFields && !allowTooMany {
		errs = append(errs, field.TooMany(fldPath, len(seen), maxSelectableFields))
	}
	return errs
}

// validateCRDConversion: strategy None or Webhook; a webhook has exactly one
// of url and service and speaks a ConversionReview version this server
// sends. Paths are those of upstream's internal version, where the webhook
// fields sit in spec.conversion itself.
func validateCRDConversion(c *apiextensionsv1.CustomResourceConversion, opts crdOptions, fldPath *field.Path) field.ErrorList {
	if c == nil {
		return nil
	}
	errs := enumRequired(fldPath.Child("strategy"), string(c.Strategy), string(apiextensionsv1.NoneConverter), string(apiextensionsv1.WebhookConverter))
	var cc *apiextensionsv1.WebhookClientConfig
	var reviewVersions []string
	if c.Webhook != nil {
		cc, reviewVersions = c.Webhook.ClientConfig, c.Webhook.ConversionReviewVersions
	}
	ccPath := fldPath.Child("webhookClientConfig")
	if c.Strategy != apiextensionsv1.WebhookConverter {
		if cc != nil {
			errs = append(errs, field.Forbidden(ccPath, "should not be set when strategy is not set to Webhook"))
		}
		if len(reviewVersions) > 0 {
			errs = append(errs, field.Forbidden(fldPath.Child("conversionReviewVersions"), "should not be set when strategy is not set to Webhook"))
		}
		return errs
	}
	switch {
	case cc == nil:
		errs = append(errs, field.Required(ccPath, "required when strategy is set to Webhook"))
	case (cc.URL == nil) == (cc.Service == nil):
		errs = append(errs, field.Required(ccPath, "exactly one of url or service is required"))
	case cc.URL != nil:
		errs = append(errs, validateWebhookURL(ccPath.Child("url"), *cc.URL)...)
	default:
		errs = append(errs, validateWebhookService(ccPath.Child("service"), cc.Service)...)
	}
	if cc != nil && len(cc.CABundle) > 0 && !opts.allowInvalidCABundle {
		errs = append(errs, validateCABundle(ccPath.Child("caBundle"), cc.CABundle)...)
	}
	return append(errs, validateConversionReviewVersions(reviewVersions, opts.requireRecognizedConversionReviewVersion, fldPath.Child("conversionReviewVersions"))...)
}

func validateConversionReviewVersions(versions []string, requireAccepted bool, fldPath *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	seen, accepted := map[string]bool{}, false
	for i, v := range versions {
		if seen[v] {
			errs = append(errs, field.Invalid(fldPath.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(fldPath.Index(i), v, msg))
		}
		accepted = accepted || slices.Contains(conversionReviewVersions, v)
	}
	if requireAccepted && !accepted {
		errs = append(errs, field.Invalid(fldPath, versions, "must include at least one of "+strings.Join(conversionReviewVersions, ", ")))
	}
	return errs
}

func hasAcceptedReviewVersionOrEmpty(versions []string) bool {
	if len(versions) == 0 {
		return true
	}
	for _, v := range versions {
		if slices.Contains(conversionReviewVersions, v) {
			return true
		}
	}
	return false
}

// allowInvalidCABundle: a bad bundle may stay while the CRD serves nothing,
// or if the stored one is bad already (refusing would block every update).
func allowInvalidCABundle(old *apiextensionsv1.CustomResourceDefinition) bool {
	if !crdEstablished(old) {
		return true
	}
	c := old.Spec.Conversion
	if c == nil || c.Webhook == nil || c.Webhook.ClientConfig == nil || len(c.Webhook.ClientConfig.CABundle) == 0 {
		return false
	}
	return len(validateCABundle(field.NewPath("caBundle"), c.Webhook.ClientConfig.CABundle)) > 0
}

func validateCABundle(fldPath *field.Path, bundle []byte) field.ErrorList {
	if _, err := transport.TLSConfigFor(&transport.Config{TLS: transport.TLSConfig{CAData: bundle}}); err != nil {
		return field.ErrorList{field.Invalid(fldPath, bundle, err.Error())}
	}
	return nil
}

func validateWebhookURL(fldPath *field.Path, raw string) field.ErrorList {
	const form = "; desired format: https://host[/path]"
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Required(fldPath, "url must be a valid URL: "+err.Error()+form)}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(fldPath, u.Scheme, "'https' is the only allowed URL scheme"+form))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(fldPath, u.Host, "host must be specified"+form))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(fldPath, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(fldPath, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(fldPath, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

// validateWebhookService runs after defaulting, which sets the port.
func validateWebhookService(fldPath *field.Path, s *apiextensionsv1.ServiceReference) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	}
	if s.Namespace == "" {
		errs = append(errs, field.Required(fldPath.Child("namespace"), ""))
	}
	port := deref(s.Port, 443)
	if msgs := utilvalidation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(fldPath.Child("port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if s.Path == nil || *s.Path == "/" || *s.Path == "" {
		return errs
	}
	p := *s.Path
	pp := fldPath.Child("path")
	if p == "//" {
		return append(errs, field.Invalid(pp, p, "segment[0] may not be empty"))
	}
	if !strings.HasPrefix(p, "/") {
		errs = append(errs, field.Invalid(pp, p, "must start with a '/'"))
	}
	for i, seg := range strings.Split(strings.TrimSuffix(p[1:], "/"), "/") {
		if seg == "" {
			errs = append(errs, field.Invalid(pp, p, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range utilvalidation.IsDNS1123Subdomain(seg) {
			errs = append(errs, field.Invalid(pp, p, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return errs
}
