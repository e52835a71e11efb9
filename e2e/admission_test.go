package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const privilegedPod = `apiVersion: v1
kind: Pod
metadata: {name: priv}
spec:
  containers:
  - name: c
    image: busybox
    securityContext: {privileged: true}
`

// TestPodSecurity_NamespaceLabels_EnforceRefusesWarnWarns: the namespace
// labels of Pod Security admission act as upstream's, with its messages,
// seen through the real kubectl.
func TestPodSecurity_NamespaceLabels_EnforceRefusesWarnWarns(t *testing.T) {
	c := startCluster(t)
	for _, v := range []string{"1.27", "1.33"} {
		bin := kubectlVersions(t)[v]
		t.Run("kubectl-"+v, func(t *testing.T) {
			ns := "psa" + strings.ReplaceAll(v, ".", "")
			c.ok(t, bin, "create", "namespace", ns)
			c.ok(t, bin, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
			_, errOut, err := c.run(t, bin, privilegedPod, "create", "-n", ns, "-f", "-")
			if err == nil {
				t.Fatal("a privileged pod was admitted to a restricted namespace")
			}
			mustContain(t, "enforce", errOut, `pods "priv" is forbidden: violates PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true)`)

			warnNS := ns + "w"
			c.ok(t, bin, "create", "namespace", warnNS)
			c.ok(t, bin, "label", "namespace", warnNS, "pod-security.kubernetes.io/warn=baseline")
			_, errOut, err = c.run(t, bin, privilegedPod, "create", "-n", warnNS, "-f", "-")
			if err != nil {
				t.Fatalf("warn-only namespace refused the pod: %v %s", err, errOut)
			}
			mustContain(t, "warn", errOut, `Warning: would violate PodSecurity "baseline:latest": privileged`)

			_, errOut, _ = c.run(t, bin, "", "label", "--overwrite", "namespace", warnNS, "pod-security.kubernetes.io/enforce=baseline")
			mustContain(t, "existing pods", errOut, `existing pods in namespace "`+warnNS+`" violate the new PodSecurity enforce level "baseline:latest"`)
			_, errOut, err = c.run(t, bin, "", "label", "--overwrite", "namespace", warnNS, "pod-security.kubernetes.io/enforce=bogus")
			if err == nil {
				t.Fatal("an invalid enforce level was accepted")
			}
			mustContain(t, "bad level", errOut, "pod-security.kubernetes.io/enforce", "must be one of privileged, baseline, restricted")
		})
	}
}

// TestLimitRange_DefaultsAndMax_AsUpstream: a LimitRange's defaults land
// on a new pod (and its QoS class follows them), and a limit over its max
// is refused with upstream's message.
func TestLimitRange_DefaultsAndMax_AsUpstream(t *testing.T) {
	c := startCluster(t)
	bin := kubectlVersions(t)["1.33"]
	c.okIn(t, bin, `apiVersion: v1
kind: LimitRange
metadata: {name: lr, namespace: default}
spec:
  limits:
  - type: Container
    default: {cpu: 200m, memory: 64Mi}
    defaultRequest: {cpu: 200m, memory: 64Mi}
    max: {memory: 128Mi}
`, "apply", "-f", "-")
	c.okIn(t, bin, "apiVersion: v1\nkind: Pod\nmetadata: {name: d}\nspec:\n  containers: [{name: c, image: busybox}]\n", "create", "-f", "-")
	got := c.ok(t, bin, "get", "pod", "d", "-o", "jsonpath={.spec.containers[0].resources.limits.memory} {.spec.containers[0].resources.requests.cpu} {.status.qosClass}")
	if strings.TrimSpace(got) != "64Mi 200m Guaranteed" {
		t.Fatalf("limits/requests/QoS = %q, want the LimitRange's defaults and Guaranteed", got)
	}
	mustContain(t, "annotation", c.ok(t, bin, "get", "pod", "d", "-o", "jsonpath={.metadata.annotations}"), "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c")
	_, errOut, err := c.run(t, bin, "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers: [{name: c, image: busybox, resources: {limits: {memory: 1Gi}}}]\n", "create", "-f", "-")
	if err == nil {
		t.Fatal("a pod over the LimitRange's max was admitted")
	}
	mustContain(t, "max", errOut, `pods "big" is forbidden: maximum memory usage per Container is 128Mi, but limit is 1Gi`)
}

// TestResourceQuota_RefusesOverQuota_ConcurrentCreatesNeverOvershoot: the
// quota is enforced with upstream's message, 20 concurrent creates against
// pods=5 admit exactly 5, and `describe quota` follows deletes.
func TestResourceQuota_RefusesOverQuota_ConcurrentCreatesNeverOvershoot(t *testing.T) {
	c := startCluster(t)
	bin := kubectlVersions(t)["1.33"]
	c.ok(t, bin, "create", "namespace", "q1")
	c.ok(t, bin, "create", "quota", "q", "-n", "q1", "--hard=pods=1")
	waitFor(t, 30*time.Second, "the quota's status", func() bool {
		out, _, err := c.run(t, bin, "", "get", "quota", "q", "-n", "q1", "-o", "jsonpath={.status.hard.pods}")
		return err == nil && strings.TrimSpace(out) == "1"
	})
	pod := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers: [{name: c, image: busybox}]\n"
	}
	c.okIn(t, bin, pod("p1"), "create", "-n", "q1", "-f", "-")
	_, errOut, err := c.run(t, bin, pod("p2"), "create", "-n", "q1", "-f", "-")
	if err == nil {
		t.Fatal("a second pod was admitted under pods=1")
	}
	mustContain(t, "over quota", errOut, `pods "p2" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1`)

	c.ok(t, bin, "create", "namespace", "q5")
	c.ok(t, bin, "create", "quota", "q", "-n", "q5", "--hard=pods=5")
	waitFor(t, 30*time.Second, "the quota's status", func() bool {
		out, _, err := c.run(t, bin, "", "get", "quota", "q", "-n", "q5", "-o", "jsonpath={.status.hard.pods}")
		return err == nil && strings.TrimSpace(out) == "5"
	})
	var wg sync.WaitGroup
	var admitted atomic.Int32
	for i := range 20 {
		wg.Go(func() {
			if _, _, err := c.run(t, bin, pod(fmt.Sprintf("c%02d", i)), "create", "-n", "q5", "-f", "-"); err == nil {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 5 {
		t.Fatalf("%d of 20 concurrent pod creates admitted against pods=5, want exactly 5", n)
	}
	if out := c.ok(t, bin, "get", "pods", "-n", "q5", "-o", "name"); len(strings.Fields(out)) != 5 {
		t.Fatalf("pods stored: %q, want 5", out)
	}
	c.ok(t, bin, "delete", "pods", "--all", "-n", "q5", "--grace-period=0", "--force")
	waitFor(t, 60*time.Second, "describe quota to show the freed pods", func() bool {
		out, _, err := c.run(t, bin, "", "describe", "quota", "q", "-n", "q5")
		return err == nil && regexp.MustCompile(`pods\s+0\s+5`).MatchString(out)
	})
}

// TestResourceQuota_ComputeRequests_SecondPodOverRemainingRefused: a
// quota on requests counts each admitted pod, so a pod over what remains
// is refused (the conformance "capture the life of a pod" steps).
func TestResourceQuota_ComputeRequests_SecondPodOverRemainingRefused(t *testing.T) {
	c := startCluster(t)
	bin := kubectlVersions(t)["1.33"]
	c.ok(t, bin, "create", "namespace", "qc")
	c.ok(t, bin, "create", "quota", "q", "-n", "qc", "--hard=cpu=1,memory=500Mi,pods=5")
	waitFor(t, 30*time.Second, "the quota's status", func() bool {
		out, _, err := c.run(t, bin, "", "get", "quota", "q", "-n", "qc", "-o", "jsonpath={.status.hard.cpu}")
		return err == nil && strings.TrimSpace(out) == "1"
	})
	pod := func(name, cpu string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: " + cpu + ", memory: 100Mi}, limits: {cpu: " + cpu + ", memory: 100Mi}}}]\n"
	}
	c.okIn(t, bin, pod("fits", "500m"), "create", "-n", "qc", "-f", "-")
	waitFor(t, 30*time.Second, "usage to show the pod", func() bool {
		out, _, err := c.run(t, bin, "", "get", "quota", "q", "-n", "qc", "-o", "jsonpath={.status.used.cpu}")
		return err == nil && strings.TrimSpace(out) == "500m"
	})
	_, errOut, err := c.run(t, bin, pod("over", "600m"), "create", "-n", "qc", "-f", "-")
	if err == nil {
		t.Fatal("a pod over the remaining cpu quota was admitted")
	}
	mustContain(t, "over quota", errOut, "exceeded quota: q", "requested: cpu=600m", "used: cpu=500m", "limited: cpu=1")
}
