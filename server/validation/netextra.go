package validation

import (
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateNetExtraKind validates the kinds of networking.k8s.io/v1 ServiceCIDR and IPAddress.
func validateNetExtraKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *networkingv1.ServiceCIDR:
		return validateServiceCIDR(o), true
	case *networkingv1.IPAddress:
		return validateIPAddress(o), true
	}
	return nil, false
}

// updateNetExtraKind validates updates of the kinds of networking.k8s.io/v1 ServiceCIDR and IPAddress.
func updateNetExtraKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *networkingv1.ServiceCIDR:
		return validateServiceCIDRUpdate(o, old.(*networkingv1.ServiceCIDR)), true
	case *networkingv1.IPAddress:
		prev := old.(*networkingv1.IPAddress)
		errs := validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta)
		// The address is held for its parent: moving it to another would
		// let two objects believe they own it.
		errs = append(errs, immutable(o.Spec.ParentRef, prev.Spec.ParentRef, specPath.Child("parentRef"))...)
		return append(errs, validateIPAddress(o)...), true
	}
	return nil, false
}

// ipAddressName: an IPAddress is named by its address in canonical form,
// so that one address can only ever have one object.
func ipAddressName(name string, _ bool) []string {
	var out []string
	for _, e := range utilvalidation.IsValidIP(&field.Path{}, name) {
		out = append(out, e.Detail)
	}
	return out
}

func validateIPAddress(ip *networkingv1.IPAddress) field.ErrorList {
	errs := validateMeta(&ip.ObjectMeta, false, ipAddressName)
	p := specPath.Child("parentRef")
	ref := ip.Spec.ParentRef
	if ref == nil {
		return append(errs, field.Required(p, ""))
	}
	if ref.Group != "" {
		errs = append(errs, dns1123Subdomain(ref.Group, p.Child("group"))...)
	}
	for _, f := range []struct {
		name, value string
		required    bool
	}{{"resource", ref.Resource, true}, {"name", ref.Name, true}, {"namespace", ref.Namespace, false}} {
		switch {
		case f.value == "" && f.required:
			errs = append(errs, field.Required(p.Child(f.name), ""))
		case f.value != "":
			errs = append(errs, messages(p.Child(f.name), f.value, content.IsPathSegmentName(f.value))...)
		}
	}
	return errs
}

func validateServiceCIDR(c *networkingv1.ServiceCIDR) field.ErrorList {
	errs := validateMeta(&c.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateServiceCIDRs(c.Spec.CIDRs)...)
}

func validateServiceCIDRs(cidrs []string) field.ErrorList {
	p := specPath.Child("cidrs")
	switch {
	case len(cidrs) == 0:
		return field.ErrorList{field.Required(p, "at least one CIDR required")}
	case len(cidrs) > 2:
		return field.ErrorList{field.Invalid(p, cidrs, "may only hold up to 2 values")}
	}
	var errs field.ErrorList
	for i, cidr := range cidrs {
		errs = append(errs, utilvalidation.IsValidCIDR(p.Index(i), cidr)...)
	}
	if len(errs) == 0 && len(cidrs) == 2 {
		a, b := netip.MustParsePrefix(cidrs[0]), netip.MustParsePrefix(cidrs[1])
		if a.Addr().Is4() == b.Addr().Is4() {
			errs = append(errs, field.Invalid(p, cidrs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
	}
	return errs
}

// validateServiceCIDRUpdate: the ranges are fixed once made (addresses
// were handed out of them), except that a single-stack range may gain the
// other family, as a cluster moving to dual-stack does.
func validateServiceCIDRUpdate(c, old *networkingv1.ServiceCIDR) field.ErrorList {
	errs := validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateMeta(&c.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)...)
	p := specPath.Child("cidrs")
	const msg = apivalidation.FieldImmutableErrorMsg
	switch cur, prev := c.Spec.CIDRs, old.Spec.CIDRs; {
	case len(cur) == len(prev):
		for i := range prev {
			if cur[i] != prev[i] {
				errs = append(errs, field.Invalid(p.Index(i), cur[i], msg))
			}
		}
	case len(prev) == 1 && len(cur) == 2:
		if cur[0] != prev[0] {
			errs = append(errs, field.Invalid(p.Index(0), cur[0], msg))
		}
		errs = append(errs, validateServiceCIDRs(cur)...)
	default:
		errs = append(errs, field.Invalid(p, cur, msg))
	}
	return errs
}
