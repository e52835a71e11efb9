package e2e

// Helpers of agent_services_test.go: kubectl, waits and nft readers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// svcTimedWget fetches http://hostPort/ from the client pod, timed by the
// pod's own `time` (free of kubectl exec's cost), bounded at 5 s.
func svcTimedWget(t *testing.T, c *netCluster, bin, hostPort string, timed, exit *regexp.Regexp) (string, time.Duration, error) {
	out, err := svcExec(c, bin, "client", "time timeout 5 wget -q -O- http://"+hostPort+"/ 2>&1; echo rc=$?")
	if err != nil {
		t.Fatalf("kubectl exec client: %v: %s", err, out)
	}
	rc, tm := exit.FindStringSubmatch(out), timed.FindStringSubmatch(out)
	if rc == nil || tm == nil {
		t.Fatalf("no exit status or time in %q", out)
	}
	mins, _ := strconv.Atoi(tm[1])
	secs, _ := strconv.ParseFloat(tm[2], 64)
	took := time.Duration(mins)*time.Minute + time.Duration(secs*float64(time.Second))
	if rc[1] == "0" {
		return out, took, nil
	}
	return out, took, errors.New(strings.TrimSpace(out))
}

// svcRejectedAtOnce waits until attempt fails (the proxy has seen the
// endpoints go), then requires three more attempts to fail well before
// the 5 s bound each has: a refusal, not a hang. The figures are printed.
func svcRejectedAtOnce(t *testing.T, c *netCluster, what string, attempt func() (string, time.Duration, error), n *netNode) {
	t.Helper()
	lcWait(t, c, 30*time.Second, 200*time.Millisecond, what+" fails", func() (bool, string) {
		out, _, err := attempt()
		return err != nil, out
	})
	var figures []string
	for range 3 {
		out, took, err := attempt()
		figures = append(figures, took.Round(10*time.Microsecond).String())
		if err == nil {
			t.Fatalf("%s: answered again (%q) with no endpoints\n%s", what, out, svcNft(n))
		}
		if took >= 2*time.Second {
			t.Fatalf("%s: failed after %v (%v), want a rejection at once, not a timeout\n%s", what, took, err, svcNft(n))
		}
	}
	t.Logf("%s with no endpoints: rejected after %s", what, strings.Join(figures, ", "))
}

// svcNoAnswer says how a request failed, and whether that counts as "the
// node did not answer": refused (reset or ICMP unreachable) or timed out.
// Any other error means something took the connection.
func svcNoAnswer(err error) (string, bool) {
	switch {
	case err == nil:
		return "answered", false
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused", true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable", true
	case errors.Is(err, context.DeadlineExceeded), netIsTimeout(err):
		return "timeout", true
	}
	return "error: " + err.Error(), false
}

func (e *svcEnv) nodeByName(name string) *netNode {
	for _, n := range e.c.nodes() {
		if n.Name == name {
			return n
		}
	}
	panic("no node " + name)
}

// svcHostGet GETs url from the test host until it answers 200 (within)
// and returns the trimmed body; n's rules are printed on failure.
func svcHostGet(t *testing.T, e *svcEnv, n *netNode, url string, within time.Duration) string {
	t.Helper()
	var body string
	lcWait(t, e.c, within, 300*time.Millisecond, "GET "+url+" from the test host", func() (bool, string) {
		b, code, err := getIn(e.c.host.ns, url, 3*time.Second)
		body = strings.TrimSpace(b)
		return err == nil && code == 200, fmt.Sprintf("%d %q %v", code, b, err)
	}, func() string { return n.Name + "'s rules:\n" + svcNft(n) })
	return body
}

// svcKubectl runs kubectl bin in the server's namespace; t fails on error.
func svcKubectl(t *testing.T, c *netCluster, bin string, args ...string) string {
	t.Helper()
	out, errOut, err := c.kubectlBinIn(bin, "", args...)
	if err != nil {
		t.Fatalf("%s %s: %v: %s%s", filepath.Base(bin), strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func svcApply(t *testing.T, c *netCluster, bin, manifest string) {
	t.Helper()
	if out, errOut, err := c.kubectlBinIn(bin, manifest, "apply", "-n", svcNS, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v: %s%s", err, out, errOut)
	}
}

// svcExec runs a shell script in a pod of svcNS; the output is stdout
// then stderr, the error kubectl's (the script's exit status).
func svcExec(c *netCluster, bin, pod, script string) (string, error) {
	out, errOut, err := c.kubectlBinIn(bin, "", "exec", "-n", svcNS, pod, "--", "sh", "-c", script)
	return out + errOut, err
}

// svcWaitReady waits until n pods match sel (all pods for "") in svcNS
// and all are Ready.
func svcWaitReady(t *testing.T, c *netCluster, sel string, n int) []corev1.Pod {
	t.Helper()
	args := []string{"-n", svcNS}
	if sel != "" {
		args = append(args, "-l", sel)
	}
	var pods []corev1.Pod
	lcWait(t, c, 3*time.Minute, time.Second, fmt.Sprintf("%d pods %q ready", n, sel), func() (bool, string) {
		pods = lcPods(t, c, args...)
		ready := 0
		for i := range pods {
			if podCondition(&pods[i], corev1.PodReady) == corev1.ConditionTrue && pods[i].DeletionTimestamp == nil {
				ready++
			}
		}
		return ready == n && len(pods) == n, fmt.Sprintf("%d/%d ready", ready, len(pods))
	}, func() string { return c.kubectlNoFail(append([]string{"get", "pods", "-o", "wide"}, args...)...) })
	return pods
}

func svcGet(t *testing.T, c *netCluster, name string) corev1.Service {
	t.Helper()
	var svc corev1.Service
	if err := json.Unmarshal([]byte(lcKubectl(t, c, "get", "service", "-n", svcNS, name, "-o", "json")), &svc); err != nil {
		t.Fatal(err)
	}
	return svc
}

func svcNodePort(t *testing.T, c *netCluster, name string) int {
	t.Helper()
	svc := svcGet(t, c, name)
	if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("service %s has no node port: %s", name, lcJSON(svc.Spec))
	}
	return int(svc.Spec.Ports[0].NodePort)
}

// svcWaitIngress waits until the service's status.loadBalancer.ingress
// holds exactly the addresses want (sorted), and returns them.
func svcWaitIngress(t *testing.T, c *netCluster, name string, want []string) []string {
	t.Helper()
	lcWait(t, c, time.Minute, 500*time.Millisecond, name+"'s load balancer ingress", func() (bool, string) {
		svc := svcGet(t, c, name)
		var got []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			got = append(got, in.IP)
		}
		sort.Strings(got)
		return slices.Equal(got, want), fmt.Sprintf("ingress %v, want %v", got, want)
	}, func() string { return c.kubectlNoFail("describe", "service", "-n", svcNS, name) })
	t.Logf("%s: status.loadBalancer.ingress %v", name, want)
	return want
}

// svcReadyEndpoints counts the ready endpoints in the service's slices.
func svcReadyEndpoints(t *testing.T, c *netCluster, svc string) int {
	t.Helper()
	var list discoveryv1.EndpointSliceList
	out := lcKubectl(t, c, "get", "endpointslices", "-n", svcNS, "-l", discoveryv1.LabelServiceName+"="+svc, "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

// svcNft is the node's `nft list table ip skiff` (or the error), for
// failure messages.
func svcNft(n *netNode) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := n.Exec(ctx, "nft", "list", "table", "ip", "skiff")
	if err != nil {
		return fmt.Sprintf("nft list table ip skiff on %s: %v: %s", n.Name, err, out)
	}
	return out
}

// svcNftRun runs nft in the node's namespace (never the machine's), fails
// t on error, and returns when it ran.
func svcNftRun(t *testing.T, n *netNode, args ...string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := n.Exec(ctx, "nft", args...); err != nil {
		t.Fatalf("nft %s on %s: %v: %s", strings.Join(args, " "), n.Name, err, out)
	}
	return time.Now()
}

// svcNftJSON is the part of `nft -j` output the test reads.
type svcNftJSON struct {
	Nftables []struct {
		Chain *struct {
			Table, Name string
		} `json:"chain"`
		Rule *struct {
			Table, Chain string
		} `json:"rule"`
		Map *struct {
			Table, Name string
			Elem        [][]json.RawMessage `json:"elem"`
		} `json:"map"`
	} `json:"nftables"`
}

func svcNftList(t *testing.T, n *netNode, args ...string) svcNftJSON {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := n.Exec(ctx, "nft", append([]string{"-j", "list"}, args...)...)
	if err != nil {
		t.Fatalf("nft -j list %s on %s: %v: %s\n%s", strings.Join(args, " "), n.Name, err, out, svcNft(n))
	}
	var v svcNftJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("nft -j list %s on %s: %v: %s", strings.Join(args, " "), n.Name, err, out)
	}
	return v
}

// svcFindChain is the name of the one service chain of table skiff whose
// name holds part (<ns>/<name>/<proto>/).
func svcFindChain(t *testing.T, n *netNode, part string) string {
	t.Helper()
	var found []string
	for _, o := range svcNftList(t, n, "chains", "ip").Nftables {
		if o.Chain != nil && o.Chain.Table == "skiff" && strings.HasPrefix(o.Chain.Name, "service-") && strings.Contains(o.Chain.Name, part) {
			found = append(found, o.Chain.Name)
		}
	}
	if len(found) != 1 {
		t.Fatalf("service chains holding %q on %s: %v, want one\n%s", part, n.Name, found, svcNft(n))
	}
	return found[0]
}

func svcChainRules(t *testing.T, n *netNode, chain string) int {
	t.Helper()
	k := 0
	for _, o := range svcNftList(t, n, "chain", "ip", "skiff", chain).Nftables {
		if o.Rule != nil && o.Rule.Chain == chain {
			k++
		}
	}
	return k
}

// svcMapKeys are the keys of a map of table skiff as nft writes them
// ("10.43.0.5 . tcp . 80").
func svcMapKeys(t *testing.T, n *netNode, name string) []string {
	t.Helper()
	var keys []string
	for _, o := range svcNftList(t, n, "map", "ip", "skiff", name).Nftables {
		if o.Map == nil {
			continue
		}
		for _, el := range o.Map.Elem {
			if len(el) == 0 {
				continue
			}
			var concat struct {
				Concat []any `json:"concat"`
			}
			var parts []string
			if json.Unmarshal(el[0], &concat) == nil && concat.Concat != nil {
				for _, p := range concat.Concat {
					parts = append(parts, fmt.Sprint(p))
				}
			} else {
				parts = append(parts, strings.Trim(string(el[0]), `"`))
			}
			keys = append(keys, strings.Join(parts, " . "))
		}
	}
	return keys
}

// svcFindElement is the one key of map name that starts with addr.
func svcFindElement(t *testing.T, n *netNode, name, addr string) string {
	t.Helper()
	var found []string
	for _, k := range svcMapKeys(t, n, name) {
		if strings.HasPrefix(k, addr+" ") || k == addr {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s elements for %s on %s: %v, want one\n%s", name, addr, n.Name, found, svcNft(n))
	}
	return found[0]
}

func svcHasElement(t *testing.T, n *netNode, name, addr string) bool {
	t.Helper()
	return slices.ContainsFunc(svcMapKeys(t, n, name), func(k string) bool { return strings.HasPrefix(k, addr+" ") || k == addr })
}
