package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// debianContainerdDir is where startDebianContainerd keeps a daemon's
// files; its socket is <dir>/c.sock.
func debianContainerdDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctd")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// startDebianContainerd runs the machine's containerd 1.6 (Debian's
// package) in a node's network namespace with its own config, root, state
// and sockets, as a user's existing runtime for
// --container-runtime-endpoint; it is killed at the end of the test. It
// must share the node's namespace: hostNetwork containers get the
// namespace of the shim, which the daemon starts.
func startDebianContainerd(t *testing.T, netns, dir string) string {
	t.Helper()
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatalf("Debian's containerd is not installed (make test installs it): %v", err)
	}
	sock := filepath.Join(dir, "c.sock")
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", filepath.Join(dir, "config.toml"))
	if netns != "" { // "" keeps the test's own namespace
		cmd = exec.Command("nsenter", "--net=/run/netns/"+netns, bin, "-c", filepath.Join(dir, "config.toml"))
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Debian's own shim must be found first: /usr/bin ahead of anything else.
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/usr/sbin:/bin:/sbin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		logf.Close()
		// The shims of the test's pods (and their containers) outlive the
		// daemon: stop them too.
		killShims(sock)
		exec.Command("umount", "-R", filepath.Join(dir, "state")).Run()
		os.RemoveAll(dir)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Fatalf("containerd did not start: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killShims SIGKILLs the runc shims serving the containerd at sock and
// the container processes they started.
func killShims(sock string) {
	out, _ := exec.Command("pgrep", "-f", "containerd-shim-runc-v2 .*-address "+sock+"$").Output()
	for _, pid := range strings.Fields(string(out)) {
		exec.Command("pkill", "-9", "-P", pid).Run()
		exec.Command("kill", "-9", pid).Run()
	}
}

const staticPodManifest = `apiVersion: v1
kind: Pod
metadata: {name: static-web, namespace: default, labels: {app: static-web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox
    imagePullPolicy: Never
    command: [sh, -c, 'echo static > /tmp/ok; exec sleep 3600']
`

func TestAgentNode_ExistingContainerd_StaticPodMirrored_HostNetworkPodGetsNodeIP(t *testing.T) {
	ctdDir := debianContainerdDir(t)
	c := newNetCluster(t, netClusterSpec{Agents: 1, DeferAgents: true, AgentArgs: []string{"--container-runtime-endpoint", "unix://" + filepath.Join(ctdDir, "c.sock")}})
	a := c.agents[0]
	startDebianContainerd(t, a.NS, ctdDir)
	manifests := filepath.Join(a.DataDir, "agent", "pod-manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(manifests, "static-web.yaml"), []byte(staticPodManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Start()
	c.waitNodesReady(2, 2*time.Minute)

	var node corev1.Node
	if err := json.Unmarshal([]byte(c.kubectlOK("get", "node", a.Name, "-o", "json")), &node); err != nil {
		t.Fatal(err)
	}
	if v := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(v, "containerd://1.") {
		t.Fatalf("agent on Debian's containerd reports runtime %q, want containerd://1.x", v)
	}

	mirror := "static-web-" + a.Name
	pods := c.waitPodsReady("app=static-web", 1, 2*time.Minute)
	p := pods[0]
	if p.Name != mirror || p.Annotations["kubernetes.io/config.mirror"] == "" || p.Spec.NodeName != a.Name {
		t.Fatalf("mirror pod %s on %s annotations %v: want %s on %s with kubernetes.io/config.mirror", p.Name, p.Spec.NodeName, p.Annotations, mirror, a.Name)
	}
	if out := c.kubectlOK("exec", mirror, "--", "cat", "/tmp/ok"); strings.TrimSpace(out) != "static" {
		t.Fatalf("exec in the static pod: %q", out)
	}
	// The mirror is only a reflection: deleting it brings it back while
	// the pod itself keeps running (same container, no restart).
	started := p.Status.ContainerStatuses[0].ContainerID
	c.kubectlOK("delete", "pod", mirror, "--wait=false")
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := c.kubectl("get", "pod", mirror, "-o", "json")
		var back corev1.Pod
		if err == nil && json.Unmarshal([]byte(out), &back) == nil && back.UID != p.UID && back.DeletionTimestamp == nil &&
			len(back.Status.ContainerStatuses) == 1 && back.Status.ContainerStatuses[0].ContainerID != "" {
			if got := back.Status.ContainerStatuses[0].ContainerID; got != started {
				t.Fatalf("static pod's container changed from %s to %s when its mirror was deleted", started, got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror pod not recreated: %v %s", err, out)
		}
		time.Sleep(time.Second)
	}

	c.kubectlIn(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hostnet, labels: {app: hostnet}}
spec:
  nodeName: %s
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: busybox, imagePullPolicy: Never, command: [sleep, "3600"]}]
`, a.Name), "apply", "-f", "-")
	hp := c.waitPodsReady("app=hostnet", 1, 2*time.Minute)[0]
	if hp.Status.PodIP != a.IP.String() {
		t.Fatalf("hostNetwork pod IP %s, want the node's %s", hp.Status.PodIP, a.IP)
	}
	if out := c.kubectlOK("exec", "hostnet", "--", "ip", "addr", "show", "eth0"); !strings.Contains(out, a.IP.String()+"/") {
		t.Fatalf("hostNetwork pod does not see the node's eth0 (%s): %s", a.IP, out)
	}
}

func TestAgentNode_HostGWBackend_PodsReachAcrossNodes_AttachFeedsStdin(t *testing.T) {
	gw := []string{"--network-backend", "host-gw"}
	c := newNetCluster(t, netClusterSpec{Agents: 1, ServerArgs: gw, AgentArgs: gw})
	c.waitNodesReady(2, 2*time.Minute)
	c.kubectlIn(webDeployment("gw", 2), "apply", "-f", "-")
	pods := c.waitPodsReady("app=gw", 2, 2*time.Minute)
	if pods[0].Spec.NodeName == pods[1].Spec.NodeName {
		t.Fatalf("both replicas on %s: want one per node", pods[0].Spec.NodeName)
	}
	for i, from := range pods {
		to := pods[1-i]
		out, err := c.kubectl("exec", from.Name, "--", "timeout", "5", "wget", "-q", "-O", "-", "http://"+to.Status.PodIP+":8080/")
		if err != nil || strings.TrimSpace(out) != to.Name {
			t.Fatalf("host-gw: %s on %s → %s on %s (%s): %q, %v", from.Name, from.Spec.NodeName, to.Name, to.Spec.NodeName, to.Status.PodIP, out, err)
		}
	}

	// kubectl attach -i feeds the main process's stdin and shows its
	// output; with stdinOnce the container's stdin closes when it detaches.
	c.kubectlIn(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: attach, labels: {app: attach}}
spec:
  nodeName: %s
  restartPolicy: Never
  containers: [{name: c, image: busybox, imagePullPolicy: Never, command: [sh], stdin: true, stdinOnce: true}]
`, c.agents[0].Name), "apply", "-f", "-")
	deadline := time.Now().Add(time.Minute)
	for strings.TrimSpace(c.kubectlNoFail("get", "pod", "attach", "-o", "jsonpath={.status.phase}")) != "Running" {
		if time.Now().After(deadline) {
			t.Fatalf("attach pod not Running: %s", c.kubectlNoFail("describe", "pod", "attach"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	out, _, err := c.kubectlIn("echo attached-$((2+3))\nexit 0\n", "attach", "-i", "attach", "-c", "c")
	if !strings.Contains(out, "attached-5") {
		t.Fatalf("kubectl attach -i: output %q, err %v; want the shell's answer attached-5", out, err)
	}
	deadline = time.Now().Add(time.Minute)
	for {
		phase := strings.TrimSpace(c.kubectlNoFail("get", "pod", "attach", "-o", "jsonpath={.status.phase}"))
		if phase == "Succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attached shell did not exit 0 after `exit 0` (phase %q)", phase)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
