package podsecurity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func ctrs(names ...string) []corev1.Container {
	var cs []corev1.Container
	for _, n := range names {
		cs = append(cs, corev1.Container{Name: n})
	}
	return cs
}

func withSC(name string, sc corev1.SecurityContext) corev1.Container {
	return corev1.Container{Name: name, SecurityContext: &sc}
}

// TestChecks_ForbiddenPods_UpstreamReasonAndDetail runs each check on pods
// that break it, expecting upstream's exact strings, and on pods that pass.
func TestChecks_ForbiddenPods_UpstreamReasonAndDetail(t *testing.T) {
	cases := []struct {
		name   string
		fn     checkFn
		meta   metav1.ObjectMeta
		spec   corev1.PodSpec
		reason string // "" means allowed
		detail string
	}{
		// allowPrivilegeEscalation
		{name: "ape/false passes", fn: allowPrivilegeEscalation,
			spec: corev1.PodSpec{Containers: []corev1.Container{withSC("a", corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)})}}},
		{name: "ape/unset and true fail", fn: allowPrivilegeEscalation,
			spec: corev1.PodSpec{InitContainers: ctrs("a"), Containers: []corev1.Container{{Name: "b"},
				withSC("c", corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}),
				withSC("d", corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)})}},
			reason: "allowPrivilegeEscalation != false", detail: `containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false`},
		{name: "ape/ephemeral container counted", fn: allowPrivilegeEscalation,
			spec:   corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg"}}}},
			reason: "allowPrivilegeEscalation != false", detail: `container "dbg" must set securityContext.allowPrivilegeEscalation=false`},
		{name: "ape/windows exempt from 1.25", fn: exemptWindows(allowPrivilegeEscalation),
			spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: ctrs("a")}},

		// appArmorProfile
		{name: "apparmor/runtime default and localhost pass", fn: appArmorProfile,
			meta: metav1.ObjectMeta{Annotations: map[string]string{
				corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "a": "runtime/default",
				corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "b": "localhost/x"}},
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{withSC("a", corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost}})}}},
		{name: "apparmor/pod unconfined", fn: appArmorProfile,
			spec:   corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}},
			reason: "forbidden AppArmor profile", detail: `pod must not set AppArmor profile type to "Unconfined"`},
		{name: "apparmor/pod, container and annotations", fn: appArmorProfile,
			meta: metav1.ObjectMeta{Annotations: map[string]string{
				corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "b": "unconfined",
				corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "a": "bad"}},
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}},
				Containers: []corev1.Container{withSC("foo", corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}})}},
			reason: "forbidden AppArmor profiles",
			detail: `pod and container "foo" and annotations must not set AppArmor profile type to "Unconfined", ` +
				`"container.apparmor.security.beta.kubernetes.io/a="bad"", "container.apparmor.security.beta.kubernetes.io/b="unconfined""`},

		// capabilities_baseline
		{name: "caps baseline/default set passes", fn: capabilitiesBaseline,
			spec: corev1.PodSpec{Containers: []corev1.Container{withSC("a", corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"CHOWN", "NET_BIND_SERVICE"}}})}}},
		{name: "caps baseline/non-default", fn: capabilitiesBaseline,
			spec: corev1.PodSpec{Containers: []corev1.Container{
				withSC("a", corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"FOO", "CHOWN"}}}),
				withSC("b", corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"BAZ", "BAR", "FOO"}}})}},
			reason: "non-default capabilities", detail: `containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add`},

		// capabilities_restricted
		{name: "caps restricted/drop ALL add NET_BIND_SERVICE passes", fn: capabilitiesRestricted,
			spec: corev1.PodSpec{Containers: []corev1.Container{withSC("a", corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}}})}}},
		{name: "caps restricted/missing drop", fn: capabilitiesRestricted,
			spec:   corev1.PodSpec{Containers: ctrs("a")},
			reason: "unrestricted capabilities", detail: `container "a" must set securityContext.capabilities.drop=["ALL"]`},
		{name: "caps restricted/missing drop and adds", fn: capabilitiesRestricted,
			spec: corev1.PodSpec{Containers: []corev1.Container{
				withSC("a", corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"FOO"}}}),
				withSC("b", corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"SYS_TIME"}, Add: []corev1.Capability{"BAR", "BAZ"}}}),
				withSC("c", corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "NET_BIND_SERVICE"}}})}},
			reason: "unrestricted capabilities",
			detail: `containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add`},

		// hostNamespaces
		{name: "host namespaces/none passes", fn: hostNamespaces, spec: corev1.PodSpec{Containers: ctrs("a")}},
		{name: "host namespaces/all", fn: hostNamespaces, spec: corev1.PodSpec{HostNetwork: true, HostPID: true, HostIPC: true},
			reason: "host namespaces", detail: "hostNetwork=true, hostPID=true, hostIPC=true"},

		// hostPathVolumes
		{name: "hostPath/emptyDir passes", fn: hostPathVolumes,
			spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}},
		{name: "hostPath/two", fn: hostPathVolumes,
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a"}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/b"}}}}},
			reason: "hostPath volumes", detail: `volumes "a", "b"`},

		// hostPorts
		{name: "hostPorts/container port only passes", fn: hostPorts,
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}},
		{name: "hostPorts/one", fn: hostPorts,
			spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b", Ports: []corev1.ContainerPort{{HostPort: 20}}}}},
			reason: "hostPort", detail: `container "b" uses hostPort 20`},
		{name: "hostPorts/several", fn: hostPorts,
			spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "b", Ports: []corev1.ContainerPort{{HostPort: 10}, {HostPort: 20}}},
				{Name: "c", Ports: []corev1.ContainerPort{{HostPort: 30}, {HostPort: 10}}}}},
			reason: "hostPort", detail: `containers "b", "c" use hostPorts 10, 20, 30`},

		// hostProbesAndHostLifecycle
		{name: "probe host/empty passes", fn: hostProbesAndLifecycle,
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{}}}}}}},
		{name: "probe host/probes and lifecycle", fn: hostProbesAndLifecycle,
			spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "a", LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "localhost"}}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "127.0.0.1"}}},
					Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Host: "::1"}}}}}},
			reason: "probe or lifecycle host", detail: `container "a" uses probe or lifecycle hosts "127.0.0.1", "::1", "localhost"`},
		{name: "probe host/two containers", fn: hostProbesAndLifecycle,
			spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "invalid2", StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "b.com"}}}},
				{Name: "invalid1", Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Host: "a.com"}}}}}},
			reason: "probe or lifecycle host", detail: `containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com"`},

		// privileged
		{name: "privileged/false passes", fn: privileged,
			spec: corev1.PodSpec{Containers: []corev1.Container{withSC("a", corev1.SecurityContext{Privileged: ptr.To(false)})}}},
		{name: "privileged/true", fn: privileged,
			spec: corev1.PodSpec{InitContainers: []corev1.Container{withSC("d", corev1.SecurityContext{Privileged: ptr.To(true)})},
				Containers: []corev1.Container{withSC("e", corev1.SecurityContext{Privileged: ptr.To(true)})}},
			reason: "privileged", detail: `containers "d", "e" must not set securityContext.privileged=true`},

		// procMount
		{name: "procMount/default passes", fn: procMount,
			spec: corev1.PodSpec{Containers: []corev1.Container{withSC("a", corev1.SecurityContext{ProcMount: ptr.To(corev1.DefaultProcMount)})}}},
		{name: "procMount/unmasked", fn: procMount,
			spec: corev1.PodSpec{Containers: []corev1.Container{
				withSC("d", corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}),
				withSC("e", corev1.SecurityContext{ProcMount: ptr.To(corev1.ProcMountType("other"))})}},
			reason: "procMount", detail: `containers "d", "e" must not set securityContext.procMount to "Unmasked", "other"`},
		{name: "procMount/user namespace relaxes from 1.35", fn: relaxedForUserNamespace(procMount),
			spec: corev1.PodSpec{HostUsers: ptr.To(false), Containers: []corev1.Container{withSC("d", corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)})}}},

		// restrictedVolumes
		{name: "volumes/allowed kinds pass", fn: restrictedVolumes,
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{}}},
				{Name: "e", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{}}}}}},
		{name: "volumes/restricted kinds", fn: restrictedVolumes,
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}}},
				{Name: "d"}}},
			reason: "restricted volume types", detail: `volumes "a", "b", "c", "d" use restricted volume types "hostPath", "nfs", "unknown"`},
		{name: "volumes/one", fn: restrictedVolumes,
			spec:   corev1.PodSpec{Volumes: []corev1.Volume{{Name: "a", VolumeSource: corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{}}}}},
			reason: "restricted volume types", detail: `volume "a" uses restricted volume type "gitRepo"`},

		// runAsNonRoot
		{name: "nonroot/pod level passes", fn: runAsNonRoot,
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, Containers: ctrs("a")}},
		{name: "nonroot/unset", fn: runAsNonRoot, spec: corev1.PodSpec{Containers: ctrs("a", "b")},
			reason: "runAsNonRoot != true", detail: `pod or containers "a", "b" must set securityContext.runAsNonRoot=true`},
		{name: "nonroot/explicit false beats unset", fn: runAsNonRoot,
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false)}, Containers: []corev1.Container{{Name: "a"},
				withSC("c", corev1.SecurityContext{RunAsNonRoot: ptr.To(false)}), withSC("d", corev1.SecurityContext{RunAsNonRoot: ptr.To(false)})}},
			reason: "runAsNonRoot != true", detail: `pod and containers "c", "d" must not set securityContext.runAsNonRoot=false`},
		{name: "nonroot/user namespace relaxes", fn: relaxedForUserNamespace(runAsNonRoot),
			spec: corev1.PodSpec{HostUsers: ptr.To(false), Containers: ctrs("a")}},

		// runAsUser
		{name: "runAsUser/nonzero passes", fn: runAsUser,
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}, Containers: ctrs("a")}},
		{name: "runAsUser/pod zero", fn: runAsUser, spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}},
			reason: "runAsUser=0", detail: `pod must not set runAsUser=0`},
		{name: "runAsUser/containers zero", fn: runAsUser,
			spec:   corev1.PodSpec{Containers: []corev1.Container{withSC("c", corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}), withSC("d", corev1.SecurityContext{RunAsUser: ptr.To[int64](0)})}},
			reason: "runAsUser=0", detail: `containers "c", "d" must not set runAsUser=0`},

		// seLinuxOptions
		{name: "selinux/container_t passes", fn: seLinuxOptions(selinuxTypes1_0),
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "container_t", Level: "s0"}}}},
		{name: "selinux/container_engine_t before 1.31", fn: seLinuxOptions(selinuxTypes1_0),
			spec:   corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "container_engine_t"}}},
			reason: "seLinuxOptions", detail: `pod set forbidden securityContext.seLinuxOptions: type "container_engine_t"`},
		{name: "selinux/container_engine_t from 1.31", fn: seLinuxOptions(selinuxTypes1_31),
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "container_engine_t"}}}},
		{name: "selinux/everything", fn: seLinuxOptions(selinuxTypes1_31),
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "foo"}},
				Containers: []corev1.Container{
					withSC("e", corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "bar"}}),
					withSC("f", corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{User: "u"}}),
					withSC("g", corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Role: "r"}})}},
			reason: "seLinuxOptions", detail: `pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set`},

		// seccompProfile_baseline
		{name: "seccomp baseline/annotations before 1.19", fn: seccompBaselineAnnotations,
			meta: metav1.ObjectMeta{Annotations: map[string]string{
				seccompPodAnnotation:                   "unconfined",
				seccompContainerAnnotationPrefix + "a": "unconfined",
				seccompContainerAnnotationPrefix + "b": "unknown",
				seccompContainerAnnotationPrefix + "x": "unconfined", // no such container
			}},
			spec:   corev1.PodSpec{Containers: ctrs("a", "b")},
			reason: "seccompProfile", detail: `forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown", seccomp.security.alpha.kubernetes.io/pod="unconfined"`},
		{name: "seccomp baseline/good annotations pass", fn: seccompBaselineAnnotations,
			meta: metav1.ObjectMeta{Annotations: map[string]string{seccompPodAnnotation: "docker/default", seccompContainerAnnotationPrefix + "a": "localhost/p"}},
			spec: corev1.PodSpec{Containers: ctrs("a")}},
		{name: "seccomp baseline/unset passes", fn: seccompBaseline, spec: corev1.PodSpec{Containers: ctrs("a")}},
		{name: "seccomp baseline/unconfined", fn: seccompBaseline,
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}},
				Containers: []corev1.Container{{Name: "a"},
					withSC("c", corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}),
					withSC("d", corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}})}},
			reason: "seccompProfile", detail: `pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"`},

		// seccompProfile_restricted
		{name: "seccomp restricted/pod level passes", fn: seccompRestricted,
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}, Containers: ctrs("a")}},
		{name: "seccomp restricted/unset", fn: seccompRestricted, spec: corev1.PodSpec{Containers: ctrs("a", "b")},
			reason: "seccompProfile", detail: `pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`},
		{name: "seccomp restricted/explicit bad wins", fn: seccompRestricted,
			spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, withSC("c", corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}})}},
			reason: "seccompProfile", detail: `container "c" must not set securityContext.seccompProfile.type to "Unconfined"`},

		// sysctls
		{name: "sysctls/safe passes", fn: sysctls(sysctls1_0),
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_local_port_range"}}}}},
		{name: "sysctls/unsafe", fn: sysctls(sysctls1_0),
			spec:   corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "a"}, {Name: "kernel.shm_rmid_forced"}, {Name: "b"}}}},
			reason: "forbidden sysctls", detail: "a, b"},

		// windowsHostProcess
		{name: "hostProcess/false passes", fn: windowsHostProcess,
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(false)}}}},
		{name: "hostProcess/pod and containers", fn: windowsHostProcess,
			spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}},
				Containers: []corev1.Container{
					withSC("e", corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}),
					withSC("f", corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}})}},
			reason: "hostProcess", detail: `pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			meta, spec := tc.meta, tc.spec
			r := tc.fn(&meta, &spec)
			if tc.reason == "" {
				if !r.Allowed {
					t.Fatalf("refused: %s (%s)", r.Reason, r.Detail)
				}
				return
			}
			if r.Allowed {
				t.Fatalf("allowed, want %q", tc.reason)
			}
			if r.Reason != tc.reason || r.Detail != tc.detail {
				t.Errorf("got\n  %s (%s)\nwant\n  %s (%s)", r.Reason, r.Detail, tc.reason, tc.detail)
			}
		})
	}
}

// TestSysctls_SafeSet_GrowsWithVersion: each version allows what upstream
// added in it, and earlier versions do not.
func TestSysctls_SafeSet_GrowsWithVersion(t *testing.T) {
	e := NewEvaluator()
	cases := []struct {
		sysctl string
		since  int
	}{
		{"kernel.shm_rmid_forced", 0},
		{"net.ipv4.ip_local_reserved_ports", 27},
		{"net.ipv4.tcp_keepalive_time", 29},
		{"net.ipv4.tcp_fin_timeout", 29},
		{"net.ipv4.tcp_keepalive_intvl", 29},
		{"net.ipv4.tcp_keepalive_probes", 29},
		{"net.ipv4.tcp_rmem", 32},
		{"net.ipv4.tcp_wmem", 32},
		{"net.ipv4.tcp_slow_start_after_idle", 37},
		{"net.ipv4.tcp_notsent_lowat", 37},
	}
	for _, tc := range cases {
		spec := corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: tc.sysctl}}}}
		for minor := 0; minor <= 38; minor++ {
			v := e.Evaluate(LevelVersion{LevelBaseline, MajorMinor(1, minor)}, nil, &spec)
			if want := minor >= tc.since; v.Allowed != want {
				t.Errorf("%s at v1.%d: allowed=%v, want %v (%s)", tc.sysctl, minor, v.Allowed, want, v.Detail())
			}
		}
		if v := e.Evaluate(LevelVersion{LevelBaseline, Latest()}, nil, &spec); !v.Allowed {
			t.Errorf("%s at latest: refused", tc.sysctl)
		}
	}
}
