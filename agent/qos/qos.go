// Package qos computes what the kubelet derives from a pod's resources and
// securityContext: its QoS class, its cgroup parent, each container's cgroup
// settings and OOM score adjustment, and the merged security settings the
// runtime applies.
package qos

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"skiff/runtime/containers"
)

// Values from the kubelet (pkg/kubelet/qos and pkg/kubelet/cm).
const (
	// GuaranteedOOMScoreAdj is the oom_score_adj of Guaranteed and node-critical pods.
	GuaranteedOOMScoreAdj = -997
	// BestEffortOOMScoreAdj is the oom_score_adj of BestEffort pods.
	BestEffortOOMScoreAdj = 1000
	// MinShares and MaxShares bound cpu.shares.
	MinShares = 2
	MaxShares = 262144
	// QuotaPeriod is the CFS period in microseconds used with a CPU limit.
	QuotaPeriod = 100000
	// MinQuotaPeriod is the smallest CFS quota the kubelet sets.
	MinQuotaPeriod = 1000

	sharesPerCPU  = 1024
	milliCPUToCPU = 1000
	// systemNodeCritical is the priority class whose pods the kubelet
	// protects from the OOM killer like Guaranteed ones.
	systemNodeCritical = "system-node-critical"
)

// qosResources are the resources that decide the QoS class.
var qosResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// Class returns the pod's QoS class with upstream's rules: every container
// (init containers included; pod-level resources win when set) counts;
// no CPU/memory request or limit anywhere → BestEffort; CPU and memory
// limits on every container with requests equal to limits → Guaranteed;
// anything else → Burstable. A request left unset defaults to its limit, as
// the API server's defaulting does. A class already in status is kept.
func Class(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputeClass(pod)
}

// ComputeClass is Class without trusting status.qosClass.
func ComputeClass(pod *corev1.Pod) corev1.PodQOSClass {
	requests := corev1.ResourceList{}
	limits := corev1.ResourceList{}
	guaranteed := true
	var reqs []corev1.ResourceRequirements
	if pr := pod.Spec.Resources; pr != nil && hasQOSResource(*pr) {
		reqs = []corev1.ResourceRequirements{*pr}
	} else {
		for _, c := range pod.Spec.InitContainers {
			reqs = append(reqs, c.Resources)
		}
		for _, c := range pod.Spec.Containers {
			reqs = append(reqs, c.Resources)
		}
	}
	for _, r := range reqs {
		eff := effectiveRequests(r)
		for _, name := range qosResources {
			if q, ok := eff[name]; ok && !q.IsZero() {
				addTo(requests, name, q)
			}
		}
		found := 0
		for _, name := range qosResources {
			if q, ok := r.Limits[name]; ok && !q.IsZero() {
				addTo(limits, name, q)
				found++
			}
		}
		if found != len(qosResources) {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			lim, ok := limits[name]
			if !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

func hasQOSResource(r corev1.ResourceRequirements) bool {
	for _, name := range qosResources {
		if _, ok := r.Requests[name]; ok {
			return true
		}
		if _, ok := r.Limits[name]; ok {
			return true
		}
	}
	return false
}

// effectiveRequests is the requests with every unset one defaulted to its
// limit (the API server's defaulting).
func effectiveRequests(r corev1.ResourceRequirements) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range r.Limits {
		out[name] = q
	}
	for name, q := range r.Requests {
		out[name] = q
	}
	return out
}

func addTo(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if cur, ok := list[name]; ok {
		cur.Add(q)
		list[name] = cur
		return
	}
	list[name] = q.DeepCopy()
}

// CgroupParent returns the pod's cgroupfs path: root "/skiff" →
// /skiff/{guaranteed|burstable|besteffort}/pod<uid>.
func CgroupParent(root string, pod *corev1.Pod) string {
	if root == "" {
		root = "/"
	}
	class := strings.ToLower(string(Class(pod)))
	return path.Join(root, class, "pod"+string(pod.UID))
}

// ContainerResources computes a container's cgroup settings with the node
// memory capacity read once from /proc/meminfo (see
// ContainerResourcesWithCapacity).
func ContainerResources(pod *corev1.Pod, c *corev1.Container) containers.Resources {
	return ContainerResourcesWithCapacity(pod, c, NodeMemoryCapacity())
}

// ContainerResourcesWithCapacity computes a container's cgroup settings:
// cpu.shares from the CPU request (milliCPU*1024/1000, at least 2), CFS
// quota from the CPU limit with a 100 ms period (quota at least 1000 µs),
// the memory limit in bytes, and oom_score_adj by QoS class (Burstable:
// 1000 - 1000*memoryRequest/memCapacity, kept within [3, 999] as the
// kubelet does). An unset request defaults to the limit.
func ContainerResourcesWithCapacity(pod *corev1.Pod, c *corev1.Container, memCapacity int64) containers.Resources {
	req := effectiveRequests(c.Resources)
	var res containers.Resources
	cpuReq := req[corev1.ResourceCPU]
	res.CPUShares = MilliCPUToShares(cpuReq.MilliValue())
	if lim, ok := c.Resources.Limits[corev1.ResourceCPU]; ok && !lim.IsZero() {
		res.CPUQuota = MilliCPUToQuota(lim.MilliValue(), QuotaPeriod)
		res.CPUPeriod = QuotaPeriod
	}
	if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		res.MemoryLimit = lim.Value()
	}
	memReq := req[corev1.ResourceMemory]
	res.OOMScoreAdj = OOMScoreAdj(pod, memReq.Value(), memCapacity)
	return res
}

// MilliCPUToShares converts a CPU request to cpu.shares.
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU <= 0 {
		return MinShares
	}
	shares := milliCPU * sharesPerCPU / milliCPUToCPU
	if shares < MinShares {
		return MinShares
	}
	if shares > MaxShares {
		return MaxShares
	}
	return uint64(shares)
}

// MilliCPUToQuota converts a CPU limit to a CFS quota for period; 0 means
// no limit.
func MilliCPUToQuota(milliCPU int64, period int64) int64 {
	if milliCPU <= 0 {
		return 0
	}
	quota := milliCPU * period / milliCPUToCPU
	if quota < MinQuotaPeriod {
		quota = MinQuotaPeriod
	}
	return quota
}

// OOMScoreAdj is the kubelet's oom_score_adj for a container of pod with
// the given memory request: -997 for Guaranteed and system-node-critical
// pods, 1000 for BestEffort, and for Burstable
// 1000 - 1000*memRequest/memCapacity, at least 1000-997 = 3 (above any
// Guaranteed container) and at most 999 (below BestEffort).
func OOMScoreAdj(pod *corev1.Pod, memRequest, memCapacity int64) int {
	if pod.Spec.PriorityClassName == systemNodeCritical {
		return GuaranteedOOMScoreAdj
	}
	switch Class(pod) {
	case corev1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case corev1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memCapacity <= 0 {
		return BestEffortOOMScoreAdj - 1
	}
	adj := 1000 - (1000*memRequest)/memCapacity
	if adj < 1000+GuaranteedOOMScoreAdj {
		return 1000 + GuaranteedOOMScoreAdj
	}
	if adj >= BestEffortOOMScoreAdj {
		return BestEffortOOMScoreAdj - 1
	}
	return int(adj)
}

var (
	memOnce     sync.Once
	memCapacity int64
)

// NodeMemoryCapacity is MemTotal from /proc/meminfo in bytes, read once;
// 0 when it cannot be read.
func NodeMemoryCapacity() int64 {
	memOnce.Do(func() {
		f, err := os.Open("/proc/meminfo")
		if err != nil {
			return
		}
		defer f.Close()
		memCapacity, _ = parseMemTotal(bufio.NewScanner(f))
	})
	return memCapacity
}

func parseMemTotal(s *bufio.Scanner) (int64, error) {
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse MemTotal %q: %w", fields[1], err)
			}
			return kb * 1024, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	return 0, fmt.Errorf("no MemTotal in meminfo")
}
