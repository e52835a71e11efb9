package validation

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CRDValidator checks CustomResourceDefinitions (apiextensions.k8s.io/v1)
// as upstream's apiextensions-apiserver does, plus the one rule that needs
// to know what else the API server serves: a CRD may not define a group and
// resource the server serves itself (its objects would share the built-in
// resource's store keys and URLs).
//
// Its methods have the signatures of registry.Hooks and pass every other
// kind to the package's Validate, ValidateUpdate and ValidateSubresource,
// so the server can hand them to the table as the hooks of every row. The
// package functions validate CRDs too, without the built-in check.
type CRDValidator struct {
	// Builtin reports whether the API server itself serves a group and
	// resource (at any version). Nil: no CRD collides.
	Builtin func(gr schema.GroupResource) bool
	// BuiltinKind reports whether the API server itself serves a kind in
	// a group: a CRD of that kind would take over the kind's lookups in
	// the resource table. Nil: no CRD collides.
	BuiltinKind func(gk schema.GroupKind) bool
}

// Validate checks a new object.
func (v CRDValidator) Validate(obj runtime.Object) field.ErrorList {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok || crd == nil {
		return Validate(obj)
	}
	return dedupe(append(validateCRD(crd), v.validateNotBuiltin(crd)...))
}

// ValidateUpdate checks obj replacing old.
func (v CRDValidator) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	crd, ok1 := obj.(*apiextensionsv1.CustomResourceDefinition)
	oldCRD, ok2 := old.(*apiextensionsv1.CustomResourceDefinition)
	if !ok1 || !ok2 || crd == nil || oldCRD == nil {
		return ValidateUpdate(obj, old)
	}
	// group and plural are immutable, so an update cannot start a
	// collision; checking again refuses nothing upstream would accept.
	return dedupe(validateCRDUpdate(crd, oldCRD))
}

// ValidateSubresource checks a write through a subresource with rules of
// its own: customresourcedefinitions/status as upstream's status strategy
// (metadata and the accepted names only), the pod subresources as
// ValidateSubresource does.
func (v CRDValidator) ValidateSubresource(subresource string, obj, old runtime.Object) (field.ErrorList, bool) {
	if errs, ok := validateCRDSubresource(subresource, obj, old); ok {
		return errs, true
	}
	return ValidateSubresource(subresource, obj, old)
}

func (v CRDValidator) validateNotBuiltin(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	var errs field.ErrorList
	gr := schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
	if v.Builtin != nil && gr.Resource != "" && v.Builtin(gr) {
		errs = append(errs, field.Forbidden(specPath.Child("names", "plural"),
			fmt.Sprintf("%s is served by the API server itself and cannot be defined by a CustomResourceDefinition", gr)))
	}
	gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	if v.BuiltinKind != nil && gk.Kind != "" && v.BuiltinKind(gk) {
		errs = append(errs, field.Forbidden(specPath.Child("names", "kind"),
			fmt.Sprintf("kind %s is served by the API server itself and cannot be defined by a CustomResourceDefinition", gk)))
	}
	return errs
}

// validateAPIExtensionsKind is the Validate dispatch for apiextensions.k8s.io.
func validateAPIExtensionsKind(obj runtime.Object) (field.ErrorList, bool) {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		return validateCRD(crd), true
	}
	return nil, false
}

func updateAPIExtensionsKind(obj, old runtime.Object) (field.ErrorList, bool) {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		return validateCRDUpdate(crd, old.(*apiextensionsv1.CustomResourceDefinition)), true
	}
	return nil, false
}

func validateCRDSubresource(subresource string, obj, old runtime.Object) (field.ErrorList, bool) {
	crd, ok1 := obj.(*apiextensionsv1.CustomResourceDefinition)
	oldCRD, ok2 := old.(*apiextensionsv1.CustomResourceDefinition)
	if !ok1 || !ok2 || subresource != "status" {
		return nil, false
	}
	errs := validateMetaUpdate(&crd.ObjectMeta, &oldCRD.ObjectMeta)
	return dedupe(append(errs, validateCRDStatus(&crd.Status)...)), true
}

// crdOptions are upstream's validationOptions that differ between create
// and update: an update does not tighten rules the stored CRD predates.
type crdOptions struct {
	requireRecognizedConversionReviewVersion bool
	requireImmutableNames                    bool
	requireOpenAPISchema                     bool
	allowInvalidCABundle                     bool
	// allowTooManySelectableFields by version name ("" for the fields all
	// versions share).
	allowTooManySelectableFields map[string]bool
}

func validateCRD(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	nameFn := func(name string, prefix bool) []string {
		msgs := apivalidation.NameIsDNSSubdomain(name, prefix)
		if name != crd.Spec.Names.Plural+"."+crd.Spec.Group {
			msgs = append(msgs, `must be spec.names.plural+"."+spec.group`)
		}
		return msgs
	}
	opts := crdOptions{
		requireRecognizedConversionReviewVersion: true,
		requireOpenAPISchema:                     true,
		// A CRD that is not yet established serves nothing a bad bundle
		// could break.
		allowInvalidCABundle: true,
	}
	errs := validateMeta(&crd.ObjectMeta, false, nameFn)
	errs = append(errs, validateCRDSpec(&crd.Spec, opts)...)
	errs = append(errs, validateCRDStatus(&crd.Status)...)
	errs = append(errs, validateStoredVersions(crd.Status.StoredVersions, crd.Spec.Versions)...)
	errs = append(errs, validateAPIApproval(crd, nil)...)
	return append(errs, validatePreserveUnknownFields(crd, nil)...)
}

func validateCRDUpdate(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	opts := crdOptions{
		requireRecognizedConversionReviewVersion: old.Spec.Conversion == nil || old.Spec.Conversion.Webhook == nil ||
			hasAcceptedReviewVersionOrEmpty(old.Spec.Conversion.Webhook.ConversionReviewVersions),
		requireImmutableNames:        crdEstablished(old),
		requireOpenAPISchema:         allVersionsHaveSchema(&old.Spec),
		allowInvalidCABundle:         allowInvalidCABundle(old),
		allowTooManySelectableFields: tooManySelectableFieldsAllowed(crd, old),
	}
	errs := validateMetaUpdate(&crd.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateCRDSpec(&crd.Spec, opts)...)
	sp := specPath
	if opts.requireImmutableNames {
		// the scope and kind are in the stored objects and their keys
		errs = append(errs, immutable(crd.Spec.Scope, old.Spec.Scope, sp.Child("scope"))...)
		errs = append(errs, immutable(crd.Spec.Names.Kind, old.Spec.Names.Kind, sp.Child("names", "kind"))...)
	}
	// the resource name is the object's name, which never changes
	errs = append(errs, immutable(crd.Spec.Group, old.Spec.Group, sp.Child("group"))...)
	errs = append(errs, immutable(crd.Spec.Names.Plural, old.Spec.Names.Plural, sp.Child("names", "plural"))...)
	errs = append(errs, validateCRDStatus(&crd.Status)...)
	errs = append(errs, validateStoredVersions(crd.Status.StoredVersions, crd.Spec.Versions)...)
	errs = append(errs, validateAPIApproval(crd, old)...)
	return append(errs, validatePreserveUnknownFields(crd, old)...)
}

// sharedParts says which per-version parts all versions set alike. Upstream
// validates the internal version of a CRD, into which a v1 object converts
// with such parts moved up to spec.validation, spec.subresources,
// spec.additionalPrinterColumns and spec.selectableFields: it checks them
// once and names them there, so clients see those paths for the usual
// CRD whose versions share one schema.
type sharedParts struct {
	schema, subresources, columns, selectable bool
}

func versionSharedParts(vs []apiextensionsv1.CustomResourceDefinitionVersion) sharedParts {
	if len(vs) == 0 {
		return sharedParts{}
	}
	s := sharedParts{true, true, true, true}
	for _, v := range vs[1:] {
		s.schema = s.schema && semanticEqual(v.Schema, vs[0].Schema)
		s.subresources = s.subresources && semanticEqual(v.Subresources, vs[0].Subresources)
		s.columns = s.columns && semanticEqual(v.AdditionalPrinterColumns, vs[0].AdditionalPrinterColumns)
		s.selectable = s.selectable && semanticEqual(v.SelectableFields, vs[0].SelectableFields)
	}
	return s
}

func validateCRDSpec(spec *apiextensionsv1.CustomResourceDefinitionSpec, opts crdOptions) field.ErrorList {
	var errs field.ErrorList
	gp := specPath.Child("group")
	switch {
	case spec.Group == "":
		errs = append(errs, field.Required(gp, ""))
	case len(utilvalidation.IsDNS1123Subdomain(spec.Group)) > 0:
		errs = append(errs, field.Invalid(gp, spec.Group, strings.Join(utilvalidation.IsDNS1123Subdomain(spec.Group), ",")))
	case !strings.Contains(spec.Group, "."):
		errs = append(errs, field.Invalid(gp, spec.Group, "should be a domain with at least one dot"))
	}
	errs = append(errs, enumRequired(specPath.Child("scope"), string(spec.Scope), string(apiextensionsv1.ClusterScoped), string(apiextensionsv1.NamespaceScoped))...)

	vp := specPath.Child("versions")
	for i, v := range spec.Versions {
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			continue
		}
		switch {
		case opts.requireOpenAPISchema:
			errs = append(errs, field.Required(vp.Index(i).Child("schema", "openAPIV3Schema"), ""))
		case v.Served && !spec.PreserveUnknownFields:
			errs = append(errs, field.Required(vp.Index(i).Child("schema", "openAPIV3Schema"), "because otherwise all fields are pruned"))
		}
	}
	if spec.PreserveUnknownFields && specHasSchemaWith(spec, func(s *apiextensionsv1.JSONSchemaProps) bool { return s.Default != nil }) {
		errs = append(errs, field.Invalid(specPath.Child("preserveUnknownFields"), true, "must be false in order to use defaults in the schema"))
	}

	shared := versionSharedParts(spec.Versions)
	storage, seen, unique := 0, map[string]bool{}, true
	for i := range spec.Versions {
		v := &spec.Versions[i]
		if v.Storage {
			storage++
		}
		if seen[v.Name] {
			unique = false
		}
		seen[v.Name] = true
		if msgs := utilvalidation.IsDNS1035Label(v.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(vp.Index(i).Child("name"), v.Name, strings.Join(msgs, ",")))
		}
		errs = append(errs, validateCRDVersion(v, shared, opts, vp.Index(i))...)
	}
	if !unique {
		errs = append(errs, field.Invalid(vp, spec.Versions, "must contain unique version names"))
	}
	if storage != 1 {
		errs = append(errs, field.Invalid(vp, spec.Versions, "must have exactly one version marked as storage version"))
	}
	// The internal version's spec.version is the first version's name.
	if len(spec.Versions) > 0 && spec.Versions[0].Name != "" {
		if msgs := utilvalidation.IsDNS1035Label(spec.Versions[0].Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(specPath.Child("version"), spec.Versions[0].Name, strings.Join(msgs, ",")))
		}
	}

	np := specPath.Child("names")
	for _, n := range []struct{ name, value string }{{"plural", spec.Names.Plural}, {"singular", spec.Names.Singular}, {"kind", spec.Names.Kind}, {"listKind", spec.Names.ListKind}} {
		if n.value == "" {
			errs = append(errs, field.Required(np.Child(n.name), ""))
		}
	}
	errs = append(errs, validateCRDNames(&spec.Names, np)...)
	errs = append(errs, validateSharedParts(spec, shared, opts)...)

	if spec.Conversion != nil && spec.Conversion.Strategy != apiextensionsv1.NoneConverter && spec.PreserveUnknownFields {
		errs = append(errs, field.Invalid(specPath.Child("conversion", "strategy"), spec.Conversion.Strategy, "must be None if spec.preserveUnknownFields is true"))
	}
	return append(errs, validateCRDConversion(spec.Conversion, opts, specPath.Child("conversion"))...)
}

// validateSharedParts checks the parts every version sets alike where the
// internal version has them, at spec.<part>.
func validateSharedParts(spec *apiextensionsv1.CustomResourceDefinitionSpec, shared sharedParts, opts crdOptions) field.ErrorList {
	if len(spec.Versions) == 0 {
		return nil
	}
	first := &spec.Versions[0]
	var errs field.ErrorList
	if shared.schema {
		anyStatus := false
		for _, v := range spec.Versions {
			anyStatus = anyStatus || (v.Subresources != nil && v.Subresources.Status != nil)
		}
		errs = append(errs, validateCRDSchema(first.Schema, anyStatus, specPath.Child("validation"))...)
	}
	if shared.subresources {
		errs = append(errs, validateCRDSubresources(first.Subresources, specPath.Child("subresources"))...)
	}
	if shared.columns {
		for i := range first.AdditionalPrinterColumns {
			errs = append(errs, validateColumn(&first.AdditionalPrinterColumns[i], specPath.Child("additionalPrinterColumns").Index(i))...)
		}
	}
	if shared.selectable && len(first.SelectableFields) > 0 {
		sp := specPath.Child("selectableFields")
		if !shared.schema || first.Schema == nil {
			errs = append(errs, field.Invalid(sp, "", "may only be set when validations.schema is included"))
		} else {
			errs = append(errs, validateSelectableFields(first.SelectableFields, first.Schema.OpenAPIV3Schema, sp, opts.allowTooManySelectableFields[""])...)
		}
	}
	return errs
}

func validateCRDVersion(v *apiextensionsv1.CustomResourceDefinitionVersion, shared sharedParts, opts crdOptions, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range deprecationWarningErrors(v.Deprecated, v.DeprecationWarning) {
		errs = append(errs, field.Invalid(fldPath.Child("deprecationWarning"), v.DeprecationWarning, msg))
	}
	if !shared.schema {
		errs = append(errs, validateCRDSchema(v.Schema, v.Subresources != nil && v.Subresources.Status != nil, fldPath.Child("schema"))...)
	}
	if !shared.subresources {
		errs = append(errs, validateCRDSubresources(v.Subresources, fldPath.Child("subresources"))...)
	}
	if !shared.columns {
		for i := range v.AdditionalPrinterColumns {
			errs = append(errs, validateColumn(&v.AdditionalPrinterColumns[i], fldPath.Child("additionalPrinterColumns").Index(i))...)
		}
	}
	if !shared.selectable && len(v.SelectableFields) > 0 {
		// A shared schema is not the version's own in the internal
		// version, so upstream refuses per-version fields over it too.
		if shared.schema || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			errs = append(errs, field.Invalid(fldPath.Child("selectableFields"), "", "may only be set when `version.schema.openAPIV3Schema` is not included"))
		} else {
			errs = append(errs, validateSelectableFields(v.SelectableFields, v.Schema.OpenAPIV3Schema, fldPath.Child("selectableFields"), opts.allowTooManySelectableFields[v.Name])...)
		}
	}
	return errs
}

func deprecationWarningErrors(deprecated bool, warning *string) []string {
	if !deprecated && warning != nil {
		return []string{"can only be set for deprecated versions"}
	}
	if warning == nil {
		return nil
	}
	var msgs []string
	if len(*warning) > 256 {
		msgs = append(msgs, "must be <= 256 characters long")
	}
	if len(*warning) == 0 {
		msgs = append(msgs, "must not be an empty string")
	}
	for i, r := range *warning {
		if !unicode.IsPrint(r) {
			msgs = append(msgs, fmt.Sprintf("must only contain printable UTF-8 characters; non-printable character found at index %d", i))
			break
		}
		if unicode.IsControl(r) {
			msgs = append(msgs, fmt.Sprintf("must only contain printable UTF-8 characters; control character found at index %d", i))
			break
		}
	}
	if !utf8.ValidString(*warning) {
		msgs = append(msgs, "must only contain printable UTF-8 characters")
	}
	return msgs
}

// validateCRDNames checks spec.names and status.acceptedNames: every name a
// DNS label (kinds in any case), kind and listKind distinct.
func validateCRDNames(n *apiextensionsv1.CustomResourceDefinitionNames, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	label := func(child, value string) {
		if msgs := utilvalidation.IsDNS1035Label(value); value != "" && len(msgs) > 0 {
			errs = append(errs, field.Invalid(fldPath.Child(child), value, strings.Join(msgs, ",")))
		}
	}
	kindLike := func(child, value string) {
		if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(value)); value != "" && len(msgs) > 0 {
			errs = append(errs, field.Invalid(fldPath.Child(child), value, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
		}
	}
	label("plural", n.Plural)
	label("singular", n.Singular)
	kindLike("kind", n.Kind)
	kindLike("listKind", n.ListKind)
	for i, s := range n.ShortNames {
		if msgs := utilvalidation.IsDNS1035Label(s); len(msgs) > 0 {
			errs = append(errs, field.Invalid(fldPath.Child("shortNames").Index(i), s, strings.Join(msgs, ",")))
		}
	}
	// the same name for both would make parsing ambiguous
	if n.Kind != "" && n.Kind == n.ListKind {
		errs = append(errs, field.Invalid(fldPath.Child("listKind"), n.ListKind, "kind and listKind may not be the same"))
	}
	for i, c := range n.Categories {
		if msgs := utilvalidation.IsDNS1035Label(c); len(msgs) > 0 {
			errs = append(errs, field.Invalid(fldPath.Child("categories").Index(i), c, strings.Join(msgs, ",")))
		}
	}
	return errs
}

// validateCRDStatus is upstream's: only the accepted names have rules; the
// conditions and stored versions are the server's own bookkeeping.
func validateCRDStatus(s *apiextensionsv1.CustomResourceDefinitionStatus) field.ErrorList {
	return validateCRDNames(&s.AcceptedNames, field.NewPath("status", "acceptedNames"))
}

// validateStoredVersions: the storage version is among the stored ones, and
// no stored version leaves spec.versions while objects may still be
// encoded in it.
func validateStoredVersions(stored []string, versions []apiextensionsv1.CustomResourceDefinitionVersion) field.ErrorList {
	fp := field.NewPath("status", "storedVersions")
	if len(stored) == 0 {
		return field.ErrorList{field.Invalid(fp, stored, "must have at least one stored version")}
	}
	var errs field.ErrorList
	left := map[string]int{}
	for i, v := range stored {
		left[v] = i
	}
	for _, v := range versions {
		_, ok := left[v.Name]
		if v.Storage && !ok {
			errs = append(errs, field.Invalid(fp, stored, "must have the storage version "+v.Name))
		}
		delete(left, v.Name)
	}
	missing := make([]string, 0, len(left))
	for v := range left {
		missing = append(missing, v)
	}
	sort.Slice(missing, func(a, b int) bool { return left[missing[a]] < left[missing[b]] })
	for _, v := range missing {
		errs = append(errs, field.Invalid(fp.Index(left[v]), v, fmt.Sprintf("missing from spec.versions; %[1]s was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in %[1]s and removes %[1]s from status.storedVersions", v)))
	}
	return errs
}

// isProtectedCommunityGroup: the k8s.io and kubernetes.io groups belong to
// the Kubernetes project, whose API reviews a CRD there must name.
func isProtectedCommunityGroup(group string) bool {
	return group == "k8s.io" || strings.HasSuffix(group, ".k8s.io") ||
		group == "kubernetes.io" || strings.HasSuffix(group, ".kubernetes.io")
}

type approvalState int

const (
	approvalInvalid approvalState = iota
	approved
	approvalBypassed
	approvalMissing
)

func apiApprovalState(annotations map[string]string) (approvalState, string) {
	a := annotations[apiextensionsv1.KubeAPIApprovedAnnotation]
	u, err := url.ParseRequestURI(a)
	switch {
	case a == "":
		return approvalMissing, fmt.Sprintf("protected groups must have approval annotation %q, see https://github.com/kubernetes/enhancements/pull/1111", apiextensionsv1.KubeAPIApprovedAnnotation)
	case strings.HasPrefix(a, "unapproved"):
		return approvalBypassed, fmt.Sprintf("not approved: %q", a)
	case err == nil && u.Host != "" && u.Scheme != "":
		return approved, "approved in " + a
	default:
		return approvalInvalid, fmt.Sprintf("protected groups must have approval annotation %q with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111", apiextensionsv1.KubeAPIApprovedAnnotation)
	}
}

// validateAPIApproval: a CRD in a protected group carries the approval
// annotation; an update that leaves its state as it was is never refused,
// so controllers that only touch the spec keep working.
func validateAPIApproval(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	if !isProtectedCommunityGroup(crd.Spec.Group) {
		return nil
	}
	state, reason := apiApprovalState(crd.Annotations)
	if old != nil {
		if oldState, _ := apiApprovalState(old.Annotations); oldState == state {
			return nil
		}
	}
	fp := metaPath.Child("annotations").Key(apiextensionsv1.KubeAPIApprovedAnnotation)
	switch state {
	case approved, approvalBypassed:
		return nil
	case approvalMissing:
		return field.ErrorList{field.Required(fp, reason)}
	default:
		return field.ErrorList{field.Invalid(fp, crd.Annotations[apiextensionsv1.KubeAPIApprovedAnnotation], reason)}
	}
}

// validatePreserveUnknownFields: v1 prunes; a CRD stored with the v1beta1
// behaviour keeps it.
func validatePreserveUnknownFields(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	if old != nil && old.Spec.PreserveUnknownFields {
		return nil
	}
	if crd.Spec.PreserveUnknownFields {
		return field.ErrorList{field.Invalid(specPath.Child("preserveUnknownFields"), crd.Spec.PreserveUnknownFields, "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead")}
	}
	return nil
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func allVersionsHaveSchema(spec *apiextensionsv1.CustomResourceDefinitionSpec) bool {
	for _, v := range spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return false
		}
	}
	return true
}

// tooManySelectableFieldsAllowed keeps accepting a version (or the shared
// list, key "") that was stored with more than the maximum before the limit,
// as long as its fields are unchanged.
func tooManySelectableFieldsAllowed(crd, old *apiextensionsv1.CustomResourceDefinition) map[string]bool {
	out := map[string]bool{}
	oldByName := map[string]*apiextensionsv1.CustomResourceDefinitionVersion{}
	for i := range old.Spec.Versions {
		oldByName[old.Spec.Versions[i].Name] = &old.Spec.Versions[i]
	}
	for _, v := range crd.Spec.Versions {
		if o, ok := oldByName[v.Name]; ok && len(o.SelectableFields) > maxSelectableFields && semanticEqual(v.SelectableFields, o.SelectableFields) {
			out[v.Name] = true
		}
	}
	if n := len(crd.Spec.Versions); n > 0 && versionSharedParts(crd.Spec.Versions).selectable && out[crd.Spec.Versions[0].Name] {
		out[""] = true
	}
	return out
}

func enumRequired(fldPath *field.Path, value string, accepted ...string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	for _, a := range accepted {
		if a == value {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fldPath, value, accepted)}
}
