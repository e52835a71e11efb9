package podsecurity

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// restrictedPod passes restricted at every version.
func restrictedPod() *corev1.Pod {
	sc := func() *corev1.SecurityContext {
		return &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			InitContainers:  []corev1.Container{{Name: "i", Image: "busybox", SecurityContext: sc()}},
			Containers:      []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: sc()}},
		},
	}
}

// barePod sets nothing: it passes baseline and fails restricted.
func barePod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
}

func lv(t *testing.T, s string) LevelVersion {
	t.Helper()
	level, version, _ := strings.Cut(s, ":")
	l, err := ParseLevel(level)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	return LevelVersion{l, v}
}

const (
	apeC       = `allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false)`
	capsC      = `unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"])`
	nonRootC   = `runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)`
	seccompC   = `seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	bareLatest = apeC + ", " + capsC + ", " + nonRootC + ", " + seccompC
)

// TestEvaluate_LevelsAndVersions_UpstreamMessages: which checks apply at a
// level and version, in upstream's order, with upstream's aggregate text.
func TestEvaluate_LevelsAndVersions_UpstreamMessages(t *testing.T) {
	e := NewEvaluator()
	cases := []struct {
		name string
		lv   string
		pod  func() *corev1.Pod
		edit func(*corev1.Pod)
		want string // "" means allowed
	}{
		{name: "restricted pod passes restricted:latest", lv: "restricted:latest", pod: restrictedPod},
		{name: "restricted pod passes restricted:v1.0", lv: "restricted:v1.0", pod: restrictedPod},
		{name: "bare pod passes baseline", lv: "baseline:latest", pod: barePod},
		{name: "bare pod at restricted:latest", lv: "restricted:latest", pod: barePod, want: bareLatest},
		{name: "future version is latest", lv: "restricted:v1.99", pod: barePod, want: bareLatest},
		{name: "v1.7 predates allowPrivilegeEscalation and seccomp", lv: "restricted:v1.7", pod: barePod, want: nonRootC},
		{name: "v1.8 adds allowPrivilegeEscalation", lv: "restricted:v1.8", pod: barePod, want: apeC + ", " + nonRootC},
		{name: "v1.21 has no drop ALL yet", lv: "restricted:v1.21", pod: barePod, want: apeC + ", " + nonRootC + ", " + seccompC},
		{name: "v1.22 adds capabilities", lv: "restricted:v1.22", pod: barePod, want: bareLatest},
		{name: "privileged allows anything", lv: "privileged:latest", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}},
		{name: "baseline checks come first", lv: "restricted:latest", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}, want: `host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true), ` + bareLatest},
		{name: "baseline hostPath", lv: "baseline:latest", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}, want: `hostPath volumes (volume "h")`},
		{name: "restricted volumes override hostPath", lv: "restricted:latest", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}, want: `restricted volume types (volume "h" uses restricted volume type "hostPath")`},
		{name: "v1.21 judges added capabilities by baseline", lv: "restricted:v1.21", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, want: `non-default capabilities (container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add)`},
		{name: "v1.22 restricted capabilities replace baseline's", lv: "restricted:v1.22", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, want: `unrestricted capabilities (container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add)`},
		{name: "runAsUser 0 allowed before v1.23", lv: "restricted:v1.22", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.SecurityContext.RunAsUser = ptr.To[int64](0)
		}},
		{name: "runAsUser 0 refused from v1.23", lv: "restricted:v1.23", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.SecurityContext.RunAsUser = ptr.To[int64](0)
		}, want: `runAsUser=0 (pod must not set runAsUser=0)`},
		{name: "user namespace does not relax runAsUser at v1.34", lv: "restricted:v1.34", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.SecurityContext.RunAsUser = ptr.To[int64](0)
		}, want: `runAsUser=0 (pod must not set runAsUser=0)`},
		{name: "user namespace relaxes runAsUser and runAsNonRoot from v1.35", lv: "restricted:v1.35", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.SecurityContext.RunAsUser = ptr.To[int64](0)
			p.Spec.SecurityContext.RunAsNonRoot = ptr.To(false)
		}},
		{name: "unmasked procMount in user namespace refused by baseline v1.34", lv: "baseline:v1.34", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
		}, want: `procMount (container "c" must not set securityContext.procMount to "Unmasked")`},
		{name: "unmasked procMount in user namespace allowed by baseline v1.35", lv: "baseline:v1.35", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
		}},
		{name: "unmasked procMount in user namespace refused by restricted v1.35", lv: "restricted:latest", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
		}, want: `procMount (container "c" must not set securityContext.procMount to "Unmasked")`},
		{name: "probe host allowed before v1.34", lv: "baseline:v1.33", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1"}}}
		}},
		{name: "probe host refused from v1.34", lv: "baseline:v1.34", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1"}}}
		}, want: `probe or lifecycle host (container "c" uses probe or lifecycle host "10.0.0.1")`},
		{name: "seccomp annotations judged before v1.19", lv: "restricted:v1.18", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Annotations = map[string]string{seccompPodAnnotation: "unconfined"}
		}, want: `seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined")`},
		{name: "seccomp annotations ignored from v1.19", lv: "baseline:v1.19", pod: restrictedPod, edit: func(p *corev1.Pod) {
			p.Annotations = map[string]string{seccompPodAnnotation: "unconfined"}
		}},
		{name: "container_engine_t refused before v1.31", lv: "baseline:v1.30", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "container_engine_t"}}
		}, want: `seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "container_engine_t")`},
		{name: "container_engine_t allowed from v1.31", lv: "baseline:v1.31", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "container_engine_t"}}
		}},
		{name: "windows pod not exempt at v1.24", lv: "restricted:v1.24", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
		}, want: apeC + ", " + capsC + ", " + seccompC},
		{name: "windows pod exempt from linux-only checks at v1.25", lv: "restricted:v1.25", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
		}},
		{name: "apparmor unconfined refused by baseline", lv: "baseline:v1.0", pod: barePod, edit: func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "c": "unconfined"}
		}, want: `forbidden AppArmor profile (annotation must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/c="unconfined"")`},
		{name: "windows hostProcess refused by baseline", lv: "baseline:latest", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}
		}, want: `hostProcess (pod must not set securityContext.windowsOptions.hostProcess=true)`},
		{name: "host port refused by baseline", lv: "baseline:latest", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		}, want: `hostPort (container "c" uses hostPort 8080)`},
		{name: "unsafe sysctl refused by baseline", lv: "baseline:latest", pod: barePod, edit: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax"}}}
		}, want: `forbidden sysctls (kernel.msgmax)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod()
			if tc.edit != nil {
				tc.edit(pod)
			}
			v := e.Evaluate(lv(t, tc.lv), &pod.ObjectMeta, &pod.Spec)
			if tc.want == "" {
				if !v.Allowed {
					t.Fatalf("refused: %s", v.Detail())
				}
				return
			}
			if v.Allowed {
				t.Fatalf("allowed, want %s", tc.want)
			}
			if got := v.Detail(); got != tc.want {
				t.Errorf("got\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}

// TestEvaluate_EveryVersion_RestrictedPodPassesAndBarePodFails covers the
// whole version range: no version lacks its checks.
func TestEvaluate_EveryVersion_RestrictedPodPassesAndBarePodFails(t *testing.T) {
	e := NewEvaluator()
	for minor := 0; minor <= 40; minor++ {
		v := MajorMinor(1, minor)
		for _, level := range []Level{LevelBaseline, LevelRestricted} {
			pod := restrictedPod()
			if r := e.Evaluate(LevelVersion{level, v}, &pod.ObjectMeta, &pod.Spec); !r.Allowed {
				t.Errorf("%s:%s refused the restricted pod: %s", level, v, r.Detail())
			}
		}
		pod := barePod()
		if r := e.Evaluate(LevelVersion{LevelRestricted, v}, &pod.ObjectMeta, &pod.Spec); r.Allowed {
			t.Errorf("restricted:%s allowed a bare pod", v)
		}
		pod.Spec.HostPID = true
		if r := e.Evaluate(LevelVersion{LevelBaseline, v}, &pod.ObjectMeta, &pod.Spec); r.Allowed || r.Reason() != "host namespaces" {
			t.Errorf("baseline:%s on hostPID: %v %q", v, r.Allowed, r.Reason())
		}
	}
}

func TestVerdict_ReasonAndDetail_JoinFailedChecks(t *testing.T) {
	v := aggregate([]Result{
		{Allowed: false, Reason: "host ports", Detail: "8080, 9090"},
		{Allowed: true},
		{Allowed: false, Reason: "privileged"},
		{Allowed: false},
	})
	if v.Allowed {
		t.Fatal("allowed")
	}
	if got, want := v.Reason(), "host ports, privileged, unknown forbidden reason"; got != want {
		t.Errorf("Reason() = %q, want %q", got, want)
	}
	if got, want := v.Detail(), "host ports (8080, 9090), privileged, unknown forbidden reason"; got != want {
		t.Errorf("Detail() = %q, want %q", got, want)
	}
	if !aggregate([]Result{{Allowed: true}}).Allowed {
		t.Error("all allowed results aggregate to refused")
	}
}
