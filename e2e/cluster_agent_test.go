//go:build agente2e

// Multi-node tests that need `skiff agent` to join, which is being built:
// compiled only with -tags agente2e (not skipped: absent from the default
// run), e.g.
//
//	SKIFF_BIN=/tmp/skiff go test -tags agente2e -run TestNetnsAgents ./e2e/
package e2e

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// netNodeObject is the Node the cluster has for n.
func netNodeObject(t *testing.T, c *netCluster, n *netNode) corev1.Node {
	t.Helper()
	var node corev1.Node
	if err := json.Unmarshal([]byte(c.kubectlOK("get", "node", n.Name, "-o", "json")), &node); err != nil {
		t.Fatal(err)
	}
	return node
}

func netNodeReady(node corev1.Node) corev1.ConditionStatus {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return ""
}

func TestNetnsAgents_JoinReady_PowerOffGoesUnknown_RestartReadyAgain(t *testing.T) {
	c := newNetCluster(t, netClusterSpec{Agents: 2, TestHost: true, ServerArgs: []string{"--node-monitor-grace-period", "20s"}})
	want := len(c.agents)
	if skiffHasFlag(t, "server", "disable-agent") { // the server runs its own agent
		want++
	}
	ready := c.waitNodesReady(want, 3*time.Minute)
	cidrs := map[string]bool{}
	for _, a := range c.agents {
		if !slices.Contains(ready, a.Name) {
			t.Fatalf("agent %s not among the Ready nodes %v", a.Name, ready)
		}
		node := netNodeObject(t, c, a)
		if len(node.Status.Addresses) == 0 || node.Status.Addresses[0].Address != a.IP.String() {
			t.Fatalf("node %s addresses %v, want InternalIP %s first", a.Name, node.Status.Addresses, a.IP)
		}
		if node.Spec.PodCIDR == "" || cidrs[node.Spec.PodCIDR] {
			t.Fatalf("node %s podCIDR %q: want a distinct one", a.Name, node.Spec.PodCIDR)
		}
		cidrs[node.Spec.PodCIDR] = true
	}

	victim := c.agents[0]
	victim.PowerOff()
	deadline := time.Now().Add(90 * time.Second)
	for netNodeReady(netNodeObject(t, c, victim)) == corev1.ConditionTrue {
		if time.Now().After(deadline) {
			t.Fatalf("node %s still Ready 90s after power-off", victim.Name)
		}
		time.Sleep(2 * time.Second)
	}
	victim.Restart()
	deadline = time.Now().Add(2 * time.Minute)
	for netNodeReady(netNodeObject(t, c, victim)) != corev1.ConditionTrue {
		if time.Now().After(deadline) {
			t.Fatalf("node %s not Ready again 2m after restart", victim.Name)
		}
		time.Sleep(2 * time.Second)
	}
}
