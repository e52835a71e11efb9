package validation

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validateNetworkPolicy(np *networkingv1.NetworkPolicy) field.ErrorList {
	errs := validateMeta(&np.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	spec := &np.Spec
	errs = append(errs, validateLabelSelector(&spec.PodSelector, specPath.Child("podSelector"))...)
	for i, rule := range spec.Ingress {
		p := specPath.Child("ingress").Index(i)
		errs = append(errs, validatePolicyPorts(rule.Ports, p.Child("ports"))...)
		for j := range rule.From {
			errs = append(errs, validatePolicyPeer(&rule.From[j], p.Child("from").Index(j))...)
		}
	}
	for i, rule := range spec.Egress {
		p := specPath.Child("egress").Index(i)
		errs = append(errs, validatePolicyPorts(rule.Ports, p.Child("ports"))...)
		for j := range rule.To {
			errs = append(errs, validatePolicyPeer(&rule.To[j], p.Child("to").Index(j))...)
		}
	}
	typesPath := specPath.Child("policyTypes")
	if len(spec.PolicyTypes) > 2 {
		return append(errs, field.Invalid(typesPath, spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range spec.PolicyTypes {
		errs = append(errs, enum(t, typesPath.Index(i), networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)...)
	}
	return errs
}

func validatePolicyPorts(ports []networkingv1.NetworkPolicyPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		p := fldPath.Index(i)
		if port.Protocol != nil {
			errs = append(errs, enum(*port.Protocol, p.Child("protocol"), corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)...)
		}
		switch {
		case port.Port == nil:
			if port.EndPort != nil {
				errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is not specified"))
			}
		case port.Port.Type == intstr.Int:
			errs = append(errs, portNum(port.Port.IntVal, p.Child("port"))...)
			if port.EndPort != nil {
				if *port.EndPort < port.Port.IntVal {
					errs = append(errs, field.Invalid(p.Child("endPort"), port.Port.IntVal, "must be greater than or equal to `port`"))
				}
				errs = append(errs, portNum(*port.EndPort, p.Child("endPort"))...)
			}
		default:
			if port.EndPort != nil {
				errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is non-numeric"))
			}
			errs = append(errs, messages(p.Child("port"), port.Port.StrVal, utilvalidation.IsValidPortName(port.Port.StrVal))...)
		}
	}
	return errs
}

func validatePolicyPeer(peer *networkingv1.NetworkPolicyPeer, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	peers := 0
	if peer.PodSelector != nil {
		peers++
		errs = append(errs, validateLabelSelector(peer.PodSelector, fldPath.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		peers++
		errs = append(errs, validateLabelSelector(peer.NamespaceSelector, fldPath.Child("namespaceSelector"))...)
	}
	if peer.IPBlock != nil {
		peers++
		errs = append(errs, validateIPBlock(peer.IPBlock, fldPath.Child("ipBlock"))...)
	}
	if peers == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a peer"))
	} else if peers > 1 && peer.IPBlock != nil {
		errs = append(errs, field.Forbidden(fldPath, "may not specify both ipBlock and another peer"))
	}
	return errs
}

// validateIPBlock requires every exception to carve a hole strictly inside
// the block; anything else is a mistake that would match nothing.
func validateIPBlock(b *networkingv1.IPBlock, fldPath *field.Path) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(fldPath.Child("cidr"), "")}
	}
	errs := legacyCIDR(b.CIDR, fldPath.Child("cidr"))
	_, block, err := net.ParseCIDR(b.CIDR)
	if err != nil {
		return errs
	}
	for i, ex := range b.Except {
		p := fldPath.Child("except").Index(i)
		errs = append(errs, legacyCIDR(ex, p)...)
		_, exNet, err := net.ParseCIDR(ex)
		if err != nil {
			continue
		}
		blockLen, _ := block.Mask.Size()
		exLen, _ := exNet.Mask.Size()
		if !block.Contains(exNet.IP) || blockLen >= exLen {
			errs = append(errs, field.Invalid(p, ex, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}

func validateIngress(ing *networkingv1.Ingress) field.ErrorList {
	errs := validateMeta(&ing.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	spec := &ing.Spec
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(specPath, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		errs = append(errs, validateIngressBackend(spec.DefaultBackend, specPath.Child("defaultBackend"))...)
	}
	for i, rule := range spec.Rules {
		p := specPath.Child("rules").Index(i)
		if rule.Host != "" {
			errs = append(errs, validateIngressHost(rule.Host, p.Child("host"))...)
		}
		if rule.HTTP == nil {
			continue
		}
		if len(rule.HTTP.Paths) == 0 {
			errs = append(errs, field.Required(p.Child("http", "paths"), ""))
		}
		for j := range rule.HTTP.Paths {
			errs = append(errs, validateIngressPath(&rule.HTTP.Paths[j], p.Child("http", "paths").Index(j))...)
		}
	}
	for i, tls := range spec.TLS {
		for j, h := range tls.Hosts {
			errs = append(errs, validateIngressHostName(h, specPath.Child("tls").Index(i).Child("hosts").Index(j))...)
		}
	}
	if spec.IngressClassName != nil {
		errs = append(errs, dns1123Subdomain(*spec.IngressClassName, specPath.Child("ingressClassName"))...)
	}
	return errs
}

func validateIngressHost(host string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if net.ParseIP(host) != nil {
		errs = append(errs, field.Invalid(fldPath, host, "must be a DNS name, not an IP address"))
	}
	return append(errs, validateIngressHostName(host, fldPath)...)
}

func validateIngressHostName(host string, fldPath *field.Path) field.ErrorList {
	if strings.Contains(host, "*") {
		return messages(fldPath, host, utilvalidation.IsWildcardDNS1123Subdomain(host))
	}
	return dns1123Subdomain(host, fldPath)
}

func validateIngressPath(p *networkingv1.HTTPIngressPath, fldPath *field.Path) field.ErrorList {
	if p.PathType == nil {
		return field.ErrorList{field.Required(fldPath.Child("pathType"), "pathType must be specified")}
	}
	var errs field.ErrorList
	pathPath := fldPath.Child("path")
	switch *p.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
		// Sequences that proxies normalise differently are refused, so that
		// the rule means the same thing to every controller.
		for _, seq := range []string{"//", "/./", "/../", "%2f", "%2F"} {
			if strings.Contains(p.Path, seq) {
				errs = append(errs, field.Invalid(pathPath, p.Path, fmt.Sprintf("must not contain '%s'", seq)))
			}
		}
		for _, suffix := range []string{"/..", "/."} {
			if strings.HasSuffix(p.Path, suffix) {
				errs = append(errs, field.Invalid(pathPath, p.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, notSupported(fldPath.Child("pathType"), *p.PathType,
			networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific, networkingv1.PathTypePrefix)...)
	}
	return append(errs, validateIngressBackend(&p.Backend, fldPath.Child("backend"))...)
}

func validateIngressBackend(b *networkingv1.IngressBackend, fldPath *field.Path) field.ErrorList {
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(fldPath, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		var errs field.ErrorList
		if b.Resource.Kind == "" {
			errs = append(errs, field.Required(fldPath.Child("resource", "kind"), ""))
		}
		if b.Resource.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("resource", "name"), ""))
		}
		return errs
	case b.Service == nil:
		return field.ErrorList{field.Invalid(fldPath, "", "resource or service backend is required")}
	}
	var errs field.ErrorList
	svcPath := fldPath.Child("service")
	if b.Service.Name == "" {
		errs = append(errs, field.Required(svcPath.Child("name"), ""))
	} else {
		errs = append(errs, messages(svcPath.Child("name"), b.Service.Name, apivalidation.NameIsDNS1035Label(b.Service.Name, false))...)
	}
	port := b.Service.Port
	switch {
	case port.Name != "" && port.Number != 0:
		errs = append(errs, field.Invalid(fldPath, "", "cannot set both port name & port number"))
	case port.Name != "":
		errs = append(errs, messages(svcPath.Child("port", "name"), port.Name, utilvalidation.IsValidPortName(port.Name))...)
	case port.Number != 0:
		errs = append(errs, portNum(port.Number, svcPath.Child("port", "number"))...)
	default:
		errs = append(errs, field.Required(fldPath, "port name or number is required"))
	}
	return errs
}

func validateIngressClass(ic *networkingv1.IngressClass) field.ErrorList {
	errs := validateMeta(&ic.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	ctrlPath := specPath.Child("controller")
	switch {
	case ic.Spec.Controller == "":
		errs = append(errs, field.Required(ctrlPath, ""))
	case len(ic.Spec.Controller) > 250:
		errs = append(errs, field.TooLong(ctrlPath, ic.Spec.Controller, 250))
	default:
		errs = append(errs, utilvalidation.IsDomainPrefixedPath(ctrlPath, ic.Spec.Controller)...)
	}
	if p := ic.Spec.Parameters; p != nil {
		pp := specPath.Child("parameters")
		if p.Kind == "" {
			errs = append(errs, field.Required(pp.Child("kind"), ""))
		}
		if p.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		}
		if p.Scope != nil {
			errs = append(errs, enum(*p.Scope, pp.Child("scope"), networkingv1.IngressClassParametersReferenceScopeCluster,
				networkingv1.IngressClassParametersReferenceScopeNamespace)...)
		}
	}
	return errs
}
