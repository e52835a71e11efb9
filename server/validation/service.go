package validation

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// kubeletPort may not be exposed through a cloud load balancer: clouds
	// that open firewalls per service would open it to the world.
	kubeletPort                       = 10250
	maxClientIPServiceAffinitySeconds = 86400
)

// isHeadless accepts both the singular and the plural field because the
// server fills clusterIPs from clusterIP only in its create strategy.
func isHeadless(spec *corev1.ServiceSpec) bool {
	return spec.ClusterIP == corev1.ClusterIPNone || (len(spec.ClusterIPs) == 1 && spec.ClusterIPs[0] == corev1.ClusterIPNone)
}

// externallyAccessible mirrors upstream: only these services have an
// external traffic policy.
func externallyAccessible(spec *corev1.ServiceSpec) bool {
	return spec.Type == corev1.ServiceTypeLoadBalancer || spec.Type == corev1.ServiceTypeNodePort ||
		(spec.Type == corev1.ServiceTypeClusterIP && len(spec.ExternalIPs) > 0)
}

func validateService(svc *corev1.Service) field.ErrorList {
	errs := validateMeta(&svc.ObjectMeta, true, apivalidation.NameIsDNS1035Label)
	spec := &svc.Spec
	if len(spec.Ports) == 0 && !isHeadless(spec) && spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	errs = append(errs, validateServiceType(spec)...)
	errs = append(errs, validateServicePorts(spec)...)
	errs = append(errs, validateLabels(spec.Selector, specPath.Child("selector"))...)
	errs = append(errs, validateSessionAffinity(spec)...)
	errs = append(errs, validateClusterIPs(spec)...)
	for i, ip := range spec.ExternalIPs {
		p := specPath.Child("externalIPs").Index(i)
		if ipErrs := legacyIP(ip, p); len(ipErrs) != 0 {
			errs = append(errs, ipErrs...)
		} else {
			errs = append(errs, nonSpecialIP(ip, p)...)
		}
	}
	errs = append(errs, validateLoadBalancerFields(spec)...)
	errs = append(errs, validateTrafficPolicies(spec)...)
	return errs
}

func validateServiceType(spec *corev1.ServiceSpec) field.ErrorList {
	errs := enum(spec.Type, specPath.Child("type"), corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName,
		corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort)
	switch spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		for i, p := range spec.Ports {
			if spec.Type == corev1.ServiceTypeLoadBalancer && p.Port == kubeletPort {
				errs = append(errs, field.Invalid(specPath.Child("ports").Index(i), p.Port,
					fmt.Sprintf("may not expose port %v externally since it is used by kubelet", kubeletPort)))
			}
		}
		if isHeadless(spec) {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), corev1.ClusterIPNone,
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		const msg = "may not be set for ExternalName services"
		if len(spec.ClusterIPs) > 0 || spec.ClusterIP != "" {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIPs"), msg))
		}
		if len(spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilies"), msg))
		}
		if spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilyPolicy"), msg))
		}
		// A trailing dot marks the CNAME as fully qualified.
		if cname := strings.TrimSuffix(spec.ExternalName, "."); cname != "" {
			errs = append(errs, dns1123Subdomain(cname, specPath.Child("externalName"))...)
		} else {
			errs = append(errs, field.Required(specPath.Child("externalName"), ""))
		}
	case corev1.ServiceTypeClusterIP:
		for i, p := range spec.Ports {
			if p.NodePort != 0 {
				errs = append(errs, field.Forbidden(specPath.Child("ports").Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	}
	return errs
}

func validateServicePorts(spec *corev1.ServiceSpec) field.ErrorList {
	var errs field.ErrorList
	portsPath := specPath.Child("ports")
	names := sets.New[string]()
	nodePorts := sets.New[string]()
	ports := sets.New[string]()
	for i, sp := range spec.Ports {
		p := portsPath.Index(i)
		// With several ports, endpoints and env vars can only tell them apart by name.
		if len(spec.Ports) > 1 && sp.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else if sp.Name != "" {
			errs = append(errs, dns1123Label(sp.Name, p.Child("name"))...)
			if names.Has(sp.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), sp.Name))
			}
			names.Insert(sp.Name)
		}
		errs = append(errs, portNum(sp.Port, p.Child("port"))...)
		errs = append(errs, enum(sp.Protocol, p.Child("protocol"), corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP)...)
		errs = append(errs, portNumOrName(sp.TargetPort, p.Child("targetPort"))...)
		if sp.AppProtocol != nil {
			errs = append(errs, qualifiedName(*sp.AppProtocol, p.Child("appProtocol"))...)
		}
		if sp.NodePort != 0 {
			errs = append(errs, portNum(sp.NodePort, p.Child("nodePort"))...)
			key := fmt.Sprintf("%s/%d", sp.Protocol, sp.NodePort)
			if nodePorts.Has(key) {
				errs = append(errs, field.Duplicate(p.Child("nodePort"), sp.NodePort))
			}
			nodePorts.Insert(key)
		}
		key := fmt.Sprintf("%s/%d", sp.Protocol, sp.Port)
		if ports.Has(key) {
			errs = append(errs, field.Duplicate(p, corev1.ServicePort{Protocol: sp.Protocol, Port: sp.Port}))
		}
		ports.Insert(key)
	}
	return errs
}

func validateSessionAffinity(spec *corev1.ServiceSpec) field.ErrorList {
	errs := enum(spec.SessionAffinity, specPath.Child("sessionAffinity"), corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone)
	cfgPath := specPath.Child("sessionAffinityConfig")
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Forbidden(cfgPath, fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone)))
		}
	case corev1.ServiceAffinityClientIP:
		msg := fmt.Sprintf("when session affinity type is %s", corev1.ServiceAffinityClientIP)
		cfg := spec.SessionAffinityConfig
		switch {
		case cfg == nil:
			errs = append(errs, field.Required(cfgPath, msg))
		case cfg.ClientIP == nil:
			errs = append(errs, field.Required(cfgPath.Child("clientIP"), msg))
		case cfg.ClientIP.TimeoutSeconds == nil:
			errs = append(errs, field.Required(cfgPath.Child("clientIP", "timeoutSeconds"), msg))
		case *cfg.ClientIP.TimeoutSeconds <= 0 || *cfg.ClientIP.TimeoutSeconds > maxClientIPServiceAffinitySeconds:
			errs = append(errs, field.Invalid(cfgPath.Child("clientIP", "timeoutSeconds"), *cfg.ClientIP.TimeoutSeconds,
				fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPServiceAffinitySeconds)))
		}
	}
	return errs
}

// validateClusterIPs checks the syntax of whatever the client or the
// allocator put into the IP fields; allocation itself happens elsewhere.
func validateClusterIPs(spec *corev1.ServiceSpec) field.ErrorList {
	var errs field.ErrorList
	if ip := spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone && net.ParseIP(ip) == nil {
		errs = append(errs, field.Invalid(specPath.Child("clusterIP"), ip, "must be empty, 'None', or a valid IP address"))
	}
	ipsPath := specPath.Child("clusterIPs")
	if spec.ClusterIP != "" && len(spec.ClusterIPs) > 0 && spec.ClusterIPs[0] != spec.ClusterIP {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
	}
	for i, ip := range spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		errs = append(errs, legacyIP(ip, ipsPath.Index(i))...)
	}
	if spec.IPFamilyPolicy != nil {
		errs = append(errs, enum(*spec.IPFamilyPolicy, specPath.Child("ipFamilyPolicy"),
			corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack, corev1.IPFamilyPolicySingleStack)...)
	}
	families := sets.New[corev1.IPFamily]()
	for i, f := range spec.IPFamilies {
		p := specPath.Child("ipFamilies").Index(i)
		errs = append(errs, enum(f, p, corev1.IPv4Protocol, corev1.IPv6Protocol)...)
		if families.Has(f) {
			errs = append(errs, field.Duplicate(p, f))
		}
		families.Insert(f)
	}
	if len(spec.IPFamilies) > 2 {
		errs = append(errs, field.Invalid(specPath.Child("ipFamilies"), spec.IPFamilies, "may specify no more than one IP for each IP family"))
	}
	return errs
}

func validateLoadBalancerFields(spec *corev1.ServiceSpec) field.ErrorList {
	var errs field.ErrorList
	isLB := spec.Type == corev1.ServiceTypeLoadBalancer
	const onlyLB = "may only be used when `type` is 'LoadBalancer'"
	if len(spec.LoadBalancerSourceRanges) > 0 {
		rangesPath := specPath.Child("LoadBalancerSourceRanges")
		if !isLB {
			errs = append(errs, field.Forbidden(rangesPath, onlyLB))
		}
		for i, r := range spec.LoadBalancerSourceRanges {
			// Padding is tolerated: the values once came from an annotation.
			errs = append(errs, legacyCIDR(strings.TrimSpace(r), rangesPath.Index(i))...)
		}
	}
	if spec.AllocateLoadBalancerNodePorts != nil && !isLB {
		errs = append(errs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), onlyLB))
	}
	if isLB && spec.AllocateLoadBalancerNodePorts == nil {
		errs = append(errs, field.Required(specPath.Child("allocateLoadBalancerNodePorts"), ""))
	}
	if spec.LoadBalancerClass != nil {
		if !isLB {
			errs = append(errs, field.Forbidden(specPath.Child("loadBalancerClass"), onlyLB))
		}
		errs = append(errs, qualifiedName(*spec.LoadBalancerClass, specPath.Child("loadBalancerClass"))...)
	}
	return errs
}

func validateTrafficPolicies(spec *corev1.ServiceSpec) field.ErrorList {
	var errs field.ErrorList
	etpPath := specPath.Child("externalTrafficPolicy")
	if !externallyAccessible(spec) {
		if spec.ExternalTrafficPolicy != "" {
			errs = append(errs, field.Invalid(etpPath, spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		}
	} else {
		errs = append(errs, enum(spec.ExternalTrafficPolicy, etpPath, corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal)...)
	}
	hcPath := specPath.Child("healthCheckNodePort")
	needsHealthCheck := spec.Type == corev1.ServiceTypeLoadBalancer && spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	switch {
	case !needsHealthCheck && spec.HealthCheckNodePort != 0:
		errs = append(errs, field.Invalid(hcPath, spec.HealthCheckNodePort, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
	case needsHealthCheck && spec.HealthCheckNodePort == 0:
		errs = append(errs, field.Required(hcPath, ""))
	case needsHealthCheck:
		errs = append(errs, portNum(spec.HealthCheckNodePort, hcPath)...)
	}
	itpPath := specPath.Child("internalTrafficPolicy")
	if spec.InternalTrafficPolicy == nil {
		if spec.Type == corev1.ServiceTypeClusterIP || spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Required(itpPath, ""))
		}
	} else {
		errs = append(errs, enum(*spec.InternalTrafficPolicy, itpPath, corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal)...)
	}
	if td := spec.TrafficDistribution; td != nil {
		errs = append(errs, enum(*td, specPath.Child("trafficDistribution"),
			corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode)...)
	}
	return errs
}

// validateServiceUpdate: a service's virtual IP is baked into clients and
// proxy rules, so once assigned it cannot change except by moving the
// service to or from ExternalName, which has no IP.
func validateServiceUpdate(svc, old *corev1.Service) field.ErrorList {
	errs := validateMetaUpdate(&svc.ObjectMeta, &old.ObjectMeta)
	if svc.Spec.Type != corev1.ServiceTypeExternalName && old.Spec.Type != corev1.ServiceTypeExternalName {
		if old.Spec.ClusterIP != "" {
			errs = append(errs, immutable(svc.Spec.ClusterIP, old.Spec.ClusterIP, specPath.Child("clusterIP"))...)
		}
		if len(old.Spec.ClusterIPs) > 0 && len(svc.Spec.ClusterIPs) > 0 && old.Spec.ClusterIPs[0] != svc.Spec.ClusterIPs[0] {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), svc.Spec.ClusterIPs[0], "may not change once set"))
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && old.Spec.Type == corev1.ServiceTypeLoadBalancer {
		errs = append(errs, immutable(svc.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass, specPath.Child("loadBalancerClass"))...)
	}
	return append(errs, validateService(svc)...)
}

// nonSpecialIP rejects addresses that cannot name a remote endpoint.
func nonSpecialIP(value string, fldPath *field.Path) field.ErrorList {
	ip := net.ParseIP(value)
	if ip == nil {
		return nil
	}
	var errs field.ErrorList
	switch {
	case ip.IsUnspecified():
		errs = append(errs, field.Invalid(fldPath, value, fmt.Sprintf("may not be unspecified (%v)", value)))
	case ip.IsLoopback():
		errs = append(errs, field.Invalid(fldPath, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	case ip.IsLinkLocalUnicast():
		errs = append(errs, field.Invalid(fldPath, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	case ip.IsLinkLocalMulticast():
		errs = append(errs, field.Invalid(fldPath, value, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}
