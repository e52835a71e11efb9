package kubelet

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Hard eviction thresholds, as upstream's defaults.
const (
	evictMemoryAvailable = 100 << 20 // memory.available < 100Mi
	evictFSPercent       = 10        // nodefs.available < 10%
)

// NodeStats is what eviction decisions are made from.
type NodeStats struct {
	// MemoryAvailable is in bytes (MemAvailable of /proc/meminfo).
	MemoryAvailable int64
	// FSAvailable and FSCapacity are of the node filesystem, in bytes.
	FSAvailable int64
	FSCapacity  int64
}

// pressure is the last eviction signal, for the node's conditions.
type pressure struct{ memory, disk atomic.Bool }

// Pressure reports whether the node is under memory or disk pressure (for
// the node's MemoryPressure and DiskPressure conditions).
func (k *Kubelet) Pressure() (memory, disk bool) {
	return k.pressure.memory.Load(), k.pressure.disk.Load()
}

// defaultNodeStats reads /proc/meminfo and statfs of path.
func defaultNodeStats(path string) func() (NodeStats, error) {
	return func() (NodeStats, error) {
		var st NodeStats
		f, err := os.Open("/proc/meminfo")
		if err != nil {
			return st, fmt.Errorf("meminfo: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "MemAvailable:" {
				kb, _ := strconv.ParseInt(fields[1], 10, 64)
				st.MemoryAvailable = kb << 10
			}
		}
		var fs syscall.Statfs_t
		if err := syscall.Statfs(path, &fs); err != nil {
			return st, fmt.Errorf("statfs %s: %w", path, err)
		}
		st.FSAvailable = int64(fs.Bavail) * int64(fs.Bsize)
		st.FSCapacity = int64(fs.Blocks) * int64(fs.Bsize)
		return st, nil
	}
}

// defaultPodMemory reads the pod cgroup's memory usage (cgroup v1, then v2).
func defaultPodMemory(cgroupParent string) int64 {
	for _, p := range []string{
		filepath.Join("/sys/fs/cgroup/memory", cgroupParent, "memory.usage_in_bytes"),
		filepath.Join("/sys/fs/cgroup", cgroupParent, "memory.current"),
	} {
		if b, err := os.ReadFile(p); err == nil {
			n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			return n
		}
	}
	return 0
}

type candidate struct {
	w     *podWorker
	pod   *corev1.Pod
	class int   // 0 BestEffort, 1 Burstable over its requests, 2 the rest
	usage int64 // bytes of the starved resource
}

// evictOnce checks the thresholds and evicts at most one pod.
func (k *Kubelet) evictOnce(ctx context.Context) {
	st, err := k.cfg.NodeStats()
	if err != nil {
		k.log.Debug("node stats for eviction", "err", err)
		return
	}
	mem := st.MemoryAvailable > 0 && st.MemoryAvailable < evictMemoryAvailable
	disk := st.FSCapacity > 0 && st.FSAvailable*100 < st.FSCapacity*evictFSPercent
	k.pressure.memory.Store(mem)
	k.pressure.disk.Store(disk)
	if !mem && !disk {
		return
	}
	resName := "memory"
	if !mem {
		resName = "ephemeral-storage"
	}
	cands := k.evictionCandidates(mem)
	if len(cands) == 0 {
		return
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].class != cands[j].class {
			return cands[i].class < cands[j].class
		}
		return cands[i].usage > cands[j].usage
	})
	victim := cands[0]
	msg := fmt.Sprintf("The node was low on resource: %s. ", resName)
	k.log.Warn("evicting pod", "pod", podKey(victim.pod), "resource", resName)
	victim.w.evict(msg)
	_ = ctx
}

// evictionCandidates are the running pods that may be evicted (not static
// pods, not critical ones), classed and measured.
func (k *Kubelet) evictionCandidates(memory bool) []candidate {
	var out []candidate
	for _, w := range k.allWorkers() {
		pod, removed := w.snapshot()
		w.mu.Lock()
		skip := removed || w.terminal || w.evicted != "" || w.static || pod.DeletionTimestamp != nil
		w.mu.Unlock()
		if skip || (pod.Spec.Priority != nil && *pod.Spec.Priority >= 2000000000) {
			continue
		}
		c := candidate{w: w, pod: pod, class: 2}
		if memory {
			c.usage = k.cfg.PodMemory(pod)
		} else {
			c.usage = dirSize(k.logDir(pod))
		}
		switch k.cfg.QoS.Class(pod) {
		case corev1.PodQOSBestEffort:
			c.class = 0
		case corev1.PodQOSBurstable:
			if memory && c.usage > podMemoryRequest(pod) {
				c.class = 1
			}
		}
		out = append(out, c)
	}
	return out
}

func podMemoryRequest(pod *corev1.Pod) int64 {
	var total resource.Quantity
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
			total.Add(q)
		}
	}
	return total.Value()
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// evict marks the pod for eviction; its worker stops it.
func (w *podWorker) evict(msg string) {
	w.setField(func() { w.evicted, w.failReason = msg, "Evicted" })
	w.kick()
}

// syncEvicted stops an evicted pod (or one past its active deadline) and
// makes it Failed with the reason.
func (w *podWorker) syncEvicted(ctx context.Context, pod *corev1.Pod) {
	w.k.event(pod, corev1.EventTypeWarning, w.failReason, "%s", w.evicted)
	w.stopProbes("")
	grace := time.Duration(0)
	if w.failReason != "Evicted" {
		grace = podGrace(pod)
	}
	w.stopAll(ctx, pod, grace)
	w.refresh(ctx)
	w.finish(ctx, pod)
}
