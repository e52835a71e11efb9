package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DNS limits of the pod's resolv.conf, as the kubelet enforces them.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

func validatePod(pod *corev1.Pod) field.ErrorList {
	errs := validateMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validatePodSpec(&pod.Spec, true, specPath)...)
	// Ephemeral containers are added later through their own subresource.
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) != 0 {
		errs = append(errs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

func validatePodTemplate(pt *corev1.PodTemplate) field.ErrorList {
	errs := validateMeta(&pt.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, validatePodTemplateSpec(&pt.Template, field.NewPath("template"))...)
}

// validatePodTemplateSpec validates the template of a workload. Its labels and
// annotations are reported at template.labels, as upstream reports them.
func validatePodTemplateSpec(t *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	errs := validateLabels(t.Labels, fldPath.Child("labels"))
	errs = append(errs, validateAnnotations(t.Annotations, fldPath.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&t.Spec, false, fldPath.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

// validatePodSpec validates a pod's spec; isPod is false for templates, which
// are allowed a little more latitude.
func validatePodSpec(spec *corev1.PodSpec, isPod bool, fldPath *field.Path) field.ErrorList {
	volumes, errs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	pc := podContext{volumes: volumes, gracePeriod: spec.TerminationGracePeriodSeconds, isPod: isPod}
	errs = append(errs, validateContainers(spec.Containers, pc, fldPath.Child("containers"))...)
	errs = append(errs, validateInitContainers(spec.InitContainers, spec.Containers, pc, fldPath.Child("initContainers"))...)
	names := sets.New[string]()
	for _, c := range append(spec.Containers[:len(spec.Containers):len(spec.Containers)], spec.InitContainers...) {
		names.Insert(c.Name)
	}
	errs = append(errs, validateEphemeralContainers(spec.EphemeralContainers, names, pc, fldPath.Child("ephemeralContainers"))...)
	errs = append(errs, validateHostNetworkPorts(spec, fldPath)...)
	errs = append(errs, enum(spec.RestartPolicy, fldPath.Child("restartPolicy"),
		corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)...)
	errs = append(errs, enum(spec.DNSPolicy, fldPath.Child("dnsPolicy"),
		corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone)...)
	errs = append(errs, validateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	errs = append(errs, validatePodSecurityContext(spec, fldPath)...)
	errs = append(errs, validateAffinity(spec.Affinity, fldPath.Child("affinity"))...)
	errs = append(errs, validateDNSConfig(spec.DNSConfig, spec.DNSPolicy, fldPath.Child("dnsConfig"))...)
	errs = append(errs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	errs = append(errs, validateTopologySpread(spec.TopologySpreadConstraints, fldPath.Child("topologySpreadConstraints"))...)
	errs = append(errs, validatePodNames(spec, fldPath)...)
	return append(errs, validatePodMisc(spec, fldPath)...)
}

// validatePodNames checks the fields that hold names of other objects or DNS
// names of the pod itself.
func validatePodNames(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.ServiceAccountName != "" {
		errs = append(errs, messages(fldPath.Child("serviceAccountName"), spec.ServiceAccountName,
			apivalidation.NameIsDNSSubdomain(spec.ServiceAccountName, false))...)
	}
	if spec.NodeName != "" {
		errs = append(errs, messages(fldPath.Child("nodeName"), spec.NodeName, apivalidation.NameIsDNSSubdomain(spec.NodeName, false))...)
	}
	if spec.Hostname != "" {
		errs = append(errs, dns1123Label(spec.Hostname, fldPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, dns1123Label(spec.Subdomain, fldPath.Child("subdomain"))...)
	}
	if spec.PriorityClassName != "" {
		errs = append(errs, dns1123Subdomain(spec.PriorityClassName, fldPath.Child("priorityClassName"))...)
	}
	if spec.RuntimeClassName != nil {
		errs = append(errs, dns1123Subdomain(*spec.RuntimeClassName, fldPath.Child("runtimeClassName"))...)
	}
	for i, alias := range spec.HostAliases {
		aliasPath := fldPath.Child("hostAliases").Index(i)
		errs = append(errs, legacyIP(alias.IP, aliasPath.Child("ip"))...)
		for j, h := range alias.Hostnames {
			errs = append(errs, dns1123Subdomain(h, aliasPath.Child("hostnames").Index(j))...)
		}
	}
	for i, g := range spec.ReadinessGates {
		errs = append(errs, qualifiedName(string(g.ConditionType), fldPath.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	gates := sets.New[string]()
	for i, g := range spec.SchedulingGates {
		gatePath := fldPath.Child("schedulingGates").Index(i)
		errs = append(errs, qualifiedName(g.Name, gatePath)...)
		if gates.Has(g.Name) {
			errs = append(errs, field.Duplicate(gatePath, g.Name))
		}
		gates.Insert(g.Name)
	}
	return errs
}

func validatePodMisc(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, inInt32Range(*spec.ActiveDeadlineSeconds, 1, fldPath.Child("activeDeadlineSeconds"))...)
	}
	if spec.PreemptionPolicy != nil {
		errs = append(errs, enum(*spec.PreemptionPolicy, fldPath.Child("preemptionPolicy"), corev1.PreemptLowerPriority, corev1.PreemptNever)...)
	}
	for name, q := range spec.Overhead {
		p := fldPath.Child("overhead").Key(string(name))
		errs = append(errs, validateContainerResourceName(name, p)...)
		errs = append(errs, validateQuantity(name, q, p)...)
	}
	if spec.OS != nil {
		errs = append(errs, enum(spec.OS.Name, fldPath.Child("os", "name"), corev1.Linux, corev1.Windows)...)
	}
	if spec.Resources != nil {
		errs = append(errs, validatePodResources(spec.Resources, fldPath.Child("resources"))...)
	}
	claims := sets.New[string]()
	for i, c := range spec.ResourceClaims {
		p := fldPath.Child("resourceClaims").Index(i)
		errs = append(errs, dns1123Label(c.Name, p.Child("name"))...)
		if claims.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		claims.Insert(c.Name)
		if (c.ResourceClaimName == nil) == (c.ResourceClaimTemplateName == nil) {
			errs = append(errs, field.Invalid(p, c, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		}
	}
	return errs
}

// validatePodResources checks pod-level resources, which only cover what the
// pod's cgroup can bound: cpu, memory and huge pages.
func validatePodResources(res *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	errs := validateResourceRequirements(res, fldPath)
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"limits", res.Limits}, {"requests", res.Requests}} {
		for name := range list.rl {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory && !isHugePages(name) {
				errs = append(errs, notSupported(fldPath.Child(list.name).Key(string(name)), name,
					corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceHugePagesPrefix+"*")...)
			}
		}
	}
	return errs
}

// validateHostNetworkPorts: on the host network a container port is a host
// port, so the two numbers cannot differ.
func validateHostNetworkPorts(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	if !spec.HostNetwork {
		return nil
	}
	var errs field.ErrorList
	for _, list := range []struct {
		name       string
		containers []corev1.Container
	}{{"containers", spec.Containers}, {"initContainers", spec.InitContainers}} {
		for i, c := range list.containers {
			for j, p := range c.Ports {
				if p.HostPort != p.ContainerPort {
					portPath := fldPath.Child(list.name).Index(i).Child("ports").Index(j).Child("containerPort")
					errs = append(errs, field.Invalid(portPath, p.ContainerPort, "must match `hostPort` when `hostNetwork` is true"))
				}
			}
		}
	}
	return errs
}

func validateDNSConfig(cfg *corev1.PodDNSConfig, policy corev1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	if policy == corev1.DNSNone {
		if cfg == nil {
			return field.ErrorList{field.Required(fldPath, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone))}
		}
		if len(cfg.Nameservers) == 0 {
			return field.ErrorList{field.Required(fldPath.Child("nameservers"),
				fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone))}
		}
	}
	if cfg == nil {
		return nil
	}
	var errs field.ErrorList
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(fldPath.Child("nameservers"), cfg.Nameservers,
			fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, legacyIP(ns, fldPath.Child("nameservers").Index(i))...)
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(fldPath.Child("searches"), cfg.Searches,
			fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(fldPath.Child("searches"), cfg.Searches,
			fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, s := range cfg.Searches {
		// A trailing dot marks a fully qualified name and is fine.
		errs = append(errs, dns1123Subdomain(strings.TrimSuffix(s, "."), fldPath.Child("searches").Index(i))...)
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("options").Index(i), "Option.Name must not be empty"))
		}
	}
	return errs
}
