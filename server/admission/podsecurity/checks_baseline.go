package podsecurity

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// containers is `container "a"` or `containers "a", "b"`.
func containers(names []string) string {
	return fmt.Sprintf("%s %s", pluralize("container", "containers", len(names)), joinQuote(names))
}

func allowedAppArmorType(t corev1.AppArmorProfileType) bool {
	return t == corev1.AppArmorProfileTypeRuntimeDefault || t == corev1.AppArmorProfileTypeLocalhost
}

func appArmorProfile(meta *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var setters []string
	values := sets.New[string]()
	if sc := spec.SecurityContext; sc != nil && sc.AppArmorProfile != nil && !allowedAppArmorType(sc.AppArmorProfile.Type) {
		setters = append(setters, "pod")
		values.Insert(string(sc.AppArmorProfile.Type))
	}
	var bad []string
	visitContainers(spec, func(c *corev1.Container) {
		if sc := c.SecurityContext; sc != nil && sc.AppArmorProfile != nil && !allowedAppArmorType(sc.AppArmorProfile.Type) {
			bad = append(bad, c.Name)
			values.Insert(string(sc.AppArmorProfile.Type))
		}
	})
	if len(bad) > 0 {
		setters = append(setters, containers(bad))
	}
	var annotations []string
	for k, v := range meta.Annotations {
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) &&
			v != "" && v != corev1.DeprecatedAppArmorBetaProfileRuntimeDefault && !strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix) {
			annotations = append(annotations, fmt.Sprintf("%s=%q", k, v))
		}
	}
	list := sets.List(values)
	if len(annotations) > 0 {
		sort.Strings(annotations)
		list = append(list, annotations...)
		setters = append(setters, pluralize("annotation", "annotations", len(annotations)))
	}
	if len(setters) == 0 {
		return allowed
	}
	return Result{
		Reason: pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(list)),
		Detail: fmt.Sprintf("%s must not set AppArmor profile type to %s", strings.Join(setters, " and "), joinQuote(list)),
	}
}

var defaultCapabilities = sets.New("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")

func capabilitiesBaseline(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var bad []string
	caps := sets.New[string]()
	visitContainers(spec, func(c *corev1.Container) {
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
			return
		}
		ok := true
		for _, cap := range c.SecurityContext.Capabilities.Add {
			if !defaultCapabilities.Has(string(cap)) {
				ok = false
				caps.Insert(string(cap))
			}
		}
		if !ok {
			bad = append(bad, c.Name)
		}
	})
	if len(bad) == 0 {
		return allowed
	}
	return Result{Reason: "non-default capabilities",
		Detail: fmt.Sprintf("%s must not include %s in securityContext.capabilities.add", containers(bad), joinQuote(sets.List(caps)))}
}

func hostNamespaces(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var ns []string
	if spec.HostNetwork {
		ns = append(ns, "hostNetwork=true")
	}
	if spec.HostPID {
		ns = append(ns, "hostPID=true")
	}
	if spec.HostIPC {
		ns = append(ns, "hostIPC=true")
	}
	if len(ns) == 0 {
		return allowed
	}
	return Result{Reason: "host namespaces", Detail: strings.Join(ns, ", ")}
}

func hostPathVolumes(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var vols []string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			vols = append(vols, v.Name)
		}
	}
	if len(vols) == 0 {
		return allowed
	}
	return Result{Reason: "hostPath volumes", Detail: fmt.Sprintf("%s %s", pluralize("volume", "volumes", len(vols)), joinQuote(vols))}
}

func hostPorts(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var bad []string
	ports := sets.New[string]()
	visitContainers(spec, func(c *corev1.Container) {
		ok := true
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				ok = false
				ports.Insert(strconv.Itoa(int(p.HostPort)))
			}
		}
		if !ok {
			bad = append(bad, c.Name)
		}
	})
	if len(bad) == 0 {
		return allowed
	}
	// Sorted as strings, as upstream does ("10", "9").
	return Result{Reason: "hostPort", Detail: fmt.Sprintf("%s %s %s %s", containers(bad), pluralize("uses", "use", len(bad)),
		pluralize("hostPort", "hostPorts", ports.Len()), strings.Join(sets.List(ports), ", "))}
}

func hostProbesAndLifecycle(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	bad := sets.New[string]()
	hosts := sets.New[string]()
	visitContainers(spec, func(c *corev1.Container) {
		var found []string
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if p != nil {
				found = append(found, handlerHosts(p.HTTPGet, p.TCPSocket)...)
			}
		}
		if c.Lifecycle != nil {
			for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
				if h != nil {
					found = append(found, handlerHosts(h.HTTPGet, h.TCPSocket)...)
				}
			}
		}
		if len(found) > 0 {
			bad.Insert(c.Name)
			hosts.Insert(found...)
		}
	})
	if bad.Len() == 0 {
		return allowed
	}
	return Result{Reason: "probe or lifecycle host", Detail: fmt.Sprintf("%s %s %s %s", containers(sets.List(bad)),
		pluralize("uses", "use", bad.Len()),
		pluralize("probe or lifecycle host", "probe or lifecycle hosts", hosts.Len()), joinQuote(sets.List(hosts)))}
}

func handlerHosts(get *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction) []string {
	var hosts []string
	if get != nil && get.Host != "" {
		hosts = append(hosts, get.Host)
	}
	if tcp != nil && tcp.Host != "" {
		hosts = append(hosts, tcp.Host)
	}
	return hosts
}

func privileged(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var bad []string
	visitContainers(spec, func(c *corev1.Container) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			bad = append(bad, c.Name)
		}
	})
	if len(bad) == 0 {
		return allowed
	}
	return Result{Reason: "privileged", Detail: containers(bad) + " must not set securityContext.privileged=true"}
}

func procMount(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var bad []string
	types := sets.New[string]()
	visitContainers(spec, func(c *corev1.Container) {
		if c.SecurityContext != nil && c.SecurityContext.ProcMount != nil && *c.SecurityContext.ProcMount != corev1.DefaultProcMount {
			bad = append(bad, c.Name)
			types.Insert(string(*c.SecurityContext.ProcMount))
		}
	})
	if len(bad) == 0 {
		return allowed
	}
	return Result{Reason: "procMount", Detail: fmt.Sprintf("%s must not set securityContext.procMount to %s", containers(bad), joinQuote(sets.List(types)))}
}

var (
	selinuxTypes1_0  = sets.New("", "container_t", "container_init_t", "container_kvm_t")
	selinuxTypes1_31 = sets.New("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
)

func seLinuxOptions(types sets.Set[string]) checkFn {
	return func(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
		badTypes := sets.New[string]()
		var setUser, setRole bool
		valid := func(o *corev1.SELinuxOptions) bool {
			ok := true
			if !types.Has(o.Type) {
				ok = false
				badTypes.Insert(o.Type)
			}
			if o.User != "" {
				ok, setUser = false, true
			}
			if o.Role != "" {
				ok, setRole = false, true
			}
			return ok
		}
		var setters []string
		if sc := spec.SecurityContext; sc != nil && sc.SELinuxOptions != nil && !valid(sc.SELinuxOptions) {
			setters = append(setters, "pod")
		}
		var bad []string
		visitContainers(spec, func(c *corev1.Container) {
			if sc := c.SecurityContext; sc != nil && sc.SELinuxOptions != nil && !valid(sc.SELinuxOptions) {
				bad = append(bad, c.Name)
			}
		})
		if len(bad) > 0 {
			setters = append(setters, containers(bad))
		}
		if len(setters) == 0 {
			return allowed
		}
		var what []string
		if badTypes.Len() > 0 {
			what = append(what, fmt.Sprintf("%s %s", pluralize("type", "types", badTypes.Len()), joinQuote(sets.List(badTypes))))
		}
		if setUser {
			what = append(what, "user may not be set")
		}
		if setRole {
			what = append(what, "role may not be set")
		}
		return Result{Reason: "seLinuxOptions", Detail: fmt.Sprintf("%s set forbidden securityContext.seLinuxOptions: %s",
			strings.Join(setters, " and "), strings.Join(what, "; "))}
	}
}

const (
	seccompPodAnnotation             = "seccomp.security.alpha.kubernetes.io/pod"
	seccompContainerAnnotationPrefix = "container.seccomp.security.alpha.kubernetes.io/"
)

func validSeccompType(t corev1.SeccompProfileType) bool {
	return t == corev1.SeccompProfileTypeLocalhost || t == corev1.SeccompProfileTypeRuntimeDefault
}

func validSeccompAnnotation(v string) bool {
	return v == corev1.SeccompProfileRuntimeDefault || v == corev1.DeprecatedSeccompProfileDockerDefault ||
		strings.HasPrefix(v, corev1.SeccompLocalhostProfileNamePrefix)
}

// seccompBaselineAnnotations is the check before v1.19, when seccomp was
// set by the alpha annotations.
func seccompBaselineAnnotations(meta *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	bad := sets.New[string]()
	if v, ok := meta.Annotations[seccompPodAnnotation]; ok && !validSeccompAnnotation(v) {
		bad.Insert(fmt.Sprintf("%s=%q", seccompPodAnnotation, v))
	}
	visitContainers(spec, func(c *corev1.Container) {
		key := seccompContainerAnnotationPrefix + c.Name
		if v, ok := meta.Annotations[key]; ok && !validSeccompAnnotation(v) {
			bad.Insert(fmt.Sprintf("%s=%q", key, v))
		}
	})
	if bad.Len() == 0 {
		return allowed
	}
	return Result{Reason: "seccompProfile", Detail: fmt.Sprintf("forbidden %s %s",
		pluralize("annotation", "annotations", bad.Len()), strings.Join(sets.List(bad), ", "))}
}

// seccompSetters finds the pod and containers that set a seccomp type other
// than RuntimeDefault or Localhost; podValid says the pod set a good one,
// and unset lists the containers that set none.
func seccompSetters(spec *corev1.PodSpec) (setters, values, unset []string, podValid bool) {
	vals := sets.New[string]()
	if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		if validSeccompType(sc.SeccompProfile.Type) {
			podValid = true
		} else {
			setters = append(setters, "pod")
			vals.Insert(string(sc.SeccompProfile.Type))
		}
	}
	var bad []string
	visitContainers(spec, func(c *corev1.Container) {
		switch sc := c.SecurityContext; {
		case sc == nil || sc.SeccompProfile == nil:
			unset = append(unset, c.Name)
		case !validSeccompType(sc.SeccompProfile.Type):
			bad = append(bad, c.Name)
			vals.Insert(string(sc.SeccompProfile.Type))
		}
	})
	if len(bad) > 0 {
		setters = append(setters, containers(bad))
	}
	return setters, sets.List(vals), unset, podValid
}

func seccompBaseline(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	setters, values, _, _ := seccompSetters(spec)
	if len(setters) == 0 {
		return allowed
	}
	return Result{Reason: "seccompProfile", Detail: fmt.Sprintf("%s must not set securityContext.seccompProfile.type to %s",
		strings.Join(setters, " and "), joinQuote(values))}
}

var (
	sysctls1_0 = sets.New("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start")
	sysctls1_27 = sysctls1_0.Union(sets.New("net.ipv4.ip_local_reserved_ports"))
	sysctls1_29 = sysctls1_27.Union(sets.New("net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
		"net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"))
	sysctls1_32 = sysctls1_29.Union(sets.New("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"))
	sysctls1_37 = sysctls1_32.Union(sets.New("net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"))
)

func sysctls(safe sets.Set[string]) checkFn {
	return func(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
		var bad []string
		if spec.SecurityContext != nil {
			for _, s := range spec.SecurityContext.Sysctls {
				if !safe.Has(s.Name) {
					bad = append(bad, s.Name)
				}
			}
		}
		if len(bad) == 0 {
			return allowed
		}
		return Result{Reason: "forbidden sysctls", Detail: strings.Join(bad, ", ")}
	}
}

func windowsHostProcess(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	hostProcess := func(sc *corev1.WindowsSecurityContextOptions) bool {
		return sc != nil && sc.HostProcess != nil && *sc.HostProcess
	}
	var setters []string
	if spec.SecurityContext != nil && hostProcess(spec.SecurityContext.WindowsOptions) {
		setters = append(setters, "pod")
	}
	var bad []string
	visitContainers(spec, func(c *corev1.Container) {
		if c.SecurityContext != nil && hostProcess(c.SecurityContext.WindowsOptions) {
			bad = append(bad, c.Name)
		}
	})
	if len(bad) > 0 {
		setters = append(setters, containers(bad))
	}
	if len(setters) == 0 {
		return allowed
	}
	return Result{Reason: "hostProcess", Detail: strings.Join(setters, " and ") + " must not set securityContext.windowsOptions.hostProcess=true"}
}
