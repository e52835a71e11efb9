package qos

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func sysctlPod(hostNet, hostIPC bool, sysctls ...string) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, Containers: []corev1.Container{{Name: "c"}}}}
	if len(sysctls) > 0 {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	for _, s := range sysctls {
		pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: s, Value: "1"})
	}
	return pod
}

func TestCheckSysctls_Table(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{name: "no security context admits", pod: sysctlPod(false, false), want: ""},
		{name: "safe IPC and net sysctls admit", pod: sysctlPod(false, false, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range"), want: ""},
		{name: "slash form is normalized", pod: sysctlPod(false, false, "net/ipv4/tcp_syncookies"), want: ""},
		{name: "unsafe sysctl is forbidden", pod: sysctlPod(false, false, "kernel.shm_rmid_forced", "kernel.msgmax"),
			want: `Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "net sysctl with hostNetwork is forbidden", pod: sysctlPod(true, false, "net.ipv4.tcp_syncookies"),
			want: `Pod was rejected: forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled`},
		{name: "IPC sysctl with hostIPC is forbidden", pod: sysctlPod(false, true, "kernel.shm_rmid_forced"),
			want: `Pod was rejected: forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CheckSysctls(tt.pod); got != tt.want {
				t.Fatalf("CheckSysctls = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNormalizeSysctl_Table(t *testing.T) {
	for in, want := range map[string]string{
		"kernel.shm_rmid_forced":           "kernel.shm_rmid_forced",
		"kernel/shm_rmid_forced":           "kernel.shm_rmid_forced",
		"net/ipv4/conf/eno2.100/rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
		"net.ipv4.conf.eno2/100.rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
	} {
		if got := NormalizeSysctl(in); got != want {
			t.Errorf("NormalizeSysctl(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecurity_PodSysctls_EveryContainer(t *testing.T) {
	pod := sysctlPod(false, false, "kernel/shm_rmid_forced")
	if got := Security(pod, &pod.Spec.Containers[0]).Sysctls; !reflect.DeepEqual(got, map[string]string{"kernel.shm_rmid_forced": "1"}) {
		t.Fatalf("sysctls %v", got)
	}
	if got := Security(sysctlPod(false, false), &corev1.Container{}).Sysctls; got != nil {
		t.Fatalf("sysctls without any: %v", got)
	}
}
