package kubelet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/runtime/containers"
	"skiff/runtime/podnet"
)

const staticManifest = `apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  labels: {tier: control-plane}
spec:
  containers:
  - name: main
    image: busybox:1.36
`

func TestStaticPodRunsWithMirrorPod(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "etcd.yaml")
	if err := os.WriteFile(manifest, []byte(staticManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	h.cfg.StaticPodDir = dir
	h.start()
	first := h.running("etcd-node-a", "main", 0)
	pods := h.client.CoreV1().Pods("kube-system")
	var mirror *corev1.Pod
	h.waitFor("mirror pod with Running status", func() bool {
		m, err := pods.Get(context.Background(), "etcd-node-a", metav1.GetOptions{})
		mirror = m
		return err == nil && m.Status.Phase == corev1.PodRunning
	})
	hash := mirror.Annotations[annotationMirror]
	if hash == "" || hash != first.PodUID || mirror.Annotations[annotationSource] != "file" || mirror.Labels["tier"] != "control-plane" {
		t.Fatalf("mirror metadata = %+v", mirror.ObjectMeta)
	}
	if or := mirror.OwnerReferences; len(or) != 1 || or[0].Kind != "Node" || or[0].Name != testNode || or[0].UID != "node-uid" {
		t.Fatalf("owner references = %+v", or)
	}
	if mirror.Spec.NodeName != testNode {
		t.Fatalf("mirror nodeName = %q", mirror.Spec.NodeName)
	}

	// A deleted mirror pod comes back; the static pod keeps running.
	if err := pods.Delete(context.Background(), "etcd-node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.stepUntil("mirror re-created", 5*time.Second, func() bool {
		m, err := pods.Get(context.Background(), "etcd-node-a", metav1.GetOptions{})
		return err == nil && m.Annotations[annotationMirror] == hash
	})
	if c := h.rt.find("etcd-node-a", "main"); c.ID != first.ID || c.State != containers.StateRunning {
		t.Fatal("deleting the mirror pod restarted the static pod")
	}

	// A removed manifest stops the pod and deletes the mirror.
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	h.stepUntil("static pod stopped and mirror gone", 5*time.Second, func() bool {
		_, err := pods.Get(context.Background(), "etcd-node-a", metav1.GetOptions{})
		return err != nil && h.rt.count() == 0 && !h.net.has(first.PodUID)
	})
	if len(h.log.matching("stop etcd-node-a/main#0")) != 1 {
		t.Fatalf("calls %v", h.log.all())
	}
}

func TestStaticPodUIDIsStableAndNodeSpecific(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(staticManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	uid := func(node string) string {
		k := &Kubelet{cfg: Config{NodeName: node}, clock: h0clock()}
		p, err := k.parseStaticPod(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(p.UID)
	}
	if uid("a") != uid("a") || uid("a") == uid("b") || len(uid("a")) != 32 {
		t.Fatalf("uids %s %s", uid("a"), uid("b"))
	}
}

func TestRestartAdoptsContainersAndRemovesOrphans(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	keep := testPod("keep", corev1.RestartPolicyAlways, "app")
	keep.Status.Phase = corev1.PodRunning
	done := testPod("done", corev1.RestartPolicyNever, "job")
	h.create(keep)
	h.create(done)
	ctr := func(id, pod, name string, attempt uint32, state containers.State) containers.ContainerStatus {
		return containers.ContainerStatus{ID: id, PodUID: "uid-" + pod, PodNamespace: "default", PodName: pod, Name: name,
			Attempt: attempt, State: state, StartedAt: now, FinishedAt: now, Image: "busybox", ImageID: "sha256:busybox",
			LogPath: filepath.Join(h.cfg.LogDir, "x", name, "log")}
	}
	h.rt.add(ctr("old1", "keep", "app", 1, containers.StateExited))
	h.rt.add(ctr("old2", "keep", "app", 2, containers.StateRunning))
	h.rt.add(ctr("job0", "done", "job", 0, containers.StateExited))
	h.rt.add(ctr("ghost0", "ghost", "app", 0, containers.StateRunning))
	for _, uid := range []string{"uid-keep", "uid-ghost"} {
		h.net.pods[uid] = podnet.PodNetwork{UID: uid, NetNSPath: "/run/skiff/netns/" + uid, IP: net.IPv4(10, 42, 0, 2)}
		h.vol.disk[uid] = true
	}
	h.start()
	h.waitFor("orphans removed", func() bool {
		return len(h.log.matching("remove ghost/app#0")) == 1 && !h.net.has("uid-ghost") && !h.vol.has("uid-ghost")
	})
	if got := h.log.matching("stop ghost/app#0"); len(got) != 1 {
		t.Fatalf("orphan not stopped: %v", h.log.all())
	}
	h.waitFor("adopted status", func() bool {
		cs := h.cstatus("keep", "app")
		return cs != nil && cs.RestartCount == 2 && cs.State.Running != nil && cs.ContainerID == "containerd://old2" &&
			cs.LastTerminationState.Terminated != nil
	})
	h.waitFor("finished pod reported", func() bool { return h.phase("done") == corev1.PodSucceeded })
	if got := h.log.matching("create "); len(got) != 0 {
		t.Fatalf("adoption created containers: %v", got)
	}
	if ref, err := h.k.Container("default", "keep", "app", true); err != nil || ref.ID != "old1" {
		t.Fatalf("previous after adoption = %+v, %v", ref, err)
	}
	// The next restart continues the attempts.
	h.rt.exit("old2", 1, "")
	h.running("keep", "app", 3)
	if !h.net.has("uid-keep") {
		t.Fatal("adopted pod lost its network")
	}
}
