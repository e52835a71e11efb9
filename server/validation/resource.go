package validation

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// resource.k8s.io/v1, after upstream's pkg/apis/resource/validation. CEL
// selector expressions are checked for presence and length only: this
// server has no CEL compiler and nothing here evaluates them (no driver
// allocates claims; the scheduler keeps pods that need one Pending).

var validDeviceTaintEffects = []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNone}

func validateDeviceClass(c *resourcev1.DeviceClass) field.ErrorList {
	errs := validateMeta(&c.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	p := specPath
	errs = append(errs, maxItems(len(c.Spec.Selectors), resourcev1.DeviceSelectorsMaxSize, p.Child("selectors"))...)
	for i, s := range c.Spec.Selectors {
		errs = append(errs, validateDeviceSelector(s, p.Child("selectors").Index(i))...)
	}
	errs = append(errs, maxItems(len(c.Spec.Config), resourcev1.DeviceConfigMaxSize, p.Child("config"))...)
	for i, cfg := range c.Spec.Config {
		errs = append(errs, validateDeviceConfiguration(cfg.DeviceConfiguration, p.Child("config").Index(i))...)
	}
	if n := c.Spec.ExtendedResourceName; n != nil && !isExtendedResourceName(*n) {
		errs = append(errs, field.Invalid(p.Child("extendedResourceName"), *n, "must be a valid extended resource name"))
	}
	return errs
}

// isExtendedResourceName is upstream's v1helper.IsExtendedResourceName: a
// fully qualified name outside the kubernetes.io domain, not requests.*.
func isExtendedResourceName(name string) bool {
	native := !strings.Contains(name, "/") || strings.Contains(name, corev1.ResourceDefaultNamespacePrefix)
	if native || strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(utilvalidation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+name)) == 0
}

func maxItems(n, limit int, fldPath *field.Path) field.ErrorList {
	if n > limit {
		return field.ErrorList{field.TooMany(fldPath, n, limit)}
	}
	return nil
}

func validateDeviceSelector(s resourcev1.DeviceSelector, fldPath *field.Path) field.ErrorList {
	if s.CEL == nil {
		return field.ErrorList{field.Required(fldPath.Child("cel"), "")}
	}
	p := fldPath.Child("cel", "expression")
	switch e := s.CEL.Expression; {
	case strings.TrimSpace(e) == "":
		return field.ErrorList{field.Required(p, "")}
	case len(e) > resourcev1.CELSelectorExpressionMaxLength:
		return field.ErrorList{field.TooLong(p, "", resourcev1.CELSelectorExpressionMaxLength)}
	}
	return nil
}

func validateDeviceConfiguration(c resourcev1.DeviceConfiguration, fldPath *field.Path) field.ErrorList {
	if c.Opaque == nil {
		return field.ErrorList{field.Required(fldPath.Child("opaque"), "")}
	}
	p := fldPath.Child("opaque")
	errs := validateCSIDriverName(c.Opaque.Driver, p.Child("driver"))
	return append(errs, validateOpaqueParameters(c.Opaque.Parameters, p.Child("parameters"))...)
}

func validateOpaqueParameters(raw runtime.RawExtension, fldPath *field.Path) field.ErrorList {
	var v any
	switch {
	case len(raw.Raw) == 0:
		return field.ErrorList{field.Required(fldPath, "")}
	case len(raw.Raw) > resourcev1.OpaqueParametersMaxLength:
		return field.ErrorList{field.TooLong(fldPath, "", resourcev1.OpaqueParametersMaxLength)}
	}
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		return field.ErrorList{field.Invalid(fldPath, "<value omitted>", fmt.Sprintf("error parsing data as JSON: %v", err))}
	}
	if v == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if _, ok := v.(map[string]any); !ok {
		return field.ErrorList{field.Invalid(fldPath, "<value omitted>", "must be a valid JSON object")}
	}
	return nil
}

func validateResourceClaim(c *resourcev1.ResourceClaim) field.ErrorList {
	errs := validateMeta(&c.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateDeviceClaim(&c.Spec.Devices, specPath.Child("devices"))...)
}

// validateResourceClaimUpdate covers both writes: the spec is immutable
// (a status write keeps the stored spec), the status follows upstream's
// status rules (a main-resource write keeps the stored status).
func validateResourceClaimUpdate(c, old *resourcev1.ResourceClaim) field.ErrorList {
	errs := validateMeta(&c.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)...)
	errs = append(errs, immutable(c.Spec, old.Spec, specPath)...)
	return append(errs, validateResourceClaimStatus(c, old)...)
}

func validateResourceClaimTemplate(t *resourcev1.ResourceClaimTemplate) field.ErrorList {
	errs := validateMeta(&t.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateTemplateMeta(&t.Spec.ObjectMeta, specPath.Child("metadata"))...)
	return append(errs, validateDeviceClaim(&t.Spec.Spec.Devices, specPath.Child("spec", "devices"))...)
}

func validateResourceClaimTemplateUpdate(t, old *resourcev1.ResourceClaimTemplate) field.ErrorList {
	errs := validateMetaUpdate(&t.ObjectMeta, &old.ObjectMeta)
	return append(errs, immutable(t.Spec, old.Spec, specPath)...)
}

// requestNames maps each request of a claim to its subrequests.
type requestNames map[string]map[string]bool

func gatherRequestNames(c *resourcev1.DeviceClaim) requestNames {
	out := requestNames{}
	for _, r := range c.Requests {
		subs := map[string]bool{}
		for _, s := range r.FirstAvailable {
			subs[s.Name] = true
		}
		out[r.Name] = subs
	}
	return out
}

// has accepts "request" or "request/subrequest".
func (r requestNames) has(ref string) bool {
	req, sub, hasSub := strings.Cut(ref, "/")
	subs, ok := r[req]
	if !ok || !hasSub {
		return ok
	}
	return subs[sub]
}

func validateDeviceClaim(c *resourcev1.DeviceClaim, fldPath *field.Path) field.ErrorList {
	names := gatherRequestNames(c)
	reqPath := fldPath.Child("requests")
	errs := maxItems(len(c.Requests), resourcev1.DeviceRequestsMaxSize, reqPath)
	seen := map[string]bool{}
	for i, r := range c.Requests {
		p := reqPath.Index(i)
		if seen[r.Name] {
			errs = append(errs, field.Duplicate(p, r.Name))
		}
		seen[r.Name] = true
		errs = append(errs, validateDeviceRequest(r, p)...)
	}
	errs = append(errs, maxItems(len(c.Constraints), resourcev1.DeviceConstraintsMaxSize, fldPath.Child("constraints"))...)
	for i, con := range c.Constraints {
		p := fldPath.Child("constraints").Index(i)
		errs = append(errs, validateRequestRefs(con.Requests, names, p.Child("requests"))...)
		switch {
		case con.MatchAttribute != nil:
			errs = append(errs, validateFullyQualifiedName(string(*con.MatchAttribute), p.Child("matchAttribute"))...)
		case con.DistinctAttribute != nil:
			errs = append(errs, validateFullyQualifiedName(string(*con.DistinctAttribute), p.Child("distinctAttribute"))...)
		default:
			errs = append(errs, field.Required(p, `exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set`))
		}
	}
	errs = append(errs, maxItems(len(c.Config), resourcev1.DeviceConfigMaxSize, fldPath.Child("config"))...)
	for i, cfg := range c.Config {
		p := fldPath.Child("config").Index(i)
		errs = append(errs, validateRequestRefs(cfg.Requests, names, p.Child("requests"))...)
		errs = append(errs, validateDeviceConfiguration(cfg.DeviceConfiguration, p)...)
	}
	return errs
}

func validateRequestRefs(refs []string, names requestNames, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, ref := range refs {
		p := fldPath.Index(i)
		if seen[ref] {
			errs = append(errs, field.Duplicate(p, ref))
		}
		seen[ref] = true
		errs = append(errs, validateRequestRef(ref, names, p)...)
	}
	return errs
}

const requestRefMessage = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"

func validateRequestRef(ref string, names requestNames, fldPath *field.Path) field.ErrorList {
	segments := strings.Split(ref, "/")
	if len(segments) > 2 {
		return field.ErrorList{field.Invalid(fldPath, ref, requestRefMessage)}
	}
	var errs field.ErrorList
	for _, s := range segments {
		errs = append(errs, dns1123Label(s, fldPath)...)
	}
	if !names.has(ref) {
		errs = append(errs, field.Invalid(fldPath, ref, requestRefMessage))
	}
	return errs
}

func validateDeviceRequest(r resourcev1.DeviceRequest, fldPath *field.Path) field.ErrorList {
	errs := dns1123Label(r.Name, fldPath.Child("name"))
	switch {
	case r.Exactly == nil && len(r.FirstAvailable) == 0:
		errs = append(errs, field.Required(fldPath, "exactly one of `exactly` or `firstAvailable` is required"))
	case r.Exactly != nil && len(r.FirstAvailable) > 0:
		errs = append(errs, field.Invalid(fldPath, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
	case r.Exactly != nil:
		e := r.Exactly
		errs = append(errs, validateDeviceChoice(fldPath.Child("exactly"), e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count, e.Tolerations)...)
	default:
		p := fldPath.Child("firstAvailable")
		errs = append(errs, maxItems(len(r.FirstAvailable), resourcev1.FirstAvailableDeviceRequestMaxSize, p)...)
		seen := map[string]bool{}
		for i, s := range r.FirstAvailable {
			sp := p.Index(i)
			if seen[s.Name] {
				errs = append(errs, field.Duplicate(sp, s.Name))
			}
			seen[s.Name] = true
			errs = append(errs, dns1123Label(s.Name, sp.Child("name"))...)
			errs = append(errs, validateDeviceChoice(sp, s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count, s.Tolerations)...)
		}
	}
	return errs
}

// validateDeviceChoice checks what an exact request and a subrequest share.
func validateDeviceChoice(fldPath *field.Path, class string, selectors []resourcev1.DeviceSelector, mode resourcev1.DeviceAllocationMode, count int64,
	tolerations []resourcev1.DeviceToleration) field.ErrorList {
	var errs field.ErrorList
	if class == "" {
		errs = append(errs, field.Required(fldPath.Child("deviceClassName"), ""))
	} else {
		errs = append(errs, dns1123Subdomain(class, fldPath.Child("deviceClassName"))...)
	}
	errs = append(errs, maxItems(len(selectors), resourcev1.DeviceSelectorsMaxSize, fldPath.Child("selectors"))...)
	for i, s := range selectors {
		errs = append(errs, validateDeviceSelector(s, fldPath.Child("selectors").Index(i))...)
	}
	switch mode {
	case resourcev1.DeviceAllocationModeAll:
		if count != 0 {
			errs = append(errs, field.Invalid(fldPath.Child("count"), count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode)))
		}
	case resourcev1.DeviceAllocationModeExactCount:
		if count <= 0 {
			errs = append(errs, field.Invalid(fldPath.Child("count"), count, "must be greater than zero"))
		}
	default:
		errs = append(errs, notSupported(fldPath.Child("allocationMode"), mode, resourcev1.DeviceAllocationModeAll, resourcev1.DeviceAllocationModeExactCount)...)
	}
	errs = append(errs, maxItems(len(tolerations), resourcev1.DeviceTolerationsMaxLength, fldPath.Child("tolerations"))...)
	for i, t := range tolerations {
		errs = append(errs, validateDeviceToleration(t, fldPath.Child("tolerations").Index(i))...)
	}
	return errs
}

func validateDeviceToleration(t resourcev1.DeviceToleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metavalidation.ValidateLabelName(t.Key, fldPath.Child("key"))...)
	}
	switch t.Operator {
	case resourcev1.DeviceTolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(fldPath.Child("value"), t.Value, "must be empty for operator `Exists`"))
		}
	case resourcev1.DeviceTolerationOpEqual:
		errs = append(errs, labelValue(t.Value, fldPath.Child("value"))...)
	case "":
		errs = append(errs, field.Required(fldPath.Child("operator"), ""))
	default:
		errs = append(errs, notSupported(fldPath.Child("operator"), t.Operator, resourcev1.DeviceTolerationOpEqual, resourcev1.DeviceTolerationOpExists)...)
	}
	if t.Effect != "" {
		errs = append(errs, enum(t.Effect, fldPath.Child("effect"), validDeviceTaintEffects...)...)
	}
	return errs
}

func labelValue(v string, fldPath *field.Path) field.ErrorList {
	return messages(fldPath, v, utilvalidation.IsValidLabelValue(v))
}

// validateFullyQualifiedName: an attribute name with a domain
// ("dra.example.com/model").
func validateFullyQualifiedName(name string, fldPath *field.Path) field.ErrorList {
	domain, id, ok := strings.Cut(name, "/")
	if !ok || domain == "" {
		return field.ErrorList{field.Required(fldPath, "a fully qualified name must be a domain and a name separated by a slash")}
	}
	errs := dns1123Subdomain(domain, fldPath)
	return append(errs, cIdentifier(id, fldPath)...)
}

func cIdentifier(id string, fldPath *field.Path) field.ErrorList {
	if len(id) > resourcev1.DeviceMaxIDLength {
		return field.ErrorList{field.TooLong(fldPath, "", resourcev1.DeviceMaxIDLength)}
	}
	return messages(fldPath, id, utilvalidation.IsCIdentifier(id))
}

func validateResourceClaimStatus(c, old *resourcev1.ResourceClaim) field.ErrorList {
	st, p := &c.Status, field.NewPath("status")
	names := gatherRequestNames(&c.Spec.Devices)
	errs := maxItems(len(st.ReservedFor), resourcev1.ResourceClaimReservedForMaxSize, p.Child("reservedFor"))
	seen := map[string]bool{}
	for i, ref := range st.ReservedFor {
		rp := p.Child("reservedFor").Index(i)
		if ref.Resource == "" {
			errs = append(errs, field.Required(rp.Child("resource"), ""))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(rp.Child("name"), ""))
		}
		if ref.UID == "" {
			errs = append(errs, field.Required(rp.Child("uid"), ""))
		}
		if seen[string(ref.UID)] {
			errs = append(errs, field.Duplicate(rp, ref))
		}
		seen[string(ref.UID)] = true
	}
	if len(st.ReservedFor) > 0 && st.Allocation == nil {
		errs = append(errs, field.Forbidden(p.Child("reservedFor"), "may not be specified when `allocated` is not set"))
	}
	if len(st.ReservedFor) > 0 && st.Allocation != nil && c.DeletionTimestamp != nil {
		before := map[string]bool{}
		for _, r := range old.Status.ReservedFor {
			before[string(r.UID)] = true
		}
		for _, r := range st.ReservedFor {
			if !before[string(r.UID)] {
				errs = append(errs, field.Forbidden(p.Child("reservedFor"), "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"))
				break
			}
		}
	}
	switch {
	case old.Status.Allocation != nil && st.Allocation != nil:
		errs = append(errs, immutable(st.Allocation, old.Status.Allocation, p.Child("allocation"))...)
	case st.Allocation != nil:
		errs = append(errs, validateAllocationResult(st.Allocation, names, p.Child("allocation"))...)
	}
	return errs
}

func validateAllocationResult(a *resourcev1.AllocationResult, names requestNames, fldPath *field.Path) field.ErrorList {
	dp := fldPath.Child("devices")
	errs := maxItems(len(a.Devices.Results), resourcev1.AllocationResultsMaxSize, dp.Child("results"))
	for i, r := range a.Devices.Results {
		rp := dp.Child("results").Index(i)
		errs = append(errs, validateRequestRef(r.Request, names, rp.Child("request"))...)
		errs = append(errs, validateCSIDriverName(r.Driver, rp.Child("driver"))...)
		errs = append(errs, validatePoolName(r.Pool, rp.Child("pool"))...)
		errs = append(errs, dns1123Label(r.Device, rp.Child("device"))...)
		for j, t := range r.Tolerations {
			errs = append(errs, validateDeviceToleration(t, rp.Child("tolerations").Index(j))...)
		}
	}
	for i, cfg := range a.Devices.Config {
		cp := dp.Child("config").Index(i)
		switch cfg.Source {
		case "":
			errs = append(errs, field.Required(cp.Child("source"), ""))
		case resourcev1.AllocationConfigSourceClaim, resourcev1.AllocationConfigSourceClass:
		default:
			errs = append(errs, notSupported(cp.Child("source"), cfg.Source, resourcev1.AllocationConfigSourceClaim, resourcev1.AllocationConfigSourceClass)...)
		}
		errs = append(errs, validateRequestRefs(cfg.Requests, names, cp.Child("requests"))...)
		errs = append(errs, validateDeviceConfiguration(cfg.DeviceConfiguration, cp)...)
	}
	if a.NodeSelector != nil {
		errs = append(errs, validateNodeSelector(a.NodeSelector, fldPath.Child("nodeSelector"))...)
	}
	return errs
}

// validatePoolName: one or more DNS subdomains separated by slashes.
func validatePoolName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	if len(name) > resourcev1.PoolNameMaxLength {
		errs = append(errs, field.TooLong(fldPath, "", resourcev1.PoolNameMaxLength))
	}
	for _, part := range strings.Split(name, "/") {
		errs = append(errs, dns1123Subdomain(part, fldPath)...)
	}
	return errs
}

func validateResourceSlice(s, old *resourcev1.ResourceSlice) field.ErrorList {
	errs := validateMeta(&s.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	spec, p := &s.Spec, specPath
	errs = append(errs, validateCSIDriverName(spec.Driver, p.Child("driver"))...)
	errs = append(errs, validatePoolName(spec.Pool.Name, p.Child("pool", "name"))...)
	if spec.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(p.Child("pool", "resourceSliceCount"), spec.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	if spec.Pool.Generation < 0 {
		errs = append(errs, field.Invalid(p.Child("pool", "generation"), spec.Pool.Generation, "must be greater than or equal to zero"))
	}
	if old != nil {
		errs = append(errs, validateMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)...)
		errs = append(errs, immutable(spec.Pool.Name, old.Spec.Pool.Name, p.Child("pool", "name"))...)
		errs = append(errs, immutable(spec.Driver, old.Spec.Driver, p.Child("driver"))...)
		errs = append(errs, immutable(spec.NodeName, old.Spec.NodeName, p.Child("nodeName"))...)
	}
	errs = append(errs, validateSliceNodeSelection(spec, p)...)
	if spec.SharedCounters != nil && spec.Devices != nil {
		errs = append(errs, field.Invalid(p, "", "only one of `sharedCounters` or `devices` is allowed"))
	}
	errs = append(errs, maxItems(len(spec.Devices), resourcev1.ResourceSliceMaxDevices, p.Child("devices"))...)
	seen := map[string]bool{}
	for i, d := range spec.Devices {
		dp := p.Child("devices").Index(i)
		if seen[d.Name] {
			errs = append(errs, field.Duplicate(dp.Child("name"), d.Name))
		}
		seen[d.Name] = true
		errs = append(errs, dns1123Label(d.Name, dp.Child("name"))...)
		if n := len(d.Attributes) + len(d.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			errs = append(errs, field.Invalid(dp, n, fmt.Sprintf("the total number of attributes and capacities must not exceed %d", resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
		}
		errs = append(errs, maxItems(len(d.Taints), resourcev1.DeviceTaintsMaxLength, dp.Child("taints"))...)
		for j, t := range d.Taints {
			errs = append(errs, validateDeviceTaint(t, nil, dp.Child("taints").Index(j))...)
		}
	}
	return errs
}

// validateSliceNodeSelection: exactly one of nodeName, nodeSelector,
// allNodes, perDeviceNodeSelection says where the devices are.
func validateSliceNodeSelection(spec *resourcev1.ResourceSliceSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	var set []string
	if spec.NodeName != nil {
		if *spec.NodeName == "" {
			errs = append(errs, field.Invalid(p.Child("nodeName"), *spec.NodeName, "must be either unset or set to a non-empty string"))
		} else {
			set = append(set, "`nodeName`")
			errs = append(errs, messages(p.Child("nodeName"), *spec.NodeName, apivalidation.NameIsDNSSubdomain(*spec.NodeName, false))...)
		}
	}
	if spec.NodeSelector != nil {
		set = append(set, "`nodeSelector`")
		errs = append(errs, validateNodeSelector(spec.NodeSelector, p.Child("nodeSelector"))...)
		if len(spec.NodeSelector.NodeSelectorTerms) != 1 {
			errs = append(errs, field.Invalid(p.Child("nodeSelector", "nodeSelectorTerms"), spec.NodeSelector.NodeSelectorTerms, "must have exactly one node selector term"))
		}
	}
	for _, b := range []struct {
		name string
		v    *bool
	}{{"allNodes", spec.AllNodes}, {"perDeviceNodeSelection", spec.PerDeviceNodeSelection}} {
		if b.v == nil {
			continue
		}
		if !*b.v {
			errs = append(errs, field.Invalid(p.Child(b.name), *b.v, "must be either unset or set to true"))
			continue
		}
		set = append(set, "`"+b.name+"`")
	}
	switch len(set) {
	case 0:
		errs = append(errs, field.Required(p, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
	case 1:
	default:
		errs = append(errs, field.Invalid(p, fmt.Sprintf("{%s}", strings.Join(set, ", ")),
			"exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"))
	}
	return errs
}

func validateDeviceTaint(t resourcev1.DeviceTaint, old *resourcev1.DeviceTaint, fldPath *field.Path) field.ErrorList {
	errs := metavalidation.ValidateLabelName(t.Key, fldPath.Child("key"))
	if t.Value != "" {
		errs = append(errs, labelValue(t.Value, fldPath.Child("value"))...)
	}
	if old == nil || old.Effect != t.Effect {
		if t.Effect == "" {
			errs = append(errs, field.Required(fldPath.Child("effect"), ""))
		} else {
			errs = append(errs, enum(t.Effect, fldPath.Child("effect"), validDeviceTaintEffects...)...)
		}
	}
	return errs
}

func validateDeviceTaintRule(r, old *resourcev1.DeviceTaintRule) field.ErrorList {
	errs := validateMeta(&r.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	var oldTaint *resourcev1.DeviceTaint
	if old != nil {
		errs = append(errs, validateMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)...)
		oldTaint = &old.Spec.Taint
	}
	if s := r.Spec.DeviceSelector; s != nil {
		sp := specPath.Child("deviceSelector")
		if s.Driver != nil {
			errs = append(errs, validateCSIDriverName(*s.Driver, sp.Child("driver"))...)
		}
		if s.Pool != nil {
			errs = append(errs, validatePoolName(*s.Pool, sp.Child("pool"))...)
		}
		if s.Device != nil {
			errs = append(errs, dns1123Label(*s.Device, sp.Child("device"))...)
		}
	}
	errs = append(errs, validateDeviceTaint(r.Spec.Taint, oldTaint, specPath.Child("taint"))...)
	cp := field.NewPath("status", "conditions")
	errs = append(errs, metavalidation.ValidateConditions(r.Status.Conditions, cp)...)
	return append(errs, maxItems(len(r.Status.Conditions), resourcev1.DeviceTaintRuleStatusMaxConditions, cp)...)
}
