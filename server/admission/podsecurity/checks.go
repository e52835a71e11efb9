package podsecurity

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The checks and their strings are upstream's policy/check_*.go: users,
// tooling and conformance tests read the messages verbatim.

const (
	idCapabilitiesBaseline checkID = "capabilities_baseline"
	idHostPathVolumes      checkID = "hostPathVolumes"
	idSeccompBaseline      checkID = "seccompProfile_baseline"
	idProcMount            checkID = "procMount"
)

// allChecks is every check upstream assigns to a policy version.
func allChecks() []check {
	one := func(id checkID, level Level, fn checkFn) check {
		return check{id: id, level: level, versions: []versionedCheck{{min: MajorMinor(1, 0), fn: fn}}}
	}
	return []check{
		// baseline
		one("appArmorProfile", LevelBaseline, appArmorProfile),
		one(idCapabilitiesBaseline, LevelBaseline, capabilitiesBaseline),
		one("hostNamespaces", LevelBaseline, hostNamespaces),
		one(idHostPathVolumes, LevelBaseline, hostPathVolumes),
		one("hostPorts", LevelBaseline, hostPorts),
		{id: "hostProbesAndHostLifecycle", level: LevelBaseline, versions: []versionedCheck{
			{min: MajorMinor(1, 34), fn: hostProbesAndLifecycle}}},
		one("privileged", LevelBaseline, privileged),
		{id: idProcMount, level: LevelBaseline, versions: []versionedCheck{
			{min: MajorMinor(1, 0), fn: procMount},
			{min: MajorMinor(1, 35), fn: relaxedForUserNamespace(procMount)}}},
		{id: "seLinuxOptions", level: LevelBaseline, versions: []versionedCheck{
			{min: MajorMinor(1, 0), fn: seLinuxOptions(selinuxTypes1_0)},
			{min: MajorMinor(1, 31), fn: seLinuxOptions(selinuxTypes1_31)}}},
		{id: idSeccompBaseline, level: LevelBaseline, versions: []versionedCheck{
			{min: MajorMinor(1, 0), fn: seccompBaselineAnnotations},
			{min: MajorMinor(1, 19), fn: seccompBaseline}}},
		{id: "sysctls", level: LevelBaseline, versions: []versionedCheck{
			{min: MajorMinor(1, 0), fn: sysctls(sysctls1_0)},
			{min: MajorMinor(1, 27), fn: sysctls(sysctls1_27)},
			{min: MajorMinor(1, 29), fn: sysctls(sysctls1_29)},
			{min: MajorMinor(1, 32), fn: sysctls(sysctls1_32)},
			{min: MajorMinor(1, 37), fn: sysctls(sysctls1_37)}}},
		one("windowsHostProcess", LevelBaseline, windowsHostProcess),
		// restricted
		{id: "allowPrivilegeEscalation", level: LevelRestricted, versions: []versionedCheck{
			{min: MajorMinor(1, 8), fn: allowPrivilegeEscalation},
			{min: MajorMinor(1, 25), fn: exemptWindows(allowPrivilegeEscalation)}}},
		{id: "capabilities_restricted", level: LevelRestricted, versions: []versionedCheck{
			{min: MajorMinor(1, 22), fn: capabilitiesRestricted, overrides: []checkID{idCapabilitiesBaseline}},
			{min: MajorMinor(1, 25), fn: exemptWindows(capabilitiesRestricted), overrides: []checkID{idCapabilitiesBaseline}}}},
		{id: "procMount_restricted", level: LevelRestricted, versions: []versionedCheck{
			{min: MajorMinor(1, 35), fn: procMount, overrides: []checkID{idProcMount}}}},
		{id: "restrictedVolumes", level: LevelRestricted, versions: []versionedCheck{
			{min: MajorMinor(1, 0), fn: restrictedVolumes, overrides: []checkID{idHostPathVolumes}}}},
		{id: "runAsNonRoot", level: LevelRestricted, versions: []versionedCheck{
			{min: MajorMinor(1, 0), fn: runAsNonRoot},
			{min: MajorMinor(1, 35), fn: relaxedForUserNamespace(runAsNonRoot)}}},
		{id: "runAsUser", level: LevelRestricted, versions: []versionedCheck{
			{min: MajorMinor(1, 23), fn: runAsUser},
			{min: MajorMinor(1, 35), fn: relaxedForUserNamespace(runAsUser)}}},
		{id: "seccompProfile_restricted", level: LevelRestricted, versions: []versionedCheck{
			{min: MajorMinor(1, 19), fn: seccompRestricted, overrides: []checkID{idSeccompBaseline}},
			{min: MajorMinor(1, 25), fn: exemptWindows(seccompRestricted), overrides: []checkID{idSeccompBaseline}}}},
	}
}

// visitContainers calls visit for init, regular and ephemeral containers.
func visitContainers(spec *corev1.PodSpec, visit func(*corev1.Container)) {
	for i := range spec.InitContainers {
		visit(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		visit(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		visit((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
}

// relaxedForUserNamespace allows pods with hostUsers: false (from v1.35):
// root and /proc in a user namespace are not the host's.
func relaxedForUserNamespace(fn checkFn) checkFn {
	return func(meta *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
		if spec.HostUsers != nil && !*spec.HostUsers {
			return allowed
		}
		return fn(meta, spec)
	}
}
