package kubelet

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
)

// Pod cgroups and log directories outlive the containers in them: runc
// makes a pod's cgroup (<CgroupRoot>/<qos class>/pod<uid>, see agent/qos)
// as the parent of its containers' cgroups in every hierarchy and removes
// only the containers' own; the runtime removes a container's log file, not
// the pod's log directory. The kubelet removes both when a pod is cleaned
// up, and housekeeping (after adoption and on every resync) removes those
// of pods the node no longer runs: pods deleted while the agent was down,
// or whose removal failed (a cgroup still busy).

// qosClassDirs are the class directories qos.CgroupParent puts pods in.
var qosClassDirs = []string{"guaranteed", "burstable", "besteffort"}

// cgroupHierarchies are CgroupFS itself (a cgroup v2 mount) and every
// directory in it (cgroup v1 controllers and named hierarchies, the v2
// "unified" mount of hybrid setups). Symlinks such as cpu → cpu,cpuacct are
// skipped: their target is listed.
func (k *Kubelet) cgroupHierarchies() []string {
	out := []string{k.cfg.CgroupFS}
	entries, err := os.ReadDir(k.cfg.CgroupFS)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(k.cfg.CgroupFS, e.Name()))
		}
	}
	return out
}

// removeCgroup removes the cgroup parent (a path below the hierarchy roots,
// e.g. /skiff/besteffort/pod<uid>) and any cgroup left below it, in every
// hierarchy. A cgroup with processes in it cannot be removed (EBUSY): that
// is an error, and housekeeping tries again later.
func (k *Kubelet) removeCgroup(parent string) error {
	var errs []error
	for _, h := range k.cgroupHierarchies() {
		if err := rmdirTree(filepath.Join(h, parent)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdirTree removes dir and the directories below it, deepest first, with
// rmdir only: cgroupfs directories hold control files that cannot be
// unlinked, and a directory that holds other files stays (an error).
func rmdirTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, &fs.PathError{Op: "rmdir", Path: dirs[i], Err: err})
		}
	}
	return errors.Join(errs...)
}

// podCgroups lists the pod cgroups below CgroupRoot in every hierarchy, by
// pod UID.
func (k *Kubelet) podCgroups() map[types.UID][]string {
	out := map[types.UID][]string{}
	for _, h := range k.cgroupHierarchies() {
		for _, class := range qosClassDirs {
			dir := filepath.Join(h, k.cfg.CgroupRoot, class)
			entries, err := os.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, e := range entries {
				if uid, ok := strings.CutPrefix(e.Name(), "pod"); ok && e.IsDir() && uid != "" {
					out[types.UID(uid)] = append(out[types.UID(uid)], filepath.Join(dir, e.Name()))
				}
			}
		}
	}
	return out
}

// podLogDirs lists the pod log directories (<LogDir>/<ns>_<pod>_<uid>) by
// pod UID.
func (k *Kubelet) podLogDirs() map[types.UID][]string {
	out := map[types.UID][]string{}
	entries, err := os.ReadDir(k.cfg.LogDir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		i := strings.LastIndexByte(e.Name(), '_')
		if !e.IsDir() || i < 0 || i == len(e.Name())-1 || strings.Count(e.Name(), "_") < 2 {
			continue
		}
		uid := types.UID(e.Name()[i+1:])
		out[uid] = append(out[uid], filepath.Join(k.cfg.LogDir, e.Name()))
	}
	return out
}

// activePods are the UIDs whose leftovers must stay: pods the node should
// run (API and static) and pods a worker still handles (terminating).
func (k *Kubelet) activePods() map[types.UID]bool {
	out := map[types.UID]bool{}
	for uid := range k.knownPods() {
		out[uid] = true
	}
	k.mu.Lock()
	for uid := range k.workers {
		out[uid] = true
	}
	k.mu.Unlock()
	return out
}

// housekeeping removes the cgroups and log directories of pods that are
// neither known nor handled by a worker. It lists them before it reads the
// active pods: a pod new enough to be missing from that view has no
// cgroup or log directory yet (its worker makes them).
func (k *Kubelet) housekeeping() {
	cgroups, logDirs := k.podCgroups(), k.podLogDirs()
	active := k.activePods()
	for uid, dirs := range cgroups {
		if active[uid] {
			continue
		}
		var errs []error
		for _, d := range dirs {
			if err := rmdirTree(d); err != nil {
				errs = append(errs, err)
			}
		}
		k.reportHousekeeping("cgroups/"+string(uid), "remove cgroups of a pod that is gone", uid, errors.Join(errs...))
	}
	for uid, dirs := range logDirs {
		if active[uid] {
			continue
		}
		var errs []error
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
		}
		k.reportHousekeeping("logs/"+string(uid), "remove log directory of a pod that is gone", uid, errors.Join(errs...))
	}
}

// reportHousekeeping logs a failure once per key (housekeeping retries on
// every resync) and forgets the key on success.
func (k *Kubelet) reportHousekeeping(key, msg string, uid types.UID, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil {
		delete(k.housekeepingErrs, key)
		return
	}
	if !k.housekeepingErrs[key] {
		k.housekeepingErrs[key] = true
		k.log.Warn(msg, "uid", uid, "err", err)
	}
}
