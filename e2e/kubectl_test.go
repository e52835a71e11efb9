package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cluster is a running skiff server and the kubeconfig it wrote.
type cluster struct {
	proc       *proc
	kubeconfig string
	dataDir    string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	dataDir := t.TempDir()
	port := freePort(t)
	p := startServer(t, dataDir, port)
	waitHealthy(t, p, port)
	return &cluster{proc: p, kubeconfig: filepath.Join(dataDir, "kubeconfig.yaml"), dataDir: dataDir}
}

// kubectlVersions are the real kubectl builds on the machine: the default
// one and the oldest and newest installed beside it.
func kubectlVersions(t *testing.T) map[string]string {
	t.Helper()
	def, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is not installed: %v", err)
	}
	real, err := filepath.EvalSymlinks(def)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{"default": def}
	for _, v := range []string{"1.27", "1.33"} {
		bin := filepath.Join(filepath.Dir(real), "kubectl."+v)
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("kubectl %s is missing beside %s: %v", v, real, err)
		}
		out[v] = bin
	}
	return out
}

// run runs kubectl and returns stdout, stderr and the error.
func (c *cluster) run(t *testing.T, bin string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return c.runEnv(t, nil, bin, stdin, args...)
}

// runEnv runs kubectl with extra environment variables.
func (c *cluster) runEnv(t *testing.T, env []string, bin string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+c.kubeconfig), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// ok runs kubectl, which must succeed, and returns its stdout.
func (c *cluster) ok(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, errOut, err := c.run(t, bin, "", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func (c *cluster) okIn(t *testing.T, bin, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := c.run(t, bin, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("%s: want %q in:\n%s", what, w, got)
		}
	}
}

func TestKubectl_EverydayCommands_AcrossVersions(t *testing.T) {
	c := startCluster(t)
	for name, bin := range kubectlVersions(t) {
		t.Run(name, func(t *testing.T) {
			ns := "v" + strings.ReplaceAll(name, ".", "")
			c.ok(t, bin, "create", "namespace", ns)
			mustContain(t, "get ns", c.ok(t, bin, "get", "ns"), "default", "kube-system", ns, "Active")
			mustContain(t, "raw healthz", c.ok(t, bin, "get", "--raw", "/healthz"), "ok")
			mustContain(t, "api-resources", c.ok(t, bin, "api-resources"), "deployments", "apps/v1", "configmaps")
			mustContain(t, "explain", c.ok(t, bin, "explain", "pod.spec.containers"), "containers", "image")
			mustContain(t, "auth can-i", c.ok(t, bin, "auth", "can-i", "create", "pods"), "yes")

			c.ok(t, bin, "-n", ns, "create", "configmap", "c1", "--from-literal=a=1")
			if got := c.ok(t, bin, "-n", ns, "get", "cm", "c1", "-o", "jsonpath={.data.a}"); got != "1" {
				t.Fatalf("jsonpath: %q", got)
			}
			c.ok(t, bin, "-n", ns, "label", "cm", "c1", "tier=web")
			c.ok(t, bin, "-n", ns, "annotate", "cm", "c1", "note=hi")
			c.ok(t, bin, "-n", ns, "patch", "cm", "c1", "-p", `{"data":{"s":"strategic"}}`)
			c.ok(t, bin, "-n", ns, "patch", "cm", "c1", "--type=merge", "-p", `{"data":{"m":"merge"}}`)
			c.ok(t, bin, "-n", ns, "patch", "cm", "c1", "--type=json", "-p", `[{"op":"add","path":"/data/j","value":"json"}]`)
			mustContain(t, "patched", c.ok(t, bin, "-n", ns, "get", "cm", "c1", "-o", "yaml"), "s: strategic", "m: merge", "j: json", "tier: web", "note: hi")
			mustContain(t, "show-labels", c.ok(t, bin, "-n", ns, "get", "cm", "--show-labels"), "tier=web")

			manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: " + ns + "\ndata:\n  v: one\n"
			mustContain(t, "apply", c.okIn(t, bin, manifest, "apply", "-f", "-"), "configmap/applied created")
			mustContain(t, "apply again", c.okIn(t, bin, manifest, "apply", "-f", "-"), "configmap/applied unchanged")
			changed := strings.Replace(manifest, "v: one", "v: two", 1)
			diff, _, _ := c.run(t, bin, changed, "diff", "-f", "-")
			mustContain(t, "diff", diff, "-  v: one", "+  v: two")
			mustContain(t, "apply change", c.okIn(t, bin, changed, "apply", "-f", "-"), "configmap/applied configured")

			c.ok(t, bin, "-n", ns, "create", "deployment", "web", "--image=busybox", "--replicas=2")
			c.ok(t, bin, "-n", ns, "scale", "deployment", "web", "--replicas=3")
			if got := c.ok(t, bin, "-n", ns, "get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"); got != "3" {
				t.Fatalf("replicas after scale: %q", got)
			}
			wide := c.ok(t, bin, "-n", ns, "get", "deploy", "-o", "wide")
			mustContain(t, "deploy -o wide", wide, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR", "app=web")

			_, errOut, err := c.run(t, bin, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad","namespace":"`+ns+`"},"spec":{"containers":[{"name":"c"}]}}`, "create", "-f", "-")
			if err == nil || !strings.Contains(errOut, "spec.containers[0].image: Required value") {
				t.Fatalf("invalid pod: err %v, stderr %q", err, errOut)
			}
			// kubectl edit with an editor that changes one value.
			editor := filepath.Join(t.TempDir(), "editor.sh")
			os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/s: strategic/s: edited/' \"$1\"\n"), 0o755)
			if out, errOut, err := c.runEnv(t, []string{"KUBE_EDITOR=" + editor}, bin, "", "-n", ns, "edit", "cm", "c1"); err != nil {
				t.Fatalf("edit: %v\n%s%s", err, out, errOut)
			}
			mustContain(t, "after edit", c.ok(t, bin, "-n", ns, "get", "cm", "c1", "-o", "yaml"), "s: edited")
			mustContain(t, "describe", c.ok(t, bin, "-n", ns, "describe", "deployment", "web"), "Name:", "web", "Replicas:", "busybox")
			mustContain(t, "describe cm", c.ok(t, bin, "-n", ns, "describe", "cm", "c1"), "Labels:", "tier=web", "Annotations:", "note: hi")
			mustContain(t, "server-side apply", c.okIn(t, bin, strings.Replace(manifest, "name: applied", "name: ssa", 1), "apply", "--server-side", "-f", "-"), "configmap/ssa serverside-applied")
			mustContain(t, "managed fields", c.ok(t, bin, "-n", ns, "get", "cm", "ssa", "-o", "yaml", "--show-managed-fields"), "manager: kubectl", "operation: Apply")
			mustContain(t, "metrics", c.ok(t, bin, "get", "--raw", "/metrics"), "apiserver_request_total")
			c.ok(t, bin, "-n", ns, "delete", "cm", "c1")
			_, errOut, err = c.run(t, bin, "", "-n", ns, "get", "cm", "c1")
			if err == nil || !strings.Contains(errOut, `configmaps "c1" not found`) {
				t.Fatalf("get after delete: err %v, stderr %q", err, errOut)
			}
			mustContain(t, "get -A", c.ok(t, bin, "get", "cm", "-A"), ns, "applied")
		})
	}
}

func TestKubectl_GetWatch_SeesNewObjects(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "get", "cm", "-w", "-o", "jsonpath={.metadata.name}{\"\\n\"}")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(500 * time.Millisecond) // let the watch start
	c.ok(t, "kubectl", "create", "configmap", "watched")
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("kubectl get -w ended without showing the new configmap")
			}
			if l == "watched" {
				return
			}
		case <-ctx.Done():
			t.Fatal("kubectl get -w did not show the new configmap within 60s")
		}
	}
}

// ownedConfigMap creates a ConfigMap owned by owner (blocking its deletion).
func (c *cluster) ownedConfigMap(t *testing.T, ns, name, owner string) {
	t.Helper()
	uid := c.ok(t, "kubectl", "-n", ns, "get", "cm", owner, "-o", "jsonpath={.metadata.uid}")
	c.okIn(t, "kubectl", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`","namespace":"`+ns+
		`","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"`+owner+`","uid":"`+uid+`","blockOwnerDeletion":true}]}}`, "create", "-f", "-")
}

func (c *cluster) waitGone(t *testing.T, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, errOut, err := c.run(t, "kubectl", "", "-n", ns, "get", "cm", name)
		if err != nil && strings.Contains(errOut, "not found") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("configmap %s/%s still exists after 60s", ns, name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestKubectl_Delete_EachCascadeMode_AndNamespaceDeletion(t *testing.T) {
	c := startCluster(t)
	ns := "cascade"
	c.ok(t, "kubectl", "create", "namespace", ns)
	for _, mode := range []string{"background", "foreground", "orphan"} {
		owner, dep := "owner-"+mode, "dep-"+mode
		c.ok(t, "kubectl", "-n", ns, "create", "cm", owner)
		c.ownedConfigMap(t, ns, dep, owner)
		c.ok(t, "kubectl", "-n", ns, "delete", "cm", owner, "--cascade="+mode)
		c.waitGone(t, ns, owner)
		if mode == "orphan" {
			refs := c.ok(t, "kubectl", "-n", ns, "get", "cm", dep, "-o", "jsonpath={.metadata.ownerReferences}")
			if refs != "" {
				t.Fatalf("orphaned dependent still has owner references: %s", refs)
			}
			continue
		}
		c.waitGone(t, ns, dep) // the garbage collector removes it
	}
	c.ok(t, "kubectl", "delete", "namespace", ns, "--timeout=60s")
	_, errOut, err := c.run(t, "kubectl", "", "get", "namespace", ns)
	if err == nil || !strings.Contains(errOut, "not found") {
		t.Fatalf("namespace still there after delete: %v %s", err, errOut)
	}
}
