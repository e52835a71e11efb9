package qos

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// SysctlForbiddenReason is the pod status reason of a pod refused for its
// sysctls, as upstream.
const SysctlForbiddenReason = "SysctlForbidden"

// sysctlNamespace is the kernel namespace a sysctl belongs to.
type sysctlNamespace string

const (
	ipcNamespace sysctlNamespace = "IPC"
	netNamespace sysctlNamespace = "net"
)

// safeSysctls are upstream's safe sysctls (pkg/kubelet/sysctl): namespaced
// and without effect on other pods, so every pod may set them. The
// kernel-version gates upstream applies to the newer net.ipv4 ones are
// met by every kernel this runs on (5.x and later).
var safeSysctls = map[string]sysctlNamespace{
	"kernel.shm_rmid_forced":              ipcNamespace,
	"net.ipv4.ip_local_port_range":        netNamespace,
	"net.ipv4.tcp_syncookies":             netNamespace,
	"net.ipv4.ping_group_range":           netNamespace,
	"net.ipv4.ip_unprivileged_port_start": netNamespace,
	"net.ipv4.ip_local_reserved_ports":    netNamespace,
	"net.ipv4.tcp_keepalive_time":         netNamespace,
	"net.ipv4.tcp_fin_timeout":            netNamespace,
	"net.ipv4.tcp_keepalive_intvl":        netNamespace,
	"net.ipv4.tcp_keepalive_probes":       netNamespace,
	"net.ipv4.tcp_rmem":                   netNamespace,
	"net.ipv4.tcp_wmem":                   netNamespace,
	"net.ipv4.tcp_slow_start_after_idle":  netNamespace,
	"net.ipv4.tcp_notsent_lowat":          netNamespace,
}

// NormalizeSysctl turns the slash form ("net/ipv4/ip_local_port_range",
// "net/ipv4/conf/eno2.100/rp_filter") into the dotted one, swapping '.' and
// '/' as upstream, so interface names with dots survive.
func NormalizeSysctl(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}

// CheckSysctls is the kubelet's sysctl admission: every sysctl of the pod
// must be a safe one, and not one of a namespace the pod shares with the
// host (net.* with hostNetwork, IPC ones with hostIPC). It returns "" when
// the pod is admitted, else the rejection message (with reason
// SysctlForbiddenReason). No unsafe sysctls are allowed on this node.
func CheckSysctls(pod *corev1.Pod) string {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return ""
	}
	for _, s := range psc.Sysctls {
		name := NormalizeSysctl(s.Name)
		ns, ok := safeSysctls[name]
		switch {
		case !ok:
			return fmt.Sprintf("Pod was rejected: forbidden sysctl: %q not allowlisted", name)
		case ns == netNamespace && pod.Spec.HostNetwork, ns == ipcNamespace && pod.Spec.HostIPC:
			return fmt.Sprintf("Pod was rejected: forbidden sysctl: %q not allowed with host %s enabled", name, ns)
		}
	}
	return ""
}

// podSysctls is the pod's sysctls by normalized name (nil when none).
func podSysctls(pod *corev1.Pod) map[string]string {
	psc := pod.Spec.SecurityContext
	if psc == nil || len(psc.Sysctls) == 0 {
		return nil
	}
	out := make(map[string]string, len(psc.Sysctls))
	for _, s := range psc.Sysctls {
		out[NormalizeSysctl(s.Name)] = s.Value
	}
	return out
}
