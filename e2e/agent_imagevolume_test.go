package e2e

// Image volumes (KEP-4639) on a real agent, as upstream's conformance test
// "[sig-node] ImageVolume should succeed with pod and pull policy of
// Always" drives them, with the suite's imported busybox image standing in
// for the kitten image (no registry here, so pullPolicy IfNotPresent): the
// container reads the image's files at the mount path and cannot write
// there, an image that is absent with pullPolicy Never leaves the
// container waiting with ErrImageNeverPull, and the snapshot view goes
// when the pod does.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"skiff/runtime/images"
	"skiff/runtime/mountinfo"
)

const ivNS = "imagevolume"

func ivPod(name, node, ref string, policy string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %[1]s}
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 1
  volumes: [{name: volume, image: {reference: "%[3]s", pullPolicy: %[4]s}}]
  containers:
  - name: test-container
    image: busybox
    imagePullPolicy: Never
    command: [sh, -c, '%[5]s']
    volumeMounts: [{name: volume, mountPath: /volume}]
`, name, node, ref, policy, ivProbe)
}

// ivProbe is what the container reports in its log about /volume before
// it sleeps: the log, unlike exec, needs no streaming upgrade.
const ivProbe = `cat /volume/etc/group; test -x /volume/bin/busybox && echo exec-ok; ` +
	`if echo x > /volume/written; then echo write-ok; else echo write-refused; fi; ` +
	`grep " /volume " /proc/mounts; echo probe-done; while true; do sleep 1; done`

// ivViews lists the image-volume snapshot views in the node's containerd.
func ivViews(t *testing.T, n *netNode) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.New(filepath.Join(n.DataDir, "agent", "containerd", "containerd.sock"), client.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("containerd of %s: %v", n.Name, err)
	}
	defer cl.Close()
	ctx = namespaces.WithNamespace(ctx, "skiff")
	var out []string
	err = cl.SnapshotService(images.DefaultSnapshotter).Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if _, ok := info.Labels[images.ViewLabel]; ok {
			out = append(out, info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("snapshots of %s: %v", n.Name, err)
	}
	return out
}

func TestAgentImageVolume_ImportedImage_ReadOnlyFilesAtMountPath_ViewRemovedWithPod(t *testing.T) {
	c := newNetCluster(t, netClusterSpec{Agents: 1})
	c.waitNodesReady(2, 2*time.Minute)
	node := c.agents[0]
	lcKubectl(t, c, "create", "namespace", ivNS)
	manifest := ivPod("test-pod", node.Name, "busybox", "IfNotPresent") + "---\n" +
		ivPod("absent", node.Name, "registry.invalid/absent:v1", "Never")
	if out, errOut, err := c.kubectlIn(manifest, "apply", "-n", ivNS, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v: %s%s", err, out, errOut)
	}
	lcWait(t, c, 2*time.Minute, time.Second, "test-pod running", func() (bool, string) {
		p := lcPods(t, c, "-n", ivNS, "--field-selector", "metadata.name=test-pod")
		if len(p) != 1 {
			return false, "no pod"
		}
		return p[0].Status.Phase == "Running", string(p[0].Status.Phase)
	}, func() string { return c.kubectlNoFail("describe", "pods", "-n", ivNS) })

	var log string
	lcWait(t, c, time.Minute, time.Second, "the container's report on /volume", func() (bool, string) {
		log, _ = c.kubectl("logs", "-n", ivNS, "test-pod")
		return strings.Contains(log, "probe-done"), log
	})
	var mountLine string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, " /volume ") {
			mountLine = line
		}
	}
	switch {
	case !strings.Contains(log, "root:x:0:"):
		t.Fatalf("no image's /etc/group at /volume/etc/group in the log:\n%s", log)
	case !strings.Contains(log, "exec-ok"):
		t.Fatalf("/volume/bin/busybox is not the image's executable:\n%s", log)
	case !strings.Contains(log, "write-refused") || strings.Contains(log, "write-ok"):
		t.Fatalf("writing into the image volume was not refused:\n%s", log)
	case !slices.Contains(strings.Split(strings.Fields(mountLine + " x x x")[3], ","), "ro"):
		t.Fatalf("/volume mount %q, want read-only", mountLine)
	}
	t.Logf("/volume in the container: %s", mountLine)

	uid := strings.TrimSpace(lcKubectl(t, c, "get", "pod", "-n", ivNS, "test-pod", "-o", "jsonpath={.metadata.uid}"))
	target := filepath.Join(node.DataDir, "agent", "pods", uid, "volumes", "kubernetes.io~image", "volume")
	if ok, err := mountinfo.IsMountPoint(target); err != nil || !ok {
		t.Fatalf("view mount %s: mounted %v, %v", target, ok, err)
	}
	wantKey := "skiff/image-volume/" + uid + "/volume"
	if views := ivViews(t, node); len(views) != 1 || views[0] != wantKey {
		t.Fatalf("views on %s: %v, want [%s]", node.Name, views, wantKey)
	}

	lcWait(t, c, time.Minute, time.Second, "absent image with pullPolicy Never: ErrImageNeverPull", func() (bool, string) {
		p := lcPods(t, c, "-n", ivNS, "--field-selector", "metadata.name=absent")
		if len(p) != 1 || len(p[0].Status.ContainerStatuses) != 1 || p[0].Status.ContainerStatuses[0].State.Waiting == nil {
			return false, "no waiting container status"
		}
		w := p[0].Status.ContainerStatuses[0].State.Waiting
		return w.Reason == "ErrImageNeverPull" && p[0].Status.Phase == "Pending", w.Reason + ": " + w.Message
	})

	lcKubectl(t, c, "delete", "pod", "-n", ivNS, "test-pod", "absent", "--wait=true", "--timeout=60s")
	lcWait(t, c, time.Minute, time.Second, "view removed with the pod", func() (bool, string) {
		views := ivViews(t, node)
		mounted, _ := mountinfo.IsMountPoint(target)
		return len(views) == 0 && !mounted, fmt.Sprintf("views %v, mounted %v", views, mounted)
	})
}
