package kubelet

import (
	"context"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"skiff/runtime/containers"
)

// knownPods are the pods this node should run: the API's (without mirrors)
// and the static ones.
func (k *Kubelet) knownPods() map[types.UID]*corev1.Pod {
	out := map[types.UID]*corev1.Pod{}
	if k.lister != nil {
		pods, err := k.lister.List(labels.Everything())
		if err != nil {
			k.log.Warn("list cached pods", "err", err)
		}
		for _, p := range pods {
			if p.Spec.NodeName == k.cfg.NodeName && !isMirror(p) {
				out[p.UID] = p
			}
		}
	}
	k.mu.Lock()
	for uid, p := range k.static {
		out[uid] = p
	}
	k.mu.Unlock()
	return out
}

// adopt takes over what a previous run left: containers of pods that still
// exist keep running (attempts continue); containers, networks and volume
// directories of pods that are gone are removed.
func (k *Kubelet) adopt(ctx context.Context) {
	known := k.knownPods()
	adopted := map[types.UID][]*ctrRecord{}
	list, err := k.cfg.Runtime.List(ctx)
	if err != nil {
		k.log.Warn("list containers for adoption", "err", err)
	}
	for _, st := range list {
		uid := types.UID(st.PodUID)
		if pod, ok := known[uid]; ok && (specOf(pod, st.Name) != nil || ephemeralSpec(pod, st.Name) != nil) && st.State != containers.StateCreated {
			adopted[uid] = append(adopted[uid], &ctrRecord{id: st.ID, name: st.Name, attempt: st.Attempt, logPath: st.LogPath, hash: st.Labels[labelHash], status: st})
			continue
		}
		k.log.Info("removing orphaned container", "id", st.ID, "pod", st.PodNamespace+"/"+st.PodName, "container", st.Name)
		if err := k.cfg.Runtime.Stop(ctx, st.ID, 0); err != nil {
			k.log.Warn("stop orphaned container", "id", st.ID, "err", err)
		}
		if err := k.cfg.Runtime.Remove(ctx, st.ID); err != nil {
			k.log.Warn("remove orphaned container", "id", st.ID, "err", err)
		}
		if st.LogPath != "" && strings.HasPrefix(st.LogPath, k.cfg.LogDir) {
			_ = os.Remove(st.LogPath)
		}
	}
	nets, err := k.cfg.Network.Pods()
	if err != nil {
		k.log.Warn("list pod networks for adoption", "err", err)
	}
	for _, n := range nets {
		if _, ok := known[types.UID(n.UID)]; ok {
			continue
		}
		if err := k.cfg.Network.TeardownPod(ctx, n.UID); err != nil {
			k.log.Warn("teardown orphaned pod network", "uid", n.UID, "err", err)
		}
	}
	onDisk, err := k.cfg.Volumes.PodUIDsOnDisk()
	if err != nil {
		k.log.Warn("list pod volume dirs for adoption", "err", err)
	}
	for _, uid := range onDisk {
		if _, ok := known[types.UID(uid)]; !ok {
			if err := k.cfg.Volumes.Teardown(ctx, uid); err != nil {
				k.log.Warn("teardown orphaned pod volumes", "uid", uid, "err", err)
			}
		}
	}
	k.mu.Lock()
	static := k.static
	k.mu.Unlock()
	for uid, pod := range known {
		_, isStatic := static[uid]
		// SetupPod is idempotent: the worker gets the same namespace and
		// address back on its first sync.
		k.ensureWorker(pod, isStatic, adopted[uid])
	}
	// The orphans' containers are gone: their cgroups and log directories
	// can go too.
	k.housekeeping()
}
