package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// snapshotRestoreOnFreshServer saves a snapshot of a running member's
// replica, changes the cluster after it, then restores the file into a
// fresh server's empty data directory (as after losing every box): that
// server, started with --cluster-init, serves the objects of the
// snapshot's moment and none written after it.
func (c *haCluster) snapshotRestoreOnFreshServer(t *testing.T) {
	src := c.servers[0]
	if _, err := c.kubectlVia(src, "create", "configmap", "snap-before", "--from-literal=k=v1"); err != nil {
		t.Fatal(err)
	}
	out, err := c.skiffIn(src, "snapshot", "save", "--data-dir", src.DataDir, "--node-name", src.Name)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Snapshot (\S+) saved: revision (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("snapshot save: %q, want its name and revision", out)
	}
	file := filepath.Join(src.DataDir, "server", "db", "snapshots", m[1])
	t.Logf("snapshot %s of %s at revision %s", m[1], src.Name, m[2])
	if _, err := c.kubectlVia(c.servers[1], "create", "configmap", "snap-after"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubectlVia(c.servers[2], "patch", "configmap", "snap-before", "-p", `{"data":{"k":"changed"}}`); err != nil {
		t.Fatal(err)
	}

	var fresh *netNode
	fresh = c.newNode("fresh-server", "fr", haServerOctet+8, func() []string {
		return append([]string{"server", "--data-dir", fresh.DataDir, "--advertise-address", fresh.IP.String(), "--tls-san", fresh.IP.String(),
			"--https-listen-port", fmt.Sprint(netAPIPort), "--write-kubeconfig", haKubeconfig(fresh), "--disable-agent", "--cluster-init"},
			nodeArgs(fresh)...)
	})
	restored, err := c.skiffIn(fresh, "snapshot", "restore", file, "--data-dir", fresh.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "restore on a fresh server", restored, "Restored", "revision "+m[2])
	began := time.Now()
	fresh.Start()
	defer fresh.Stop()
	c.waitReadyz(fresh, 90*time.Second)
	t.Logf("FIGURE restore: the fresh server served %v after its start", time.Since(began).Round(time.Millisecond))
	names, err := c.kubectlVia(fresh, "get", "configmaps", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(names)
	if !contains(got, "snap-before") || contains(got, "snap-after") {
		t.Fatalf("configmaps on the restored server %v: want snap-before and not snap-after", got)
	}
	for _, name := range c.acked {
		if !contains(got, name) {
			t.Errorf("acknowledged write %s from before the snapshot is missing on the restored server", name)
		}
	}
	if v, err := c.kubectlVia(fresh, "get", "configmap", "snap-before", "-o", "jsonpath={.data.k}"); err != nil || v != "v1" {
		t.Fatalf("snap-before on the restored server: k=%q %v, want the snapshot's v1", v, err)
	}
	ml, err := c.members(fresh)
	if err != nil || len(ml.Members) != 1 || ml.Members[0].Name != fresh.Name {
		t.Fatalf("members of the restored server: %+v %v, want itself alone", ml.Members, err)
	}
	if _, err := c.kubectlVia(fresh, "create", "configmap", "after-restore"); err != nil {
		t.Fatal(err)
	}
}
