package kubelet

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// fakeCgroup makes the cgroup of pod uid (with one container cgroup in it)
// in the hierarchies memory and cpu of the harness's CgroupFS, as runc
// does, and returns the pod cgroup paths.
func fakeCgroup(t *testing.T, h *harness, uid string) []string {
	t.Helper()
	var out []string
	for _, hier := range []string{"memory", "cpu"} {
		pod := filepath.Join(h.cfg.CgroupFS, hier, "skiff", "besteffort", "pod"+uid)
		if err := os.MkdirAll(filepath.Join(pod, "ctr-"+uid), 0o755); err != nil {
			t.Fatal(err)
		}
		out = append(out, pod)
	}
	return out
}

func fakeLogDir(t *testing.T, h *harness, name, uid string) string {
	t.Helper()
	dir := filepath.Join(h.cfg.LogDir, "default_"+name+"_"+uid)
	if err := os.MkdirAll(filepath.Join(dir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app", "0.log"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func allGone(paths []string) bool {
	for _, p := range paths {
		if exists(p) {
			return false
		}
	}
	return true
}

func TestDeletedPodLeavesNoCgroup(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.create(testPod("del", corev1.RestartPolicyAlways, "app"))
	h.running("del", "app", 0)
	cgs := fakeCgroup(t, h, "uid-del")
	deleting(h, "del", 0)
	h.waitFor("pod object gone", func() bool { return h.get("del") == nil })
	if !allGone(cgs) {
		t.Fatalf("pod cgroups left after deletion: %v", cgs)
	}
	if !exists(filepath.Dir(cgs[0])) {
		t.Fatal("the QoS class cgroup was removed with the pod's")
	}
}

func TestRestartRemovesCgroupsAndLogDirsOfPodsThatAreGone(t *testing.T) {
	h := newHarness(t)
	keep := testPod("keep", corev1.RestartPolicyAlways, "app")
	h.create(keep)
	keepCgs := fakeCgroup(t, h, "uid-keep")
	keepLogs := fakeLogDir(t, h, "keep", "uid-keep")
	ghostCgs := fakeCgroup(t, h, "uid-ghost")
	ghostLogs := fakeLogDir(t, h, "ghost", "uid-ghost")
	// Not a pod log directory: stays.
	other := filepath.Join(h.cfg.LogDir, "notapod")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.waitFor("ghost's cgroups and logs removed", func() bool { return allGone(append(ghostCgs, ghostLogs)) })
	h.running("keep", "app", 0)
	for _, p := range append(keepCgs, keepLogs, other) {
		if !exists(p) {
			t.Fatalf("%s removed, but its pod still runs", p)
		}
	}
}

func TestBusyCgroupOfGonePodIsRemovedOnALaterResync(t *testing.T) {
	h := newHarness(t)
	cgs := fakeCgroup(t, h, "uid-busy")
	// A file stands for a process still in the cgroup: rmdir fails.
	busy := filepath.Join(cgs[0], "ctr-uid-busy", "task")
	if err := os.WriteFile(busy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.waitFor("the free cgroup removed", func() bool { return !exists(cgs[1]) })
	if !exists(cgs[0]) {
		t.Fatal("busy cgroup removed")
	}
	if err := os.Remove(busy); err != nil {
		t.Fatal(err)
	}
	h.stepUntil("busy cgroup removed once free", h.k.cfg.ResyncInterval, func() bool { return !exists(cgs[0]) })
}
