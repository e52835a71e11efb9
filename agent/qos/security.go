package qos

import (
	corev1 "k8s.io/api/core/v1"

	"skiff/runtime/containers"
)

// Security merges the pod's and the container's securityContext the way
// the kubelet does: container settings win over pod settings for
// runAsUser/runAsGroup; supplementalGroups come from the pod, followed by
// fsGroup (the kubelet adds it to every container's groups);
// privileged, readOnlyRootFilesystem, capabilities and
// allowPrivilegeEscalation are container-only; the pod's sysctls apply to
// every container (CheckSysctls admitted them). A privileged container, or
// one adding SYS_ADMIN, may always escalate privileges (no_new_privs off).
func Security(pod *corev1.Pod, c *corev1.Container) containers.Security {
	var s containers.Security
	s.Sysctls = podSysctls(pod)
	if psc := pod.Spec.SecurityContext; psc != nil {
		s.RunAsUser = copyInt64(psc.RunAsUser)
		s.RunAsGroup = copyInt64(psc.RunAsGroup)
		s.SupplementalGroups = append(s.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil && !containsInt64(s.SupplementalGroups, *psc.FSGroup) {
			s.SupplementalGroups = append(s.SupplementalGroups, *psc.FSGroup)
		}
	}
	csc := c.SecurityContext
	if csc == nil {
		return s
	}
	if csc.RunAsUser != nil {
		s.RunAsUser = copyInt64(csc.RunAsUser)
	}
	if csc.RunAsGroup != nil {
		s.RunAsGroup = copyInt64(csc.RunAsGroup)
	}
	s.Privileged = csc.Privileged != nil && *csc.Privileged
	s.ReadOnlyRootFilesystem = csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem
	if caps := csc.Capabilities; caps != nil {
		for _, c := range caps.Add {
			s.CapAdd = append(s.CapAdd, string(c))
		}
		for _, c := range caps.Drop {
			s.CapDrop = append(s.CapDrop, string(c))
		}
	}
	if csc.AllowPrivilegeEscalation != nil {
		v := *csc.AllowPrivilegeEscalation
		s.AllowPrivilegeEscalation = &v
	}
	if s.Privileged || containsString(s.CapAdd, "SYS_ADMIN") || containsString(s.CapAdd, "CAP_SYS_ADMIN") {
		v := true
		s.AllowPrivilegeEscalation = &v
	}
	return s
}

func copyInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func containsInt64(list []int64, v int64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func containsString(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
