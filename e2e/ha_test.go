package e2e

// HA: three servers on the embedded Raft store, each a lab host, driven
// through each server's own admin kubeconfig (every server writes one
// pointing at itself) and real kubectl.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"skiff/server/members"
)

const haServerOctet = 10 // server i (from 0) is haServerOctet+i

// haCluster is a netCluster whose servers are c.servers; c.server points
// at a live one (the kubectl helpers and agents use it).
type haCluster struct {
	*netCluster
	acked []string // ConfigMaps in default whose create was acknowledged
}

// newHACluster starts n servers (the first with --cluster-init, the
// others joining it with --server and its token) and makes, without
// starting them, agents agent nodes that join through the first server.
func newHACluster(t *testing.T, n, agents int) *haCluster {
	t.Helper()
	c := &haCluster{netCluster: newNetCluster(t, netClusterSpec{NoServer: true, Agents: agents, DeferAgents: true})}
	for i := range n {
		var s *netNode
		s = c.newNode(fmt.Sprintf("server-%d", i+1), fmt.Sprintf("s%d", i+1), haServerOctet+i, func() []string { return c.haServerArgs(s) })
		c.servers = append(c.servers, s)
	}
	c.server = c.servers[0]
	for _, s := range c.servers {
		s.Start()
		c.waitReadyz(s, 90*time.Second)
	}
	return c
}

// haServerArgs: control-plane-only servers (no local node), each with its
// own kubeconfig; the first starts the cluster, the others join it.
func (c *haCluster) haServerArgs(n *netNode) []string {
	args := []string{"server", "--data-dir", n.DataDir, "--advertise-address", n.IP.String(), "--tls-san", n.IP.String(),
		"--https-listen-port", fmt.Sprint(netAPIPort), "--write-kubeconfig", haKubeconfig(n), "--disable-agent"}
	args = append(args, nodeArgs(n)...)
	if n == c.servers[0] {
		return append(args, "--cluster-init")
	}
	first := c.servers[0]
	return append(args, "--server", fmt.Sprintf("https://%s:%d", first.IP, netAPIPort), "--token", c.serverToken(first))
}

func haKubeconfig(n *netNode) string { return filepath.Join(n.DataDir, "kc.yaml") }

func (c *haCluster) serverToken(n *netNode) string {
	b, err := os.ReadFile(filepath.Join(n.DataDir, "server", "token"))
	if err != nil {
		c.t.Fatalf("server token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// waitReadyz polls n's /readyz from its namespace until it answers 200.
func (c *haCluster) waitReadyz(n *netNode, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var body string
	var code int
	var err error
	for time.Now().Before(deadline) {
		body, code, err = n.Get(fmt.Sprintf("https://%s:%d/readyz", n.IP, netAPIPort), 2*time.Second)
		if err == nil && code == 200 {
			return
		}
		c.checkAlive()
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("%s /readyz not ok within %v: %d %q %v", n.Name, timeout, code, body, err)
}

// kubectlVia runs kubectl against server n (its own kubeconfig, from its
// namespace).
func (c *haCluster) kubectlVia(n *netNode, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"--net=/run/netns/" + n.NS, "--", "kubectl", "--kubeconfig", haKubeconfig(n)}, args...)
	out, err := exec.CommandContext(ctx, "nsenter", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s via %s: %w: %s", strings.Join(args, " "), n.Name, err, out)
	}
	return string(out), nil
}

// clientVia is client-go against server n, with a request timeout.
func (c *haCluster) clientVia(n *netNode, timeout time.Duration) (kubernetes.Interface, dynamic.Interface, discovery.DiscoveryInterface) {
	c.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", haKubeconfig(n))
	if err != nil {
		c.t.Fatal(err)
	}
	ns := n.NS
	cfg.Dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, ns, addr) }
	cfg.Timeout = timeout
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return cs, dyn, cs.Discovery()
}

// write creates ConfigMap name through server n, once (no client
// retries: the test sees the server's first answer), and remembers it if
// acknowledged.
func (c *haCluster) write(n *netNode, name string, timeout time.Duration) error {
	cs, _, _ := c.clientVia(n, timeout)
	body, _ := json.Marshal(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"written-via": n.Name}})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := cs.CoreV1().RESTClient().Post().Namespace("default").Resource("configmaps").
		SetHeader("Content-Type", "application/json").Body(body).MaxRetries(0).Do(ctx).Error()
	if err == nil {
		c.acked = append(c.acked, name)
	}
	return err
}

// writeUntilOK writes fresh ConfigMaps through n until one is
// acknowledged and returns how long that took.
func (c *haCluster) writeUntilOK(n *netNode, prefix string, within time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	var err error
	for i := 0; time.Since(start) < within; i++ {
		if err = c.write(n, fmt.Sprintf("%s-%d", prefix, i), 3*time.Second); err == nil {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no write through %s acknowledged within %v: last %v", n.Name, within, err)
	return 0
}

// members is the member list as server n gives it.
func (c *haCluster) members(n *netNode) (members.MemberList, error) {
	cs, _, _ := c.clientVia(n, 10*time.Second)
	var ml members.MemberList
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath(members.Path).Do(context.Background()).Raw()
	if err != nil {
		return ml, err
	}
	return ml, json.Unmarshal(raw, &ml)
}

// leader waits until server via names one leader among the servers and
// returns it.
func (c *haCluster) leader(via *netNode, within time.Duration) *netNode {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		ml, err := c.members(via)
		if err == nil {
			var leaders []string
			for _, m := range ml.Members {
				if m.Leader {
					leaders = append(leaders, m.Name)
				}
			}
			if len(leaders) == 1 {
				for _, s := range c.servers {
					if s.Name == leaders[0] {
						return s
					}
				}
			}
			last = fmt.Sprintf("%+v", ml.Members)
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("no single leader via %s within %v: %s", via.Name, within, last)
	return nil
}

// fullList is every listable resource as server n lists it (a quorum
// read), as "resource namespace/name@resourceVersion" lines, sorted.
// Leases and Events are left out: they change all the time.
func (c *haCluster) fullList(n *netNode) ([]string, error) {
	_, dyn, disc := c.clientVia(n, 20*time.Second)
	lists, err := disc.ServerPreferredResources()
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Name == "leases" || r.Name == "events" ||
				gv.Group == "metrics.k8s.io" {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", r.Name, err)
			}
			for _, it := range items.Items {
				out = append(out, fmt.Sprintf("%s.%s %s/%s@%s", r.Name, gv.Group, it.GetNamespace(), it.GetName(), it.GetResourceVersion()))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// sameLists waits until every live server lists the same objects at the
// same resourceVersions (controllers may be writing between two lists,
// so a few tries are allowed).
func (c *haCluster) sameLists(servers ...*netNode) int {
	c.t.Helper()
	var diff string
	for range 10 {
		var first []string
		diff = ""
		for i, s := range servers {
			l, err := c.fullList(s)
			if err != nil {
				diff = err.Error()
				break
			}
			if i == 0 {
				first = l
				continue
			}
			if !slices.Equal(first, l) {
				diff = fmt.Sprintf("%s and %s differ: %d vs %d objects; first difference %s", servers[0].Name, s.Name, len(first), len(l), firstDifference(first, l))
				break
			}
		}
		if diff == "" {
			return len(first)
		}
		time.Sleep(time.Second)
	}
	c.t.Fatalf("the servers' full lists never agreed: %s", diff)
	return 0
}

func firstDifference(a, b []string) string {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("%q vs %q", x, y)
		}
	}
	return "none"
}

// checkAcked fails unless every acknowledged ConfigMap is there through n.
func (c *haCluster) checkAcked(n *netNode) {
	c.t.Helper()
	cs, _, _ := c.clientVia(n, 20*time.Second)
	list, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatalf("list configmaps via %s: %v", n.Name, err)
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	for _, name := range c.acked {
		if !have[name] {
			c.t.Errorf("acknowledged write %s is missing via %s", name, n.Name)
		}
	}
}

// others are the servers other than n.
func (c *haCluster) others(n *netNode) []*netNode {
	var out []*netNode
	for _, s := range c.servers {
		if s != n {
			out = append(out, s)
		}
	}
	return out
}

// refusesWrites checks a write through n fails with 503 (the store has
// no quorum) within bound, and that its /readyz fails its store check.
func (c *haCluster) refusesWrites(n *netNode, name string, bound time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	err := c.write(n, name, bound)
	took := time.Since(start)
	if err == nil {
		c.t.Fatalf("a write through %s without quorum was acknowledged", n.Name)
	}
	if !apierrors.IsServiceUnavailable(err) {
		c.t.Errorf("write through %s without quorum: %v, want 503 ServiceUnavailable", n.Name, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		body, code, err := n.Get(fmt.Sprintf("https://%s:%d/readyz?verbose", n.IP, netAPIPort), 5*time.Second)
		if err == nil && code != 200 && strings.Contains(body, "etcd failed") {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s /readyz without quorum: %d %q %v, want its etcd check failing", n.Name, code, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return took
}

func TestHA_ThreeServers_FailoverPartitionQuorumLossAndAgents(t *testing.T) {
	c := newHACluster(t, 3, 2)
	s1 := c.servers[0]

	// kubectl through every server: a write through one is read through
	// the others.
	for i, s := range c.servers {
		if _, err := c.kubectlVia(s, "create", "configmap", fmt.Sprintf("via-%d", i)); err != nil {
			t.Fatal(err)
		}
		c.acked = append(c.acked, fmt.Sprintf("via-%d", i))
	}
	for _, s := range c.servers {
		out, err := c.kubectlVia(s, "get", "configmaps", "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.servers {
			if !strings.Contains(out, fmt.Sprintf("configmap/via-%d\n", i)) {
				t.Errorf("via %s: configmap via-%d missing:\n%s", s.Name, i, out)
			}
		}
	}
	ml, err := c.members(c.servers[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 3 {
		t.Fatalf("members = %+v, want 3", ml.Members)
	}
	// The kubernetes Service lists every server (agents learn them there).
	c.waitAPIEndpoints(s1, 3)

	// Agents join through the first server, run pods.
	for _, a := range c.agents {
		a.Start()
	}
	c.waitNodesReady(2, 3*time.Minute)
	if _, _, err := c.kubectlIn(webDeployment("web", 2), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	c.waitPodsReady("app=web", 2, 2*time.Minute)

	t.Run("KillLeader", func(t *testing.T) {
		leader := c.leader(s1, 10*time.Second)
		others := c.others(leader)
		c.server = others[0]
		leader.Kill()
		took := c.writeUntilOK(others[0], "after-kill", 30*time.Second)
		t.Logf("FIGURE failover: %s (leader) killed → first acknowledged write through %s after %v", leader.Name, others[0].Name, took.Round(time.Millisecond))
		c.writeUntilOK(others[1], "after-kill-b", 10*time.Second)
		if leader != s1 {
			// The agents talk to s1: take it down too, once the killed
			// leader is back.
			leader.Start()
			c.waitReadyz(leader, 60*time.Second)
			t.Logf("the first leader was %s, not %s: killing %s for the agents' part", leader.Name, s1.Name, s1.Name)
			c.server = leader
			s1.Kill()
		}
		c.agentsSurvive(t, time.Now())
		s1.Start()
		c.waitReadyz(s1, 60*time.Second)
		if leader != s1 && !leader.Running() {
			leader.Start()
			c.waitReadyz(leader, 60*time.Second)
		}
		c.server = s1
		n := c.sameLists(c.servers...)
		t.Logf("after the restart all 3 servers list the same %d objects", n)
		c.checkAcked(s1)
	})

	t.Run("PartitionLeader", func(t *testing.T) {
		leader := c.leader(s1, 10*time.Second)
		others := c.others(leader)
		c.server = others[0]
		leader.CutLink()
		took := c.refusesWrites(leader, "cut-off", 30*time.Second)
		t.Logf("FIGURE partition: a write through the cut-off leader %s failed after %v", leader.Name, took.Round(time.Millisecond))
		took = c.writeUntilOK(others[0], "majority", 30*time.Second)
		t.Logf("FIGURE partition: the majority acknowledged a write %v after the refusal", took.Round(time.Millisecond))
		leader.RestoreLink()
		// The old leader steps down and catches up: it agrees on the one
		// leader and serves the majority's writes.
		if got, want := c.leader(leader, 30*time.Second), c.leader(others[0], 10*time.Second); got != want {
			t.Errorf("after the heal %s names leader %s, %s names %s", leader.Name, got.Name, others[0].Name, want.Name)
		}
		c.writeUntilOK(leader, "healed", 30*time.Second)
		c.server = s1
		c.sameLists(c.servers...)
		for _, s := range c.servers {
			c.checkAcked(s)
		}
	})

	t.Run("Linearizable", func(t *testing.T) {
		c.linearizableThroughServers(t)
		c.server = s1
		c.sameLists(c.servers...)
		for _, s := range c.servers {
			c.checkAcked(s)
		}
	})

	t.Run("SnapshotRestoreOnFreshServer", c.snapshotRestoreOnFreshServer)

	t.Run("QuorumLossAndClusterReset", func(t *testing.T) {
		survivor := c.servers[2]
		for _, s := range c.others(survivor) {
			s.Kill()
		}
		c.server = survivor
		took := c.refusesWrites(survivor, "no-quorum", 30*time.Second)
		t.Logf("FIGURE quorum loss: a write through the survivor failed with 503 after %v", took.Round(time.Millisecond))
		survivor.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args := append(c.haServerArgs(survivor), "--cluster-reset")
		out, err := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + survivor.NS, "--", skiffBin}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("skiff server --cluster-reset: %v\n%s", err, out)
		}
		survivor.Start()
		c.waitReadyz(survivor, 60*time.Second)
		ml, err := c.members(survivor)
		if err != nil || len(ml.Members) != 1 || !ml.Members[0].Leader {
			t.Fatalf("members after --cluster-reset = %+v %v, want one, leading", ml.Members, err)
		}
		c.checkAcked(survivor)
		c.writeUntilOK(survivor, "after-reset", 10*time.Second)
	})
}

// waitAPIEndpoints waits until default/kubernetes, read through via,
// lists n servers (agents learn them there).
func (c *haCluster) waitAPIEndpoints(via *netNode, n int) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.kubectlVia(via, "get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[*].addresses[*].ip}")
		if err == nil && len(strings.Fields(out)) == n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("default/kubernetes endpoints = %q %v, want %d servers", out, err, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// agentsSurvive checks, after the agents' server went down at downAt,
// that both agent nodes keep renewing their Leases through another
// server, stay Ready, keep their pods, and that new pods still start.
func (c *haCluster) agentsSurvive(t *testing.T, downAt time.Time) {
	t.Helper()
	cs, _, _ := c.clientVia(c.server, 10*time.Second)
	for _, a := range c.agents {
		deadline := time.Now().Add(60 * time.Second)
		for {
			l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), a.Name, metav1.GetOptions{})
			if err == nil && renewedAfter(l, downAt) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s's Lease not renewed within 60 s of its server going down: %v %v", a.Name, leaseRenew(l), err)
			}
			c.checkAlive()
			time.Sleep(500 * time.Millisecond)
		}
	}
	if ready, err := c.readyNodes(); err != nil || len(ready) != 2 {
		t.Fatalf("Ready nodes after the server went down: %v %v", ready, err)
	}
	c.waitPodsReady("app=web", 2, 30*time.Second)
	c.kubectlOK("scale", "deployment", "web", "--replicas", "4")
	c.waitPodsReady("app=web", 4, 2*time.Minute)
}

func renewedAfter(l *coordinationv1.Lease, t time.Time) bool {
	return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(t)
}

func leaseRenew(l *coordinationv1.Lease) any {
	if l == nil || l.Spec.RenewTime == nil {
		return nil
	}
	return l.Spec.RenewTime.Time
}
