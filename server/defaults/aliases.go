package defaults

import (
	corev1 "k8s.io/api/core/v1"
)

// Some v1 fields are aliases of others (a deprecated singular beside its
// replacement). Upstream reconciles them while converting to and from its
// internal types, so stored objects always show both in agreement; skiff
// stores v1 directly, so it reconciles them here instead.

// syncServiceAccountAlias: serviceAccountName wins when both are set.
func syncServiceAccountAlias(spec *corev1.PodSpec) {
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
}

// syncPodIPs: the singular field is authoritative when the two disagree,
// for the sake of clients that only know the singular one.
func syncPodIPs(st *corev1.PodStatus) {
	if st.PodIP != "" && (len(st.PodIPs) == 0 || st.PodIPs[0].IP != st.PodIP) {
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
	if len(st.PodIPs) > 0 {
		st.PodIP = st.PodIPs[0].IP
	}
	if st.HostIP != "" && (len(st.HostIPs) == 0 || st.HostIPs[0].IP != st.HostIP) {
		st.HostIPs = []corev1.HostIP{{IP: st.HostIP}}
	}
	if len(st.HostIPs) > 0 {
		st.HostIP = st.HostIPs[0].IP
	}
}

// syncPodCIDRs: the list wins; the singular field mirrors its first entry.
func syncPodCIDRs(spec *corev1.NodeSpec) {
	if len(spec.PodCIDRs) == 0 && spec.PodCIDR != "" {
		spec.PodCIDRs = []string{spec.PodCIDR}
	}
	if len(spec.PodCIDRs) > 0 {
		spec.PodCIDR = spec.PodCIDRs[0]
	}
}
