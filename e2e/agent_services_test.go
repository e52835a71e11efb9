package e2e

// Services and cluster DNS on real agents (issue 6), driven as a user
// would with kubectl 1.27 and 1.33: ClusterIP by name from a pod, NodePort
// and LoadBalancer from the test host outside the cluster, the traffic
// policies, rejection without endpoints, the periodic resync repairing
// rules deleted by hand, and the DNS records pods see. One cluster serves
// every step (starting one costs more than all the steps together).

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	// svcNS is the namespace of every object of the test: not "default",
	// so that the names and search paths prove the namespace is used.
	svcNS = "shop"
	// svcNodeA runs the client pod and the single whoami pod; the server
	// and agent-2 have no whoami endpoint.
	svcNodeA = "agent-1"
	// svcSyncPeriod is the proxy's full-resync period on every node: short,
	// so that the repair of hand-deleted rules is seen within seconds.
	svcSyncPeriod = 5 * time.Second
	// svcClusterCIDR is the default pod range (masqueraded sources may be
	// a node's address on the pod network).
	svcClusterCIDR = "10.42.0.0/16"
	// svcClusterDNS is where every node serves cluster DNS.
	svcClusterDNS = "10.43.0.10"
)

// svcManifests are the objects applied at once (so their waits overlap),
// besides the web and solo Deployments (webDeployment: pods answer their
// name on 8080). whoami answers the client's source address (busybox
// httpd CGI) from one pod on svcNodeA; client is the pod requests start
// from, also on svcNodeA.
const svcManifests = `apiVersion: apps/v1
kind: Deployment
metadata: {name: whoami}
spec:
  replicas: 1
  selector: {matchLabels: {app: whoami}}
  template:
    metadata: {labels: {app: whoami}}
    spec:
      nodeSelector: {kubernetes.io/hostname: ` + svcNodeA + `}
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        image: busybox
        imagePullPolicy: Never
        command:
        - sh
        - -c
        - |
          mkdir -p /www/cgi-bin
          printf '#!/bin/sh\necho Content-Type: text/plain\necho\necho $REMOTE_ADDR\n' > /www/cgi-bin/ip
          chmod +x /www/cgi-bin/ip
          exec httpd -f -p 8080 -h /www
        ports: [{containerPort: 8080, name: http}]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeSelector: {kubernetes.io/hostname: ` + svcNodeA + `}
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    imagePullPolicy: Never
    command: [sleep, "3600"]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web-headless}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: whoami-local}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: whoami}
  ports: [{name: http, port: 8082, targetPort: 8080}]
`

// svcEnv is what the steps share: the cluster, the kubectl builds and
// what was deployed.
type svcEnv struct {
	c        *netCluster
	old, cur string // kubectl 1.27 and 1.33
	hostIP   string // the test host's address on the lab network
	web      []corev1.Pod
	whoami   corev1.Pod
	solo     corev1.Pod
	webIP    string // the web Service's cluster IP
	nodeByIP map[string]*netNode
}

func TestAgentServices_ClusterIPByName_SpreadsOverNodes_NodePortLBAndLocalPolicy_RejectWithoutEndpoints_RepairsRules_ClusterDNS(t *testing.T) {
	kubectls := kubectlVersions(t)
	period := "--proxy-sync-period=" + svcSyncPeriod.String()
	c := newNetCluster(t, netClusterSpec{Agents: 2, TestHost: true, ServerArgs: []string{period}, AgentArgs: []string{period}})
	e := &svcEnv{c: c, old: kubectls["1.27"], cur: kubectls["1.33"], hostIP: c.host.ip.String(), nodeByIP: map[string]*netNode{}}
	for _, n := range c.nodes() {
		e.nodeByIP[n.IP.String()] = n
	}
	c.waitNodesReady(3, 2*time.Minute)
	e.deploy(t)

	t.Run("ClusterIPByName_FromPodOnNodeA_EveryEndpointOnEveryNodeGetsAShare", e.testClusterIPSpread)
	t.Run("NodePort_ClusterPolicy_AnswersOnEveryNodeAddress_SourceMasqueraded", e.testNodePortEveryNode)
	t.Run("LoadBalancer_IngressIsNodeAddresses_AnswersThere", e.testLoadBalancer)
	t.Run("LocalPolicy_KeepsClientSourceOnEndpointNode_OtherNodesNeverAnswer", e.testLocalPolicy)
	t.Run("RulesDeletedByHand_ComeBackWithinSyncPeriod", e.testRepair)
	t.Run("DNS_ResolvConf_A_Headless_SRV_PTR_NXDOMAIN", e.testDNS)
	t.Run("Hairpin_PodReachesItselfThroughItsService", e.testHairpin)
	t.Run("ScaledToZero_NewConnectionsRejectedAtOnce", e.testNoEndpoints)
}

// deploy creates the namespace, workloads and Services, and waits until
// every pod is ready.
func (e *svcEnv) deploy(t *testing.T) {
	c := e.c
	begin := time.Now()
	svcKubectl(t, c, e.cur, "create", "namespace", svcNS)
	svcApply(t, c, e.cur, webDeployment("web", 3)+"---\n"+webDeployment("solo", 1)+"---\n"+svcManifests)
	// Users expose Deployments with kubectl too, here with the oldest and
	// newest kubectl.
	svcKubectl(t, c, e.old, "expose", "deployment", "whoami", "-n", svcNS, "--name", "whoami-cluster", "--type", "NodePort", "--port", "80", "--target-port", "8080")
	svcKubectl(t, c, e.cur, "expose", "deployment", "web", "-n", svcNS, "--name", "web-lb", "--type", "LoadBalancer", "--port", "8081", "--target-port", "8080")
	svcKubectl(t, c, e.old, "expose", "deployment", "solo", "-n", svcNS, "--port", "80", "--target-port", "8080")

	e.web = svcWaitReady(t, c, "app=web", 3)
	e.whoami = svcWaitReady(t, c, "app=whoami", 1)[0]
	e.solo = svcWaitReady(t, c, "app=solo", 1)[0]
	svcWaitReady(t, c, "", 6) // the client pod too (no label)
	t.Logf("all 6 pods ready %v after the first kubectl", time.Since(begin).Round(time.Millisecond))

	perNode := map[string]int{}
	for _, p := range e.web {
		perNode[p.Spec.NodeName]++
	}
	if len(perNode) != 3 {
		t.Fatalf("3 web replicas on %d nodes (%v), want one per node", len(perNode), perNode)
	}
	if e.whoami.Spec.NodeName != svcNodeA {
		t.Fatalf("whoami on %s, want %s", e.whoami.Spec.NodeName, svcNodeA)
	}
	e.webIP = svcGet(t, c, "web").Spec.ClusterIP
	if net.ParseIP(e.webIP) == nil {
		t.Fatalf("web Service cluster IP %q", e.webIP)
	}
}

func (e *svcEnv) testClusterIPSpread(t *testing.T) {
	const n = 200
	nodeOf := map[string]string{}
	for _, p := range e.web {
		nodeOf[p.Name] = p.Spec.NodeName
	}
	for _, name := range []string{"web." + svcNS + ".svc.cluster.local", "web"} {
		// One exec running the loop: 200 execs would take minutes.
		script := fmt.Sprintf(`for i in $(seq %d); do timeout 5 wget -q -O- http://%s/ 2>&1 || echo FAIL; done`, n, name)
		begin := time.Now()
		out, err := svcExec(e.c, e.old, "client", script)
		took := time.Since(begin)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		counts := map[string]int{}
		total := 0
		for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			counts[strings.TrimSpace(line)]++
			total++
		}
		var dist []string
		for pod, k := range counts {
			dist = append(dist, fmt.Sprintf("%s (%s): %d", pod, nodeOf[pod], k))
		}
		sort.Strings(dist)
		t.Logf("GET http://%s/ ×%d from client on %s in %v (%v each): %s", name, n, svcNodeA, took.Round(time.Millisecond),
			(took / n).Round(time.Microsecond), strings.Join(dist, ", "))
		if total != n {
			t.Fatalf("%s: %d answers, want %d:\n%s", name, total, n, out)
		}
		for line := range counts {
			if _, ok := nodeOf[line]; !ok {
				t.Fatalf("%s: answer %q is no web pod's name (distribution %v)\n%s", name, line, dist, svcNft(e.nodeByName(svcNodeA)))
			}
		}
		// Random choice over 3 endpoints: each expects ~67 of 200; fewer
		// than 20 is 7 standard deviations off.
		for pod := range nodeOf {
			if counts[pod] < n/10 {
				t.Fatalf("%s: endpoint %s on %s got %d of %d (distribution %v), want at least %d", name, pod, nodeOf[pod], counts[pod], n, dist, n/10)
			}
		}
	}
}

// testNodePortEveryNode: with the Cluster policy the NodePort answers on
// every node, also on those without a whoami pod, and the pod sees a
// masqueraded source, not the test host.
func (e *svcEnv) testNodePortEveryNode(t *testing.T) {
	np := svcNodePort(t, e.c, "whoami-cluster")
	for _, n := range e.c.nodes() {
		src := svcSourceIP(svcHostGet(t, e, n, fmt.Sprintf("http://%s/cgi-bin/ip", net.JoinHostPort(n.IP.String(), strconv.Itoa(np))), 30*time.Second))
		t.Logf("NodePort %d on %s (local endpoint: %v): the pod saw source %s", np, n.Name, n.Name == svcNodeA, src)
		if src == e.hostIP || !e.masqueradedSource(src) {
			t.Fatalf("NodePort on %s with externalTrafficPolicy Cluster: the pod saw source %q, want a node address (masqueraded), not the test host %s", n.Name, src, e.hostIP)
		}
	}
}

// svcSourceIP is the address whoami printed: busybox httpd listens on an
// IPv6 socket, so REMOTE_ADDR is an IPv4-mapped address in brackets.
func svcSourceIP(body string) string {
	ip := net.ParseIP(strings.Trim(strings.TrimSpace(body), "[]"))
	if ip == nil {
		return body
	}
	return ip.String()
}

// masqueradedSource reports whether ip is what a node masquerades to: one
// of its addresses, on the lab network or on the pod network.
func (e *svcEnv) masqueradedSource(ip string) bool {
	if _, ok := e.nodeByIP[ip]; ok {
		return true
	}
	_, cidr, _ := net.ParseCIDR(svcClusterCIDR)
	parsed := net.ParseIP(ip)
	return parsed != nil && cidr.Contains(parsed)
}

func (e *svcEnv) testLoadBalancer(t *testing.T) {
	var want []string
	for _, n := range e.c.nodes() {
		want = append(want, n.IP.String())
	}
	sort.Strings(want)
	ingress := svcWaitIngress(t, e.c, "web-lb", want)
	names := map[string]bool{}
	for _, p := range e.web {
		names[p.Name] = true
	}
	for _, ip := range ingress {
		seen := map[string]int{}
		for range 6 {
			body := svcHostGet(t, e, e.nodeByIP[ip], "http://"+net.JoinHostPort(ip, "8081")+"/", 30*time.Second)
			if !names[body] {
				t.Fatalf("LoadBalancer %s:8081 answered %q, not a web pod's name", ip, body)
			}
			seen[body]++
		}
		t.Logf("LoadBalancer ingress %s:8081 answered from %v", ip, seen)
	}
}

// testLocalPolicy: the Local policy keeps the client's address on the
// node with the endpoint and never forwards from the others; the Cluster
// policy service on the same pod shows a node address instead.
func (e *svcEnv) testLocalPolicy(t *testing.T) {
	c := e.c
	nodeA := e.nodeByName(svcNodeA)
	svcWaitIngress(t, c, "whoami-local", []string{nodeA.IP.String()})
	np := svcNodePort(t, c, "whoami-local")
	for _, port := range []int{np, 8082} {
		url := fmt.Sprintf("http://%s/cgi-bin/ip", net.JoinHostPort(nodeA.IP.String(), strconv.Itoa(port)))
		if src := svcSourceIP(svcHostGet(t, e, nodeA, url, 30*time.Second)); src != e.hostIP {
			t.Fatalf("Local policy, %s (the endpoint's node): the pod saw source %q, want the test host's %s", url, src, e.hostIP)
		}
		t.Logf("Local policy %s: the pod saw the test host's own address %s", url, e.hostIP)
	}
	clusterURL := fmt.Sprintf("http://%s/cgi-bin/ip", net.JoinHostPort(nodeA.IP.String(), strconv.Itoa(svcNodePort(t, c, "whoami-cluster"))))
	if src := svcSourceIP(svcHostGet(t, e, nodeA, clusterURL, 10*time.Second)); src == e.hostIP || !e.masqueradedSource(src) {
		t.Fatalf("Cluster policy %s: the pod saw %q, want a node address", clusterURL, src)
	} else {
		t.Logf("Cluster policy %s, same pod: the pod saw %s (masqueraded)", clusterURL, src)
	}

	for _, n := range c.nodes() {
		if n.Name == svcNodeA {
			continue
		}
		// The node knows the service (else a refusal would prove nothing).
		lcWait(t, c, 30*time.Second, 500*time.Millisecond, "whoami-local's rules on "+n.Name, func() (bool, string) {
			table := svcNft(n)
			return strings.Contains(table, svcNS+"/whoami-local/"), table
		})
		for _, port := range []int{np, 8082} {
			for range 2 {
				url := fmt.Sprintf("http://%s/cgi-bin/ip", net.JoinHostPort(n.IP.String(), strconv.Itoa(port)))
				begin := time.Now()
				body, code, err := getIn(c.host.ns, url, 3*time.Second)
				kind, ok := svcNoAnswer(err)
				t.Logf("Local policy %s (no endpoint on %s): %s after %v", url, n.Name, kind, time.Since(begin).Round(time.Millisecond))
				if !ok {
					t.Fatalf("Local policy %s on a node without endpoint: %s (%d %q), want no answer (refused or timeout)\n%s", url, kind, code, body, svcNft(n))
				}
			}
		}
	}
	e.checkHealthCheckNodePort(t)
}

// checkHealthCheckNodePort asks every node, from the test host, what an
// outside load balancer would: the Local-policy Service's
// healthCheckNodePort answers 200 on the node with its endpoint and 503
// on the others.
func (e *svcEnv) checkHealthCheckNodePort(t *testing.T) {
	hc := svcGet(t, e.c, "whoami-local").Spec.HealthCheckNodePort
	if hc == 0 {
		t.Fatalf("whoami-local has no healthCheckNodePort")
	}
	for _, n := range e.c.nodes() {
		want := 503
		if n.Name == svcNodeA {
			want = 200
		}
		url := fmt.Sprintf("http://%s/", net.JoinHostPort(n.IP.String(), strconv.Itoa(int(hc))))
		var body string
		var code int
		lcWait(t, e.c, 30*time.Second, 500*time.Millisecond, "health check "+url+" answers "+strconv.Itoa(want), func() (bool, string) {
			var err error
			body, code, err = getIn(e.c.host.ns, url, 3*time.Second)
			return err == nil && code == want, fmt.Sprintf("%d %q %v", code, body, err)
		})
		if !strings.Contains(body, `"localEndpoints":`) || !strings.Contains(body, `"name":"whoami-local"`) {
			t.Errorf("health check %s body %q, want the Service and its local endpoint count", url, body)
		}
		t.Logf("healthCheckNodePort %s (%s): %d %s", url, n.Name, code, strings.TrimSpace(body))
	}
}

// testRepair deletes rules by hand (a ClusterIP map element on one node,
// a NodePort service chain's rules on another) and waits for the periodic
// resync to put them back.
func (e *svcEnv) testRepair(t *testing.T) {
	c := e.c
	nodeA, nodeB := e.nodeByName(svcNodeA), e.nodeByName("agent-2")
	np := svcNodePort(t, c, "whoami-cluster")
	npURL := fmt.Sprintf("http://%s/cgi-bin/ip", net.JoinHostPort(nodeB.IP.String(), strconv.Itoa(np)))
	svcHostGet(t, e, nodeB, npURL, 10*time.Second)

	chain := svcFindChain(t, nodeB, svcNS+"/whoami-cluster/tcp/")
	if svcChainRules(t, nodeB, chain) == 0 {
		t.Fatalf("chain %s on %s has no rules before the flush:\n%s", chain, nodeB.Name, svcNft(nodeB))
	}
	key := svcFindElement(t, nodeA, "service-ips", e.webIP)
	flushed := svcNftRun(t, nodeB, "flush", "chain", "ip", "skiff", chain)
	_, _, getErr := getIn(c.host.ns, npURL, 2*time.Second)
	brokeB, _ := svcNoAnswer(getErr)
	stillFlushed := svcChainRules(t, nodeB, chain) == 0
	deleted := svcNftRun(t, nodeA, "delete", "element", "ip", "skiff", "service-ips", "{ "+key+" }")
	out, wgetErr := svcExec(c, e.cur, "client", "timeout 3 wget -q -O- http://"+e.webIP+"/ 2>&1")
	stillDeleted := !svcHasElement(t, nodeA, "service-ips", e.webIP)
	t.Logf("flushed chain %s on %s: NodePort from the test host then %s (rules still gone after: %v)", chain, nodeB.Name, brokeB, stillFlushed)
	t.Logf("deleted service-ips element { %s } on %s: wget from client then %v %q (element still gone after: %v)", key, nodeA.Name, wgetErr, strings.TrimSpace(out), stillDeleted)
	if getErr == nil && stillFlushed {
		t.Fatalf("NodePort on %s answered with its service chain flushed: the check proves nothing\n%s", nodeB.Name, svcNft(nodeB))
	}
	if wgetErr == nil && stillDeleted {
		t.Fatalf("cluster IP %s answered on %s with its map element deleted: %q\n%s", e.webIP, nodeA.Name, out, svcNft(nodeA))
	}

	within := 3*svcSyncPeriod + 5*time.Second
	lcWait(t, c, within, 100*time.Millisecond, "flushed chain "+chain+" refilled on "+nodeB.Name, func() (bool, string) {
		return svcChainRules(t, nodeB, chain) > 0, svcNft(nodeB)
	})
	t.Logf("chain %s on %s refilled %v after the flush (sync period %v)", chain, nodeB.Name, time.Since(flushed).Round(time.Millisecond), svcSyncPeriod)
	lcWait(t, c, within, 100*time.Millisecond, "service-ips element of "+e.webIP+" back on "+nodeA.Name, func() (bool, string) {
		return svcHasElement(t, nodeA, "service-ips", e.webIP), svcNft(nodeA)
	})
	t.Logf("element { %s } on %s back %v after the deletion", key, nodeA.Name, time.Since(deleted).Round(time.Millisecond))

	svcHostGet(t, e, nodeB, npURL, 10*time.Second)
	lcWait(t, c, 10*time.Second, 500*time.Millisecond, "web's cluster IP answers again from client", func() (bool, string) {
		out, err := svcExec(c, e.cur, "client", "timeout 3 wget -q -O- http://"+e.webIP+"/ 2>&1")
		return err == nil && e.isWebPod(strings.TrimSpace(out)), fmt.Sprintf("%v %q", err, out)
	})
}

func (e *svcEnv) isWebPod(name string) bool {
	return slices.ContainsFunc(e.web, func(p corev1.Pod) bool { return p.Name == name })
}

func (e *svcEnv) testDNS(t *testing.T) {
	c := e.c
	resolv, err := svcExec(c, e.old, "client", "cat /etc/resolv.conf")
	if err != nil {
		t.Fatalf("cat /etc/resolv.conf: %v %q", err, resolv)
	}
	t.Logf("client's /etc/resolv.conf:\n%s", resolv)
	for _, want := range []string{"nameserver " + svcClusterDNS, "search " + svcNS + ".svc.cluster.local svc.cluster.local cluster.local", "ndots:5"} {
		if !strings.Contains(resolv, want) {
			t.Errorf("resolv.conf lacks %q:\n%s", want, resolv)
		}
	}

	fqdn := "web." + svcNS + ".svc.cluster.local"
	var podIPs []string
	for _, p := range e.web {
		podIPs = append(podIPs, p.Status.PodIP)
	}
	sort.Strings(podIPs)
	for _, tc := range []struct {
		name string
		want []string
	}{
		{fqdn, []string{e.webIP}},
		{"web-headless." + svcNS + ".svc.cluster.local", podIPs},
		{"kube-dns.kube-system.svc.cluster.local", []string{svcClusterDNS}},
	} {
		out, _ := svcExec(c, e.old, "client", "nslookup "+tc.name+" 2>&1")
		if got := svcNslookupAddrs(out); !slices.Equal(got, tc.want) {
			t.Errorf("nslookup %s: addresses %v, want %v:\n%s", tc.name, got, tc.want, out)
		} else {
			t.Logf("nslookup %s: %v", tc.name, got)
		}
	}

	srv := "_http._tcp." + fqdn
	out, _ := svcExec(c, e.cur, "client", "nslookup -type=SRV "+srv+" 2>&1")
	if !regexp.MustCompile(`service = \d+ \d+ 80 ` + regexp.QuoteMeta(fqdn) + `\.?\s`).MatchString(out + "\n") {
		t.Errorf("nslookup -type=SRV %s: want port 80 and target %s:\n%s", srv, fqdn, out)
	} else {
		t.Logf("nslookup -type=SRV %s:\n%s", srv, out)
	}

	out, _ = svcExec(c, e.cur, "client", "nslookup "+e.webIP+" 2>&1")
	if !regexp.MustCompile(`name = ` + regexp.QuoteMeta(fqdn) + `\.?\s`).MatchString(out + "\n") {
		t.Errorf("nslookup %s (PTR): want name = %s:\n%s", e.webIP, fqdn, out)
	} else {
		t.Logf("nslookup %s (PTR):\n%s", e.webIP, out)
	}

	missing := "nosuch." + svcNS + ".svc.cluster.local"
	out, err = svcExec(c, e.cur, "client", "nslookup "+missing+" 2>&1")
	if err == nil || !strings.Contains(out, "NXDOMAIN") {
		t.Errorf("nslookup %s: %v, want a failure saying NXDOMAIN:\n%s", missing, err, out)
	} else {
		t.Logf("nslookup %s: %v\n%s", missing, err, out)
	}
	e.checkMetrics(t)
}

// checkMetrics reads the client's node's proxy and DNS metrics where
// kube-proxy serves its own (127.0.0.1:10249 in the node's namespace):
// the lookups above were counted, and the proxy reports its syncs and
// what it installed.
func (e *svcEnv) checkMetrics(t *testing.T) {
	n := e.nodeByName(svcNodeA)
	body, code, err := getIn(n.NS, "http://127.0.0.1:10249/metrics", 5*time.Second)
	if err != nil || code != 200 {
		t.Fatalf("metrics of %s: %d %v", n.Name, code, err)
	}
	for _, re := range []string{
		`skiff_dns_requests_total\{rcode="NOERROR",zone="cluster"\} [1-9]`,
		`skiff_dns_requests_total\{rcode="NXDOMAIN",zone="cluster"\} [1-9]`,
		`skiff_dns_request_duration_seconds_count\{zone="cluster"\} [1-9]`,
		`skiff_proxy_sync_duration_seconds_count\{kind="full"\} [1-9]`,
		`skiff_proxy_sync_duration_seconds_count\{kind="partial"\} [1-9]`,
		`skiff_proxy_nft_objects\{kind="chains"\} [1-9]`,
		`skiff_proxy_services [1-9]`,
	} {
		if !regexp.MustCompile(`(?m)^` + re).MatchString(body) {
			t.Errorf("metrics of %s lack %s", n.Name, re)
		}
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "skiff_proxy_") || strings.HasPrefix(l, "skiff_dns_requests_total") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 30 {
		lines = lines[:30]
	}
	t.Logf("metrics of %s (excerpt):\n%s", n.Name, strings.Join(lines, "\n"))
}

// svcNslookupAddrs are the sorted addresses busybox nslookup printed for
// the name asked (after a "Name:" line; the ones before are the server's).
func svcNslookupAddrs(out string) []string {
	var addrs []string
	answers := false
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "Name:":
			answers = true
		case answers && len(f) >= 2 && f[0] == "Address:":
			addrs = append(addrs, f[1])
		}
	}
	sort.Strings(addrs)
	return addrs
}

// testHairpin: a pod reaching its own Service lands on itself and gets
// the answer back (the reply must not bypass the reverse NAT).
func (e *svcEnv) testHairpin(t *testing.T) {
	out, err := svcExec(e.c, e.cur, e.solo.Name, `for i in 1 2 3; do timeout 5 wget -q -O- http://solo/ 2>&1 || echo FAIL; done`)
	want := strings.Repeat(e.solo.Name+"\n", 3)
	if err != nil || out != want {
		t.Fatalf("%s on %s → http://solo/ ×3: %v %q, want its own name each time\n%s", e.solo.Name, e.solo.Spec.NodeName, err, out, svcNft(e.nodeByName(e.solo.Spec.NodeName)))
	}
}

// testNoEndpoints scales web to zero: new connections to its cluster IP
// (from a pod) and to web-lb's NodePort and LB port (from the test host)
// must fail at once, refused rather than left to time out.
func (e *svcEnv) testNoEndpoints(t *testing.T) {
	c := e.c
	svcKubectl(t, c, e.old, "scale", "deployment", "web", "-n", svcNS, "--replicas=0")
	lcWait(t, c, time.Minute, time.Second, "web's EndpointSlices empty", func() (bool, string) {
		n := svcReadyEndpoints(t, c, "web")
		return n == 0, fmt.Sprint(n, " ready endpoints")
	})
	lcWait(t, c, time.Minute, time.Second, "lb's EndpointSlices empty", func() (bool, string) {
		n := svcReadyEndpoints(t, c, "web-lb")
		return n == 0, fmt.Sprint(n, " ready endpoints")
	})

	// From the client pod; `time` measures inside the pod, free of
	// kubectl exec's own cost.
	timed := regexp.MustCompile(`real\s+(\d+)m\s*([0-9.]+)s`)
	exit := regexp.MustCompile(`rc=(\d+)`)
	fromPodTo := func(hostPort string) func() (string, time.Duration, error) {
		return func() (string, time.Duration, error) { return svcTimedWget(t, c, e.cur, hostPort, timed, exit) }
	}
	svcRejectedAtOnce(t, c, "cluster IP "+e.webIP+":80 from client", fromPodTo(e.webIP), e.nodeByName(svcNodeA))
	// A port the Service does not have, and an address of the Service
	// range that no Service has: refused too, not sent off to the default
	// route.
	svcRejectedAtOnce(t, c, "cluster IP "+e.webIP+":81 (no such port) from client", fromPodTo(e.webIP+":81"), e.nodeByName(svcNodeA))
	svcRejectedAtOnce(t, c, "10.43.255.254:80 (no such Service) from client", fromPodTo("10.43.255.254"), e.nodeByName(svcNodeA))

	np := svcNodePort(t, c, "web-lb")
	for _, n := range c.nodes() {
		for _, port := range []int{np, 8081} {
			addr := net.JoinHostPort(n.IP.String(), strconv.Itoa(port))
			dial := func() (string, time.Duration, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				begin := time.Now()
				conn, err := dialIn(ctx, c.host.ns, addr)
				took := time.Since(begin)
				if err == nil {
					conn.Close()
					return "connected", took, nil
				}
				kind, _ := svcNoAnswer(err)
				return kind, took, err
			}
			svcRejectedAtOnce(t, c, addr+" ("+n.Name+") from the test host", dial, n)
		}
	}
}
