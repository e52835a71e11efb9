package e2e

// HA on an external datastore: two servers with no store of their own on a
// three-member etcd cluster, every member a lab host. The second server
// receives the cluster's CA and keys from the datastore (sealed with the
// server token by the first); agents fail over between the servers.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"skiff/internal/etcdtest"
	"skiff/server/certs"
)

const etcdHostOctet = 30 // etcd member i (from 0) is etcdHostOctet+i

// newEtcdHACluster starts a three-member etcd cluster with TLS on lab
// hosts, then n servers on it (the second and later with the first's
// token), and makes agents agent nodes without starting them.
func newEtcdHACluster(t *testing.T, n, agents int) (*haCluster, *etcdtest.Cluster) {
	t.Helper()
	c := &haCluster{netCluster: newNetCluster(t, netClusterSpec{NoServer: true, Agents: agents, DeferAgents: true})}
	var hosts []etcdtest.Host
	for i := range 3 {
		ns := c.lab.addNamespace(fmt.Sprintf("e%d", i+1), etcdHostOctet+i)
		hosts = append(hosts, etcdtest.Host{IP: c.lab.addr(etcdHostOctet + i).String(), Netns: "/run/netns/" + ns})
	}
	from := strings.TrimPrefix(hosts[0].Netns, "/run/netns/")
	etcd := etcdtest.Start(t, etcdtest.Options{TLS: true, Hosts: hosts,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) { return dialIn(ctx, from, addr) }})
	for i := range n {
		var s *netNode
		s = c.newNode(fmt.Sprintf("server-%d", i+1), fmt.Sprintf("s%d", i+1), haServerOctet+i, func() []string { return c.etcdServerArgs(s, etcd) })
		c.servers = append(c.servers, s)
	}
	c.server = c.servers[0]
	for _, s := range c.servers {
		s.Start()
		c.waitReadyz(s, 90*time.Second)
	}
	return c, etcd
}

// etcdServerArgs: control-plane-only servers on the etcd cluster (k3s's
// --datastore-* flags); all but the first are given the first's token.
func (c *haCluster) etcdServerArgs(n *netNode, etcd *etcdtest.Cluster) []string {
	args := []string{"server", "--data-dir", n.DataDir, "--advertise-address", n.IP.String(), "--tls-san", n.IP.String(),
		"--https-listen-port", fmt.Sprint(netAPIPort), "--write-kubeconfig", haKubeconfig(n), "--disable-agent",
		"--datastore-endpoint", strings.Join(etcd.Endpoints(), ","),
		"--datastore-cafile", etcd.CAFile(), "--datastore-certfile", etcd.CertFile(), "--datastore-keyfile", etcd.KeyFile()}
	args = append(args, nodeArgs(n)...)
	if n != c.servers[0] {
		args = append(args, "--token", c.serverToken(c.servers[0]))
	}
	return args
}

func TestHAEtcd_TwoServersOnThreeMemberEtcd_SharedCAKillServerAgentsFailOver(t *testing.T) {
	c, etcd := newEtcdHACluster(t, 2, 2)
	s1, s2 := c.servers[0], c.servers[1]

	// One cluster: the same CA and service-account key on both (from the
	// datastore, not made twice), and s1's admin kubeconfig works on s2.
	for _, f := range certs.SharedFiles() {
		a, errA := os.ReadFile(filepath.Join(s1.DataDir, "server", "tls", f))
		b, errB := os.ReadFile(filepath.Join(s2.DataDir, "server", "tls", f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the servers (%v, %v)", f, errA, errB)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", haKubeconfig(s1))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = fmt.Sprintf("https://%s:%d", s2.IP, netAPIPort)
	ns := s2.NS
	cfg.Dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, ns, addr) }
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("s1's admin kubeconfig against s2: %v", err)
	}

	for i, s := range c.servers {
		if _, err := c.kubectlVia(s, "create", "configmap", fmt.Sprintf("via-%d", i)); err != nil {
			t.Fatal(err)
		}
		c.acked = append(c.acked, fmt.Sprintf("via-%d", i))
	}
	c.checkAcked(s1)
	c.checkAcked(s2)
	c.waitAPIEndpoints(s2, 2)

	t.Run("WrongTokenRefused", func(t *testing.T) {
		// A third server given another token must not start a second
		// cluster on the same datastore: it stops with a clear error.
		var s3 *netNode
		s3 = c.newNode("server-3", "s3", haServerOctet+2, func() []string { return nil })
		args := c.etcdServerArgs(s3, etcd)
		args = append(args, "--token", "not-the-clusters-token")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + s3.NS, "--", skiffBin}, args...)...).CombinedOutput()
		if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "another token") {
			t.Fatalf("skiff server with a wrong token: err %v (ctx %v), want a refusal naming the token:\n%s", err, ctx.Err(), lastLines(string(out), 10))
		}
		if _, err := os.Stat(filepath.Join(s3.DataDir, "server", "tls", certs.CACertFile)); err == nil {
			t.Errorf("the refused server made a CA of its own")
		}
	})

	for _, a := range c.agents {
		a.Start()
	}
	c.waitNodesReady(2, 3*time.Minute)
	if _, _, err := c.kubectlIn(webDeployment("web", 2), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	c.waitPodsReady("app=web", 2, 2*time.Minute)

	t.Run("KillServer", func(t *testing.T) {
		// The agents talk to s1.
		c.server = s2
		s1.Kill()
		took := c.writeUntilOK(s2, "after-kill", 30*time.Second)
		t.Logf("FIGURE etcd HA: s1 killed → write through s2 after %v", took.Round(time.Millisecond))
		c.agentsSurvive(t, time.Now())
		s1.Start()
		c.waitReadyz(s1, 60*time.Second)
		c.server = s1
		n := c.sameLists(s1, s2)
		t.Logf("after the restart both servers list the same %d objects", n)
		c.checkAcked(s1)
	})

	t.Run("KillEtcdLeader", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		leader := etcd.Leader(ctx)
		if leader < 0 {
			t.Fatal("no etcd leader")
		}
		etcd.Kill(leader)
		took := c.writeUntilOK(s1, "after-etcd-kill", 30*time.Second)
		t.Logf("FIGURE etcd HA: etcd leader m%d killed → write through s1 after %v", leader, took.Round(time.Millisecond))
		c.writeUntilOK(s2, "after-etcd-kill-b", 10*time.Second)
		etcd.Restart(leader)
		c.sameLists(s1, s2)
		c.checkAcked(s1)
		c.checkAcked(s2)
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
