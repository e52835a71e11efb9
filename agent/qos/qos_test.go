package qos

import (
	"bufio"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"skiff/runtime/containers"
)

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func ctr(req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func podWith(init []corev1.Container, cs ...corev1.Container) *corev1.Pod {
	p := &corev1.Pod{}
	p.UID = "u1"
	p.Spec.InitContainers = init
	p.Spec.Containers = cs
	return p
}

func TestClass(t *testing.T) {
	full := rl("cpu", "500m", "memory", "128Mi")
	tests := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"no resources anywhere is BestEffort", podWith(nil, ctr(nil, nil)), corev1.PodQOSBestEffort},
		{"only non-QoS resources is BestEffort", podWith(nil, ctr(rl("ephemeral-storage", "1Gi"), nil)), corev1.PodQOSBestEffort},
		{"zero requests are ignored", podWith(nil, ctr(rl("cpu", "0"), nil)), corev1.PodQOSBestEffort},
		{"limits equal requests is Guaranteed", podWith(nil, ctr(full, full)), corev1.PodQOSGuaranteed},
		{"limits only default requests so Guaranteed", podWith(nil, ctr(nil, full)), corev1.PodQOSGuaranteed},
		{"request below limit is Burstable", podWith(nil, ctr(rl("cpu", "100m", "memory", "128Mi"), full)), corev1.PodQOSBurstable},
		{"missing memory limit is Burstable", podWith(nil, ctr(rl("cpu", "1"), rl("cpu", "1"))), corev1.PodQOSBurstable},
		{"request only is Burstable", podWith(nil, ctr(rl("memory", "1Gi"), nil)), corev1.PodQOSBurstable},
		{"one BestEffort container makes the pod Burstable", podWith(nil, ctr(full, full), ctr(nil, nil)), corev1.PodQOSBurstable},
		{"init container without limits makes the pod Burstable", podWith([]corev1.Container{ctr(nil, nil)}, ctr(full, full)), corev1.PodQOSBurstable},
		{"init container with resources counts", podWith([]corev1.Container{ctr(rl("cpu", "1"), nil)}, ctr(nil, nil)), corev1.PodQOSBurstable},
		{"all Guaranteed including init is Guaranteed", podWith([]corev1.Container{ctr(full, full)}, ctr(full, full)), corev1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Class(tt.pod); got != tt.want {
				t.Fatalf("Class = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestClassKeepsStatusAndPodLevelResources(t *testing.T) {
	p := podWith(nil, ctr(nil, nil))
	p.Status.QOSClass = corev1.PodQOSGuaranteed
	if got := Class(p); got != corev1.PodQOSGuaranteed {
		t.Fatalf("status class ignored: %s", got)
	}
	p = podWith(nil, ctr(nil, nil))
	full := rl("cpu", "1", "memory", "1Gi")
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: full, Limits: full}
	if got := Class(p); got != corev1.PodQOSGuaranteed {
		t.Fatalf("pod-level resources ignored: %s", got)
	}
}

func TestCgroupParent(t *testing.T) {
	full := rl("cpu", "1", "memory", "1Gi")
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"guaranteed", podWith(nil, ctr(full, full)), "/skiff/guaranteed/podu1"},
		{"burstable", podWith(nil, ctr(rl("cpu", "1"), nil)), "/skiff/burstable/podu1"},
		{"besteffort", podWith(nil, ctr(nil, nil)), "/skiff/besteffort/podu1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CgroupParent("/skiff", tt.pod); got != tt.want {
				t.Fatalf("got %s want %s", got, tt.want)
			}
		})
	}
}

func TestContainerResources(t *testing.T) {
	const gi = int64(1 << 30)
	tests := []struct {
		name string
		c    corev1.Container
		init []corev1.Container
		pri  string
		want containers.Resources
	}{
		{"BestEffort gets min shares, no limits, oom 1000", ctr(nil, nil), nil, "",
			containers.Resources{CPUShares: 2, OOMScoreAdj: 1000}},
		{"Guaranteed gets quota, memory limit and oom -997",
			ctr(nil, rl("cpu", "500m", "memory", "256Mi")), nil, "",
			containers.Resources{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 256 << 20, OOMScoreAdj: -997}},
		{"Burstable oom from memory request: 1Gi of 4Gi is 750",
			ctr(rl("cpu", "250m", "memory", "1Gi"), nil), nil, "",
			containers.Resources{CPUShares: 256, OOMScoreAdj: 750}},
		{"Burstable requesting all memory is kept above Guaranteed at 3",
			ctr(rl("memory", "4Gi"), nil), nil, "",
			containers.Resources{CPUShares: 2, OOMScoreAdj: 3}},
		{"Burstable without memory request is 999, below BestEffort",
			ctr(rl("cpu", "1"), nil), nil, "",
			containers.Resources{CPUShares: 1024, OOMScoreAdj: 999}},
		{"tiny cpu request rounds to min shares and tiny limit to min quota",
			ctr(rl("cpu", "1m"), rl("cpu", "5m")), nil, "",
			containers.Resources{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000, OOMScoreAdj: 999}},
		{"system-node-critical is protected like Guaranteed",
			ctr(rl("memory", "1Gi"), nil), nil, "system-node-critical",
			containers.Resources{CPUShares: 2, OOMScoreAdj: -997}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podWith(tt.init, tt.c)
			p.Spec.PriorityClassName = tt.pri
			got := ContainerResourcesWithCapacity(p, &p.Spec.Containers[0], 4*gi)
			if got != tt.want {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestNodeMemoryCapacity(t *testing.T) {
	if NodeMemoryCapacity() <= 0 {
		t.Fatal("MemTotal not read from /proc/meminfo")
	}
	got, err := parseMemTotal(bufio.NewScanner(strings.NewReader("MemFree: 1 kB\nMemTotal:  2048 kB\n")))
	if err != nil || got != 2048*1024 {
		t.Fatalf("parse = %d, %v", got, err)
	}
	p := podWith(nil, ctr(nil, nil))
	if r := ContainerResources(p, &p.Spec.Containers[0]); r.OOMScoreAdj != 1000 {
		t.Fatalf("ContainerResources oom = %d", r.OOMScoreAdj)
	}
}

func i64(v int64) *int64 { return &v }
func bp(v bool) *bool    { return &v }

func TestSecurity(t *testing.T) {
	tests := []struct {
		name string
		psc  *corev1.PodSecurityContext
		csc  *corev1.SecurityContext
		want containers.Security
	}{
		{"nothing set", nil, nil, containers.Security{}},
		{"pod values apply when the container sets none",
			&corev1.PodSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(3000), SupplementalGroups: []int64{5}, FSGroup: i64(2000)}, nil,
			containers.Security{RunAsUser: i64(1000), RunAsGroup: i64(3000), SupplementalGroups: []int64{5, 2000}}},
		{"container wins over pod",
			&corev1.PodSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(3000)},
			&corev1.SecurityContext{RunAsUser: i64(0), RunAsGroup: i64(7)},
			containers.Security{RunAsUser: i64(0), RunAsGroup: i64(7)}},
		{"fsGroup already among supplemental groups is not repeated",
			&corev1.PodSecurityContext{SupplementalGroups: []int64{2000}, FSGroup: i64(2000)}, nil,
			containers.Security{SupplementalGroups: []int64{2000}}},
		{"container-only fields",
			nil,
			&corev1.SecurityContext{ReadOnlyRootFilesystem: bp(true), AllowPrivilegeEscalation: bp(false),
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}}},
			containers.Security{ReadOnlyRootFilesystem: true, AllowPrivilegeEscalation: bp(false), CapAdd: []string{"NET_ADMIN"}, CapDrop: []string{"ALL"}}},
		{"privileged always allows escalation",
			nil, &corev1.SecurityContext{Privileged: bp(true), AllowPrivilegeEscalation: bp(false)},
			containers.Security{Privileged: true, AllowPrivilegeEscalation: bp(true)}},
		{"SYS_ADMIN allows escalation",
			nil, &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}},
			containers.Security{CapAdd: []string{"SYS_ADMIN"}, AllowPrivilegeEscalation: bp(true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podWith(nil, corev1.Container{Name: "c", SecurityContext: tt.csc})
			p.Spec.SecurityContext = tt.psc
			got := Security(p, &p.Spec.Containers[0])
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
