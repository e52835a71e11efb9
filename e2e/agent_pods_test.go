package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// webDeployment is a busybox httpd Deployment whose pods answer with their
// own name; the image comes from the imported tarball (no registry here).
func webDeployment(name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      terminationGracePeriodSeconds: 2
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: %[1]s}}}
      containers:
      - name: web
        image: busybox
        imagePullPolicy: Never
        command: [sh, -c, 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www']
        ports: [{containerPort: 8080, name: http}]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
`, name, replicas)
}

// podList is `kubectl get pods -l sel -o json`.
func (c *netCluster) pods(sel string) []corev1.Pod {
	c.t.Helper()
	var list corev1.PodList
	if err := json.Unmarshal([]byte(c.kubectlOK("get", "pods", "-l", sel, "-o", "json")), &list); err != nil {
		c.t.Fatal(err)
	}
	return list.Items
}

// waitPodsRunningReady waits until n pods match sel and all are Ready.
func (c *netCluster) waitPodsReady(sel string, n int, within time.Duration) []corev1.Pod {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		pods := c.pods(sel)
		ready := 0
		for _, p := range pods {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready++
				}
			}
		}
		if ready == n && len(pods) == n {
			return pods
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d/%d pods %s ready after %v:\n%s\n%s", ready, n, sel, within,
				c.kubectlNoFail("get", "pods", "-o", "wide", "-l", sel), c.kubectlNoFail("describe", "pods", "-l", sel))
		}
		c.checkAlive()
		time.Sleep(time.Second)
	}
}

func TestAgents_JoinAndRefusals_DeploymentSpreads_PodsReachEachOtherAcrossNodes_EgressMasqueraded(t *testing.T) {
	c := newNetCluster(t, netClusterSpec{Agents: 2, TestHost: true})
	nodes := c.waitNodesReady(3, 2*time.Minute)
	t.Logf("ready nodes: %v\n%s", nodes, c.kubectlOK("get", "nodes", "-o", "wide"))

	t.Run("refusals", func(t *testing.T) {
		tok := c.token()
		hash := strings.TrimPrefix(strings.SplitN(tok, "::", 2)[0], "K10")
		badHash := "K10" + strings.Repeat("0", len(hash)) + "::" + strings.SplitN(tok, "::", 2)[1]
		badSecret := strings.SplitN(tok, "::", 2)[0] + "::server:wrongsecret"
		for _, tc := range []struct{ name, token, want string }{
			{"wrong secret", badSecret, "refused the token"},
			{"CA hash mismatch", badHash, "does not match the token's hash"},
		} {
			dir := t.TempDir()
			cmd := exec.Command("nsenter", "--net=/run/netns/"+c.agents[0].NS, skiffBin, "agent", "--server", c.serverURL(),
				"--token", tc.token, "--data-dir", dir, "--node-name", "intruder", "--node-ip", c.agents[0].IP.String())
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("%s: err %v, output %q; want a failure saying %q", tc.name, err, out, tc.want)
			}
		}
	})

	cidrs := map[string]string{}
	wantIP := map[string]string{}
	for _, n := range c.nodes() {
		wantIP[n.Name] = n.IP.String()
	}
	for _, name := range nodes {
		var node corev1.Node
		if err := json.Unmarshal([]byte(c.kubectlOK("get", "node", name, "-o", "json")), &node); err != nil {
			t.Fatal(err)
		}
		if a := node.Status.Addresses; len(a) == 0 || a[0].Type != corev1.NodeInternalIP || a[0].Address != wantIP[name] {
			t.Fatalf("node %s addresses %v, want InternalIP %s first", name, a, wantIP[name])
		}
		for other, cidr := range cidrs {
			if cidr == node.Spec.PodCIDR {
				t.Fatalf("nodes %s and %s share podCIDR %s", name, other, cidr)
			}
		}
		cidrs[name] = node.Spec.PodCIDR
	}

	c.kubectlIn(webDeployment("web", 6), "apply", "-f", "-")
	pods := c.waitPodsReady("app=web", 6, 3*time.Minute)
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
	}
	if len(perNode) != 3 {
		t.Fatalf("6 replicas on %d nodes (%v), want all 3", len(perNode), perNode)
	}
	for _, from := range pods {
		for _, to := range pods {
			if from.Name == to.Name {
				continue
			}
			out, err := c.kubectl("exec", from.Name, "--", "timeout", "5", "wget", "-q", "-O", "-", "http://"+to.Status.PodIP+":8080/")
			if err != nil || strings.TrimSpace(out) != to.Name {
				t.Fatalf("%s (%s) → %s (%s, %s): %q, %v", from.Name, from.Spec.NodeName, to.Name, to.Spec.NodeName, to.Status.PodIP, out, err)
			}
		}
	}

	// Egress: the test host outside the cluster sees the node's address.
	for _, p := range pods[:3] {
		out, err := c.kubectl("exec", p.Name, "--", "timeout", "5", "wget", "-q", "-O", "-", c.host.OutsideURL)
		if err != nil {
			t.Fatalf("%s → test host: %v %q", p.Name, err, out)
		}
		if strings.Contains(out, p.Status.PodIP+":") || !strings.Contains(out, p.Status.HostIP+":") {
			t.Fatalf("test host saw %q from pod %s (pod IP %s, node %s): want the node's address", out, p.Name, p.Status.PodIP, p.Status.HostIP)
		}
	}
}
