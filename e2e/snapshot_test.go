package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// skiffOK runs a short skiff command, which must succeed, and returns its
// output.
func skiffOK(t *testing.T, args ...string) string {
	t.Helper()
	p := start(t, args...)
	if err := p.wait(t, 60*time.Second); err != nil {
		t.Fatalf("skiff %s: exit %s\n%s", strings.Join(args, " "), exitCode(err), p.output())
	}
	return p.output()
}

// skiffFails runs a short skiff command, which must fail, and returns its
// output.
func skiffFails(t *testing.T, args ...string) string {
	t.Helper()
	p := start(t, args...)
	if err := p.wait(t, 60*time.Second); err == nil {
		t.Fatalf("skiff %s succeeded, want a failure\n%s", strings.Join(args, " "), p.output())
	}
	return p.output()
}

func configMapNames(t *testing.T, c *cluster) string {
	t.Helper()
	return c.ok(t, "kubectl", "get", "configmaps", "-n", "default", "-o", "jsonpath={.items[*].metadata.name}")
}

func TestSnapshot_SaveWhileRunning_RestoreOffline_BringsBackThatMoment(t *testing.T) {
	c := startCluster(t)
	dd := []string{"--data-dir", c.dataDir}
	c.ok(t, "kubectl", "create", "configmap", "before-1", "--from-literal=k=v1")
	c.ok(t, "kubectl", "create", "configmap", "before-2", "--from-literal=k=v2")

	out := skiffOK(t, append([]string{"snapshot", "save", "--node-name", "e2e"}, dd...)...)
	m := regexp.MustCompile(`Snapshot (on-demand-e2e-\d+) saved`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("save output %q: want the snapshot's name", out)
	}
	name := m[1]
	ls := skiffOK(t, append([]string{"snapshot", "ls"}, dd...)...)
	mustContain(t, "snapshot ls", ls, "NAME", "SIZE", "CREATED", "REVISION", name)

	// After the snapshot: one object more, one less, one changed.
	c.ok(t, "kubectl", "create", "configmap", "after-1", "--from-literal=k=v")
	c.ok(t, "kubectl", "delete", "configmap", "before-2")
	c.ok(t, "kubectl", "patch", "configmap", "before-1", "-p", `{"data":{"k":"changed"}}`)

	fails := skiffFails(t, append([]string{"snapshot", "restore", name}, dd...)...)
	mustContain(t, "restore while the server runs", fails, "stop the server first")

	if err := c.proc.stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("server exit: %v", err)
	}
	restored := skiffOK(t, append([]string{"snapshot", "restore", name}, dd...)...)
	mustContain(t, "restore output", restored, "Restored", "before-restore-")

	port := freePort(t)
	c.proc = startServer(t, c.dataDir, port)
	waitHealthy(t, c.proc, port)
	got := strings.Fields(configMapNames(t, c))
	want := map[string]bool{"before-1": true, "before-2": true, "after-1": false}
	for n, present := range want {
		if has := contains(got, n); has != present {
			t.Fatalf("after restore, configmaps %v: %s present = %v, want %v", got, n, has, present)
		}
	}
	if v := c.ok(t, "kubectl", "get", "configmap", "before-1", "-o", "jsonpath={.data.k}"); v != "v1" {
		t.Fatalf("before-1 after restore has k=%q, want the snapshot's v1", v)
	}
	// The store takes writes again, and the old database was kept.
	c.ok(t, "kubectl", "create", "configmap", "after-restore")
	matches, _ := filepath.Glob(filepath.Join(c.dataDir, "server", "db", "state.db.before-restore-*"))
	if len(matches) == 0 {
		t.Fatal("the database before the restore was not kept")
	}
}

func TestSnapshot_SecondServerOnSameDataDir_FailsClearly(t *testing.T) {
	c := startCluster(t)
	port := freePort(t)
	p := startServer(t, c.dataDir, port)
	if err := p.wait(t, 60*time.Second); err == nil || !strings.Contains(p.output(), "data directory in use") {
		t.Fatalf("second server: exit %s, output %q, want 'data directory in use'", exitCode(err), p.output())
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
