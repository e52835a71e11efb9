package validation

import (
	"net"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Size limits of an EndpointSlice; larger sets are split over several
// slices so that no single watch event grows unbounded.
const (
	maxSliceEndpoints = 1000
	maxSliceAddresses = 100
	maxSlicePorts     = 20000
)

func validateEndpoints(ep *corev1.Endpoints) field.ErrorList {
	errs := validateMeta(&ep.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	subsetsPath := field.NewPath("subsets")
	for i, ss := range ep.Subsets {
		idxPath := subsetsPath.Index(i)
		// Headless services may have endpoints without ports, never without addresses.
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(idxPath, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(&ss.Addresses[j], idxPath.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(&ss.NotReadyAddresses[j], idxPath.Child("notReadyAddresses").Index(j))...)
		}
		for j, p := range ss.Ports {
			pp := idxPath.Child("ports").Index(j)
			if len(ss.Ports) > 1 && p.Name == "" {
				errs = append(errs, field.Required(pp.Child("name"), ""))
			} else if p.Name != "" {
				errs = append(errs, dns1123Label(p.Name, pp.Child("name"))...)
			}
			errs = append(errs, portNum(p.Port, pp.Child("port"))...)
			errs = append(errs, enum(p.Protocol, pp.Child("protocol"), corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP)...)
			if p.AppProtocol != nil {
				errs = append(errs, qualifiedName(*p.AppProtocol, pp.Child("appProtocol"))...)
			}
		}
	}
	return errs
}

func validateEndpointAddress(a *corev1.EndpointAddress, fldPath *field.Path) field.ErrorList {
	errs := legacyIP(a.IP, fldPath.Child("ip"))
	if len(errs) == 0 {
		errs = append(errs, nonSpecialIP(a.IP, fldPath.Child("ip"))...)
	}
	if a.Hostname != "" {
		errs = append(errs, dns1123Label(a.Hostname, fldPath.Child("hostname"))...)
	}
	if a.NodeName != nil {
		errs = append(errs, messages(fldPath.Child("nodeName"), *a.NodeName, apivalidation.NameIsDNSSubdomain(*a.NodeName, false))...)
	}
	return errs
}

func validateEndpointSlice(es *discoveryv1.EndpointSlice) field.ErrorList {
	errs := validateMeta(&es.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, enum(es.AddressType, field.NewPath("addressType"),
		discoveryv1.AddressTypeFQDN, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6)...)
	epPath := field.NewPath("endpoints")
	if len(es.Endpoints) > maxSliceEndpoints {
		errs = append(errs, field.TooMany(epPath, len(es.Endpoints), maxSliceEndpoints))
	}
	for i := range es.Endpoints {
		errs = append(errs, validateSliceEndpoint(&es.Endpoints[i], es.AddressType, epPath.Index(i))...)
	}
	return append(errs, validateSlicePorts(es.Ports, field.NewPath("ports"))...)
}

func validateSliceEndpoint(ep *discoveryv1.Endpoint, addrType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	addrPath := fldPath.Child("addresses")
	switch {
	case len(ep.Addresses) == 0:
		errs = append(errs, field.Required(addrPath, "must contain at least 1 address"))
	case len(ep.Addresses) > maxSliceAddresses:
		errs = append(errs, field.TooMany(addrPath, len(ep.Addresses), maxSliceAddresses))
	}
	for i, a := range ep.Addresses {
		p := addrPath.Index(i)
		switch addrType {
		case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
			if ipErrs := legacyIP(a, p); len(ipErrs) != 0 {
				errs = append(errs, ipErrs...)
				continue
			}
			isV4 := net.ParseIP(a).To4() != nil
			if addrType == discoveryv1.AddressTypeIPv4 && !isV4 {
				errs = append(errs, field.Invalid(p, a, "must be an IPv4 address"))
			}
			if addrType == discoveryv1.AddressTypeIPv6 && isV4 {
				errs = append(errs, field.Invalid(p, a, "must be an IPv6 address"))
			}
			errs = append(errs, nonSpecialIP(a, p)...)
		case discoveryv1.AddressTypeFQDN:
			errs = append(errs, utilvalidation.IsFullyQualifiedDomainName(p, a)...)
		}
	}
	if ep.NodeName != nil {
		errs = append(errs, messages(fldPath.Child("nodeName"), *ep.NodeName, apivalidation.NameIsDNSSubdomain(*ep.NodeName, false))...)
	}
	if ep.Hostname != nil {
		errs = append(errs, dns1123Label(*ep.Hostname, fldPath.Child("hostname"))...)
	}
	errs = append(errs, validateLabels(ep.DeprecatedTopology, fldPath.Child("deprecatedTopology"))...)
	return errs
}

func validateSlicePorts(ports []discoveryv1.EndpointPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ports) > maxSlicePorts {
		errs = append(errs, field.TooMany(fldPath, len(ports), maxSlicePorts))
	}
	names := sets.New[string]()
	for i, p := range ports {
		idxPath := fldPath.Index(i)
		name := deref(p.Name, "")
		if name != "" {
			errs = append(errs, dns1123Label(name, idxPath.Child("name"))...)
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), name))
		}
		names.Insert(name)
		if p.Protocol == nil {
			errs = append(errs, field.Required(idxPath.Child("protocol"), ""))
		} else {
			errs = append(errs, enum(*p.Protocol, idxPath.Child("protocol"), corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP)...)
		}
		if p.Port != nil {
			errs = append(errs, portNum(*p.Port, idxPath.Child("port"))...)
		}
		if p.AppProtocol != nil {
			errs = append(errs, qualifiedName(*p.AppProtocol, idxPath.Child("appProtocol"))...)
		}
	}
	return errs
}
