package e2e

// Pod lifecycle on real agents, driven with the real kubectl: probes,
// OOM kills, air-gapped images, and a crashed agent whose pods move away
// and whose restart cleans up after them.

import (
	"skiff/runtime/mountinfo"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"skiff/runtime/podnet"
	"skiff/runtime/testimage"
)

// lcKubectl runs kubectl in the server's namespace; t fails on error. It
// takes the (sub)test's t: the cluster's own helpers fail the parent test,
// which parallel subtests must not do.
func lcKubectl(t *testing.T, c *netCluster, args ...string) string {
	t.Helper()
	out, err := c.kubectl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lcApply is `kubectl apply -f -` of a manifest.
func lcApply(t *testing.T, c *netCluster, manifest string) {
	t.Helper()
	if out, errOut, err := c.kubectlIn(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v: %s%s", err, out, errOut)
	}
}

func lcPod(t *testing.T, c *netCluster, name string) corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal([]byte(lcKubectl(t, c, "get", "pod", name, "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func lcPods(t *testing.T, c *netCluster, args ...string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	out := lcKubectl(t, c, append([]string{"get", "pods", "-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// lcAlive reports a node process that died without being stopped.
func lcAlive(c *netCluster) error {
	for _, n := range c.nodes() {
		n.mu.Lock()
		died := n.cmd != nil && !n.stopped && netIsDone(n.done)
		err := n.err
		n.mu.Unlock()
		if died {
			return fmt.Errorf("%s exited unexpectedly: %v", n.Name, err)
		}
	}
	return nil
}

// lcWait polls cond every interval until it holds; after within it fails
// the test with cond's last explanation and what more tells.
func lcWait(t *testing.T, c *netCluster, within, interval time.Duration, what string, cond func() (bool, string), more ...func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if err := lcAlive(c); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			var extra []string
			for _, f := range more {
				extra = append(extra, f())
			}
			t.Fatalf("%s: not within %v: %s\n%s", what, within, why, strings.Join(extra, "\n"))
		}
		time.Sleep(interval)
	}
}

func (c *netCluster) describe(kind, name string) func() string {
	return func() string { return c.kubectlNoFail("describe", kind, name) }
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, cond := range p.Status.Conditions {
		if cond.Type == typ {
			return cond.Status
		}
	}
	return ""
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// kubectlStatus is the STATUS column of `kubectl get pod name`.
func kubectlStatus(t *testing.T, c *netCluster, name string) string {
	t.Helper()
	out := lcKubectl(t, c, "get", "pod", name, "--no-headers")
	f := strings.Fields(out)
	if len(f) < 3 {
		t.Fatalf("kubectl get pod %s: %q", name, out)
	}
	return f[2]
}

func lcJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// lcProbePods are the pods of the probes, OOM and image tests, made at once
// so that their waits overlap.
const lcProbePods = `apiVersion: v1
kind: Pod
metadata: {name: liveness}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    imagePullPolicy: Never
    # Healthy for two seconds, then the liveness probe fails. sleep as PID 1
    # ignores SIGTERM: the kill ends with SIGKILL after the grace period.
    command: [sh, -c, 'touch /tmp/healthy; sleep 2; rm /tmp/healthy; exec sleep 3600']
    livenessProbe: {exec: {command: [cat, /tmp/healthy]}, periodSeconds: 1, failureThreshold: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: readiness, labels: {app: readiness}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /www && touch /tmp/ready && exec httpd -f -p 8080 -h /www']
    ports: [{containerPort: 8080, name: http}]
    readinessProbe: {exec: {command: [cat, /tmp/ready]}, periodSeconds: 1, failureThreshold: 1}
---
apiVersion: v1
kind: Service
metadata: {name: readiness}
spec:
  selector: {app: readiness}
  ports: [{port: 80, targetPort: http}]
---
apiVersion: v1
kind: Pod
metadata: {name: oom-never}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: hog
    image: busybox
    imagePullPolicy: Never
    command: [tail, /dev/zero]
    resources: {limits: {memory: 16Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: oom-always}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: hog
    image: busybox
    imagePullPolicy: Never
    command: [tail, /dev/zero]
    resources: {limits: {memory: 16Mi}}
`

// TestAgentLifecycle_LivenessBackoff_ReadinessEndpoints_OOMKilled_ImportedImageNeverPull
// runs one server and one agent; the subtests share them and run in
// parallel.
func TestAgentLifecycle_LivenessBackoff_ReadinessEndpoints_OOMKilled_ImportedImageNeverPull(t *testing.T) {
	c := newNetCluster(t, netClusterSpec{Agents: 1, ServerArgs: []string{"--disable-agent"}})
	c.waitNodesReady(1, 2*time.Minute)
	lcApply(t, c, lcProbePods)

	t.Run("pods", func(t *testing.T) { // returns once its parallel subtests are done
		t.Run("FailingLivenessRestartsContainerWithGrowingBackoff", func(t *testing.T) {
			t.Parallel()
			testLivenessBackoff(t, c)
		})
		t.Run("FailingReadinessMarksEndpointNotReadyAndBack", func(t *testing.T) {
			t.Parallel()
			testReadinessEndpointSlice(t, c)
		})
		t.Run("ContainerOverMemoryLimitIsOOMKilled", func(t *testing.T) {
			t.Parallel()
			testOOMKilled(t, c)
		})
		t.Run("ImportedImageRunsWithPullNever_AbsentImageErrImageNeverPull", func(t *testing.T) {
			t.Parallel()
			testImportedImage(t, c, c.agents[0])
		})
	})
	t.Run("DeletedPodsLeaveNothingOnTheNode", func(t *testing.T) {
		node := c.agents[0]
		if len(nodeContents(t, node)) == 0 {
			t.Fatal("the node holds nothing for its pods before the deletion: the check below would prove nothing")
		}
		lcKubectl(t, c, "delete", "pods", "--all", "--wait=false")
		lcWait(t, c, 2*time.Minute, time.Second, "pods gone from the API", func() (bool, string) {
			pods := lcPods(t, c)
			return len(pods) == 0, fmt.Sprint(len(pods), " left")
		}, func() string { return c.kubectlNoFail("get", "pods", "-o", "wide") })
		lcWait(t, c, 30*time.Second, time.Second, "nothing left on "+node.Name, func() (bool, string) {
			left := nodeContents(t, node)
			return len(left) == 0, strings.Join(left, "\n")
		})
	})
}

// restartObs is one restart seen in the pod's status: the previous run's
// end and the new run's start.
type restartObs struct {
	count               int32
	finished, started   time.Time
	prevID, containerID string
}

func (o restartObs) gap() time.Duration { return o.started.Sub(o.finished) }

func testLivenessBackoff(t *testing.T, c *netCluster) {
	const want = 3 // restarts; the kubelet waits 0, 10 s, 20 s before them
	cs := c.clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seen := map[int32]restartObs{}
	var backoffMsgs []string // distinct CrashLoopBackOff messages, in order
	sawCrashLoop := false    // in kubectl get's STATUS column
	var last *corev1.Pod
	for !hasCounts(seen, want) {
		if ctx.Err() != nil {
			var status any
			if last != nil {
				status = last.Status
			}
			t.Fatalf("liveness: restarts seen %v within 3m, want 1..%d; back-offs %q; last status %s\n%s",
				seen, want, backoffMsgs, lcJSON(status), c.kubectlNoFail("describe", "pod", "liveness"))
		}
		if err := lcAlive(c); err != nil {
			t.Fatal(err)
		}
		p, err := cs.CoreV1().Pods("default").Get(ctx, "liveness", metav1.GetOptions{})
		if err != nil {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		last = p
		st := containerStatus(p, "app")
		if st == nil {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		if w := st.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			if len(backoffMsgs) == 0 || backoffMsgs[len(backoffMsgs)-1] != w.Message {
				backoffMsgs = append(backoffMsgs, w.Message)
				if got := kubectlStatus(t, c, "liveness"); got != "CrashLoopBackOff" && got != "Running" {
					t.Errorf("kubectl get pod liveness: STATUS %s in back-off", got)
				} else if got == "CrashLoopBackOff" {
					sawCrashLoop = true
				}
			}
		}
		if r := st.State.Running; r != nil && st.RestartCount > 0 && st.RestartCount <= want {
			if _, ok := seen[st.RestartCount]; !ok {
				lt := st.LastTerminationState.Terminated
				if lt == nil {
					t.Fatalf("restart %d: running without lastState.terminated: %s", st.RestartCount, lcJSON(st))
				}
				seen[st.RestartCount] = restartObs{count: st.RestartCount, finished: lt.FinishedAt.Time, started: r.StartedAt.Time,
					prevID: lt.ContainerID, containerID: st.ContainerID}
				t.Logf("restart %d: previous run ended %s (exit %d, %s), this one started %s: gap %v",
					st.RestartCount, lt.FinishedAt.Format(time.TimeOnly), lt.ExitCode, lt.Reason, r.StartedAt.Format(time.TimeOnly), seen[st.RestartCount].gap())
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Every restart is a new container; the gap before each restart does
	// not shrink (1 s tolerance: timestamps have seconds), and it grows
	// from the first restart to the last.
	var gaps []time.Duration
	for n := int32(1); n <= want; n++ {
		o := seen[n]
		if o.containerID == o.prevID || o.containerID == "" {
			t.Errorf("restart %d: container %q, previous %q: want a new container", n, o.containerID, o.prevID)
		}
		if n > 1 && seen[n-1].containerID != o.prevID {
			t.Errorf("restart %d: lastState is container %s, want the run before (%s)", n, o.prevID, seen[n-1].containerID)
		}
		gaps = append(gaps, o.gap())
	}
	for i := 1; i < len(gaps); i++ {
		if gaps[i] < gaps[i-1]-time.Second {
			t.Errorf("back-off shrank: gaps before restarts %v", gaps)
		}
	}
	if gaps[len(gaps)-1] <= gaps[0]+time.Second {
		t.Errorf("back-off did not grow: gaps before restarts %v", gaps)
	}
	// The kubelet says which delay it waits: 10 s, then 20 s.
	i10 := slices.IndexFunc(backoffMsgs, func(m string) bool { return strings.HasPrefix(m, "back-off 10s ") })
	i20 := slices.IndexFunc(backoffMsgs, func(m string) bool { return strings.HasPrefix(m, "back-off 20s ") })
	if i10 < 0 || i20 < 0 || i20 < i10 {
		t.Errorf("CrashLoopBackOff messages %q: want back-off 10s, then 20s", backoffMsgs)
	}
	if !sawCrashLoop {
		t.Errorf("kubectl get pod never showed STATUS CrashLoopBackOff during the back-offs")
	}
	if lt := containerStatus(last, "app").LastTerminationState.Terminated; lt == nil || lt.ExitCode != 137 {
		t.Errorf("killed run: lastState %s, want exit code 137 (SIGKILL after the grace period)", lcJSON(lt))
	}
	ev := lcKubectl(t, c, "get", "events", "--field-selector", "involvedObject.name=liveness", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
	if !strings.Contains(ev, "failed liveness probe, will be restarted") || !strings.Contains(ev, "Unhealthy: Liveness probe failed") {
		t.Errorf("events of pod liveness lack the liveness kill:\n%s", ev)
	}
}

func hasCounts(seen map[int32]restartObs, n int32) bool {
	for i := int32(1); i <= n; i++ {
		if _, ok := seen[i]; !ok {
			return false
		}
	}
	return true
}

// endpointReady is the ready condition of the endpoint of ip in the
// service's EndpointSlices ("absent" when none lists it).
func endpointReady(t *testing.T, c *netCluster, svc, ip string) string {
	t.Helper()
	out := lcKubectl(t, c, "get", "endpointslices", "-l", discoveryv1.LabelServiceName+"="+svc, "-o", "json")
	var list discoveryv1.EndpointSliceList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if slices.Contains(ep.Addresses, ip) {
				if ep.Conditions.Ready == nil {
					return "nil"
				}
				return fmt.Sprint(*ep.Conditions.Ready)
			}
		}
	}
	return "absent"
}

func testReadinessEndpointSlice(t *testing.T, c *netCluster) {
	var ip string
	lcWait(t, c, 2*time.Minute, time.Second, "pod readiness Ready", func() (bool, string) {
		p := lcPod(t, c, "readiness")
		ip = p.Status.PodIP
		return podCondition(&p, corev1.PodReady) == corev1.ConditionTrue && ip != "", lcJSON(p.Status)
	}, c.describe("pod", "readiness"))
	dumpSlices := func() string { return c.kubectlNoFail("get", "endpointslices", "-o", "yaml") }
	for i, step := range []struct {
		cmd   []string
		ready corev1.ConditionStatus
		ep    string
	}{
		{nil, corev1.ConditionTrue, "true"},
		{[]string{"rm", "/tmp/ready"}, corev1.ConditionFalse, "false"},
		{[]string{"touch", "/tmp/ready"}, corev1.ConditionTrue, "true"},
		{[]string{"rm", "/tmp/ready"}, corev1.ConditionFalse, "false"},
	} {
		if step.cmd != nil {
			lcKubectl(t, c, append([]string{"exec", "readiness", "--"}, step.cmd...)...)
		}
		lcWait(t, c, time.Minute, 500*time.Millisecond, fmt.Sprintf("step %d %v: pod Ready %s and its endpoint ready %s", i, step.cmd, step.ready, step.ep), func() (bool, string) {
			p := lcPod(t, c, "readiness")
			got := endpointReady(t, c, "readiness", ip)
			return podCondition(&p, corev1.PodReady) == step.ready && got == step.ep,
				fmt.Sprintf("pod Ready %s, endpoint ready %s", podCondition(&p, corev1.PodReady), got)
		}, c.describe("pod", "readiness"), dumpSlices)
	}
	// Readiness never restarts the container; the unready pod stays
	// Running and still listed (not ready) in the slice.
	p := lcPod(t, c, "readiness")
	st := containerStatus(&p, "web")
	if st == nil || st.RestartCount != 0 || st.State.Running == nil || st.Ready || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("unready pod: phase %s, container %s: want Running, not ready, never restarted", p.Status.Phase, lcJSON(st))
	}
	if podCondition(&p, corev1.ContainersReady) != corev1.ConditionFalse {
		t.Fatalf("ContainersReady %s, want False", podCondition(&p, corev1.ContainersReady))
	}
}

func testOOMKilled(t *testing.T, c *netCluster) {
	// restartPolicy Never: the pod fails and its container stays
	// terminated with the reason.
	lcWait(t, c, 2*time.Minute, time.Second, "pod oom-never Failed", func() (bool, string) {
		p := lcPod(t, c, "oom-never")
		return p.Status.Phase == corev1.PodFailed, lcJSON(p.Status)
	}, c.describe("pod", "oom-never"))
	p := lcPod(t, c, "oom-never")
	st := containerStatus(&p, "hog")
	if st == nil || st.State.Terminated == nil || st.State.Terminated.Reason != "OOMKilled" || st.State.Terminated.ExitCode != 137 {
		t.Errorf("oom-never: container %s, want state.terminated OOMKilled with exit code 137", lcJSON(st))
	}
	if got := kubectlStatus(t, c, "oom-never"); got != "OOMKilled" {
		t.Errorf("kubectl get pod oom-never: STATUS %s, want OOMKilled", got)
	}
	// restartPolicy Always: the kill is in lastState once it restarts.
	lcWait(t, c, 2*time.Minute, time.Second, "pod oom-always restarted after an OOM kill", func() (bool, string) {
		p := lcPod(t, c, "oom-always")
		st := containerStatus(&p, "hog")
		if st == nil || st.RestartCount < 1 || st.LastTerminationState.Terminated == nil {
			return false, lcJSON(p.Status)
		}
		lt := st.LastTerminationState.Terminated
		if lt.Reason != "OOMKilled" || lt.ExitCode != 137 {
			t.Fatalf("oom-always: lastState %s, want terminated OOMKilled with exit code 137", lcJSON(lt))
		}
		return true, ""
	}, c.describe("pod", "oom-always"))
	out := lcKubectl(t, c, "describe", "pod", "oom-always")
	if !strings.Contains(out, "OOMKilled") {
		t.Errorf("kubectl describe pod oom-always does not say OOMKilled:\n%s", out)
	}
}

func testImportedImage(t *testing.T, c *netCluster, node *netNode) {
	// v1 an OCI tarball, v2 a gzipped docker-archive, in one import.
	const ref, ref2 = "docker.io/library/imported:v1", "docker.io/library/imported:v2"
	pod := func(name, image string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    imagePullPolicy: Never
    command: [sh, -c, 'echo imported image runs; exec sleep 3600']
`, name, node.Name, image)
	}
	// Before the import the image is absent: ErrImageNeverPull, as for an
	// image never imported.
	lcApply(t, c, pod("imported", "imported:v1")+"---\n"+pod("never-imported", "docker.io/library/notimported:v1"))
	neverPull := func(name string) (bool, string) {
		p := lcPod(t, c, name)
		st := containerStatus(&p, "app")
		if st == nil || st.State.Waiting == nil || st.State.Waiting.Reason != "ErrImageNeverPull" {
			return false, lcJSON(p.Status)
		}
		return p.Status.Phase == corev1.PodPending, lcJSON(p.Status)
	}
	for _, name := range []string{"imported", "never-imported"} {
		lcWait(t, c, time.Minute, time.Second, name+": ErrImageNeverPull", func() (bool, string) { return neverPull(name) }, c.describe("pod", name))
		if got := kubectlStatus(t, c, name); got != "ErrImageNeverPull" {
			t.Errorf("kubectl get pod %s: STATUS %s, want ErrImageNeverPull", name, got)
		}
	}

	dir := t.TempDir()
	img, img2 := filepath.Join(dir, "imported.tar"), filepath.Join(dir, "imported-v2.tar.gz")
	if err := testimage.WriteOCI(img, ref); err != nil {
		t.Fatal(err)
	}
	if err := testimage.WriteDockerArchive(filepath.Join(dir, "v2.tar"), ref2); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", "gzip -c "+filepath.Join(dir, "v2.tar")+" > "+img2).CombinedOutput(); err != nil {
		t.Fatalf("gzip: %v: %s", err, out)
	}
	skiff := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, skiffBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("skiff %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := skiff("images", "import", img, img2, "--data-dir", node.DataDir); !strings.Contains(out, "imported "+ref) || !strings.Contains(out, "imported "+ref2) {
		t.Fatalf("skiff images import: %q, want it to name %s and %s", out, ref, ref2)
	}
	if out := skiff("images", "list", "--data-dir", node.DataDir); !strings.Contains(out, ref) || !strings.Contains(out, ref2) || !strings.Contains(out, testimage.DefaultRef) {
		t.Fatalf("skiff images list:\n%s\nwant %s, %s and the seeded %s", out, ref, ref2, testimage.DefaultRef)
	}
	lcApply(t, c, pod("imported-v2", ref2))

	// The pod waiting for it runs it now, without any pull.
	lcWait(t, c, 2*time.Minute, time.Second, "pod imported Running", func() (bool, string) {
		p := lcPod(t, c, "imported")
		st := containerStatus(&p, "app")
		return st != nil && st.State.Running != nil && p.Status.Phase == corev1.PodRunning, lcJSON(p.Status)
	}, c.describe("pod", "imported"))
	for _, name := range []string{"imported", "imported-v2"} {
		lcWait(t, c, time.Minute, time.Second, "log of pod "+name, func() (bool, string) {
			out, err := c.kubectl("logs", name)
			return err == nil && strings.Contains(out, "imported image runs"), fmt.Sprintf("%q %v", out, err)
		}, c.describe("pod", name))
	}
	p := lcPod(t, c, "imported")
	if st := containerStatus(&p, "app"); !strings.HasSuffix(st.Image, "imported:v1") || !strings.HasPrefix(st.ImageID, "sha256:") {
		t.Errorf("imported: container image %q id %q", st.Image, st.ImageID)
	}
	ev := lcKubectl(t, c, "get", "events", "--field-selector", "involvedObject.name=imported", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
	if !strings.Contains(ev, "already present on machine") || strings.Contains(ev, "Failed to pull") {
		t.Errorf("events of pod imported: want the image found on the machine, no pull:\n%s", ev)
	}
	// The node reports the image among its images.
	lcWait(t, c, time.Minute, 2*time.Second, "node "+node.Name+" lists "+ref, func() (bool, string) {
		var n corev1.Node
		if err := json.Unmarshal([]byte(lcKubectl(t, c, "get", "node", node.Name, "-o", "json")), &n); err != nil {
			t.Fatal(err)
		}
		for _, img := range n.Status.Images {
			if slices.Contains(img.Names, ref) {
				return true, ""
			}
		}
		return false, lcJSON(n.Status.Images)
	})
	// The import named only its own image.
	if ok, why := neverPull("never-imported"); !ok {
		t.Errorf("never-imported after the import: %s, want still ErrImageNeverPull", why)
	}
}

// lcKillDeployment runs on agent-1 only (agent-2 is cordoned while it
// starts), so that every replacement must go to agent-2.
const lcKillDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: movers}
spec:
  replicas: 3
  selector: {matchLabels: {app: movers}}
  template:
    metadata: {labels: {app: movers}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        image: busybox
        imagePullPolicy: Never
        command: [sh, -c, 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www']
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
`

// readyOn lists the Ready, not terminating pods of sel and their nodes.
func readyOn(t *testing.T, c *netCluster, sel string) map[string]string {
	out := map[string]string{}
	for _, p := range lcPods(t, c, "-l", sel) {
		if p.DeletionTimestamp == nil && podCondition(&p, corev1.PodReady) == corev1.ConditionTrue {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

func nodeReadyStatus(t *testing.T, c *netCluster, name string) (corev1.ConditionStatus, []corev1.Taint) {
	var n corev1.Node
	if err := json.Unmarshal([]byte(lcKubectl(t, c, "get", "node", name, "-o", "json")), &n); err != nil {
		t.Fatal(err)
	}
	return netNodeReadyStatus(n), n.Spec.Taints
}

func netNodeReadyStatus(n corev1.Node) corev1.ConditionStatus {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return ""
}

// TestAgentLifecycle_AgentCrashes runs one server and two agents; its
// subtests are steps of one story and run in order.
func TestAgentLifecycle_AgentCrashes_ShortCrashAdopts_PowerLossRestartsInPlace_KilledNodePodsMove_RestartLeavesNoOrphans(t *testing.T) {
	const toleration = 10
	c := newNetCluster(t, netClusterSpec{Agents: 2, ServerArgs: []string{"--disable-agent",
		"--node-monitor-grace-period", "15s", "--default-not-ready-toleration-seconds", fmt.Sprint(toleration)}})
	c.waitNodesReady(2, 2*time.Minute)
	victim, other := c.agents[0], c.agents[1]

	lcKubectl(t, c, "cordon", other.Name)
	lcApply(t, c, lcKillDeployment)
	lcWait(t, c, 2*time.Minute, time.Second, "3 movers ready on "+victim.Name, func() (bool, string) {
		on := readyOn(t, c, "app=movers")
		return len(on) == 3, fmt.Sprint(on)
	}, func() string { return c.kubectlNoFail("get", "pods", "-o", "wide") })
	lcKubectl(t, c, "uncordon", other.Name)
	before := lcPods(t, c, "-l", "app=movers")
	gone := map[types.UID]string{} // the victim's pods, which must leave no trace
	for _, p := range before {
		if p.Spec.NodeName != victim.Name {
			t.Fatalf("pod %s on %s, want all on %s (the other node is cordoned)", p.Name, p.Spec.NodeName, victim.Name)
		}
		if !slices.ContainsFunc(p.Spec.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Key == corev1.TaintNodeUnreachable && tl.TolerationSeconds != nil && *tl.TolerationSeconds == toleration
		}) {
			t.Fatalf("pod %s tolerations %s: want unreachable for %ds from admission", p.Name, lcJSON(p.Spec.Tolerations), toleration)
		}
		gone[p.UID] = p.Name
	}
	// Everything the victim made for them exists now (so the checks after
	// the restart look in the right places).
	if left := victimLeftovers(t, victim, gone); len(left) != 7*len(gone) {
		t.Fatalf("before the kill, %s has %d traces of its 3 pods, want 7 each (container, netns, address, veth, volume dir, log dir, cgroups): %v", victim.Name, len(left), left)
	}

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow() // the next steps build on this one
		}
	}
	starts := 1 // "node ready" lines in the victim's log
	restartVictim := func(t *testing.T) {
		victim.Start()
		starts++
		lcWait(t, c, 2*time.Minute, time.Second, victim.Name+" up again", func() (bool, string) {
			return strings.Count(victim.Log(), `msg="node ready"`) == starts, fmt.Sprintf("not %d \"node ready\" in its log", starts)
		})
	}

	// A crash shorter than the grace period: the restarted agent adopts
	// the running containers, which neither restart nor change.
	step("ShortCrashAdoptsRunningContainersUnchanged", func(t *testing.T) {
		victim.Kill()
		restartVictim(t)
		lcWait(t, c, time.Minute, time.Second, "pods Ready after a short crash", func() (bool, string) {
			on := readyOn(t, c, "app=movers")
			return len(on) == 3, fmt.Sprint(on)
		})
		for _, p := range lcPods(t, c, "-l", "app=movers") {
			var was *corev1.Pod
			for i := range before {
				if before[i].UID == p.UID {
					was = &before[i]
				}
			}
			st, old := containerStatus(&p, "web"), (*corev1.ContainerStatus)(nil)
			if was != nil {
				old = containerStatus(was, "web")
			}
			if was == nil || st == nil || old == nil || st.State.Running == nil || old.State.Running == nil ||
				st.ContainerID != old.ContainerID || st.RestartCount != 0 ||
				p.Status.PodIP != was.Status.PodIP || !st.State.Running.StartedAt.Equal(&old.State.Running.StartedAt) {
				t.Fatalf("pod %s after the agent's restart: %s; before: %s: want the same running container", p.Name, lcJSON(p.Status), lcJSON(was))
			}
			out, err := c.kubectl("exec", p.Name, "--", "cat", "/www/index.html")
			if err != nil || strings.TrimSpace(out) != p.Name {
				t.Fatalf("exec in adopted pod %s: %q %v", p.Name, out, err)
			}
		}
		if left := victimLeftovers(t, victim, gone); len(left) != 7*len(gone) {
			t.Fatalf("after adoption, %s has %d traces of its 3 pods, want 7 each: %v", victim.Name, len(left), left)
		}
	})

	// A power loss (containerd and the shims die with the agent; the
	// containers' tasks are lost): the pods restart in place, their last
	// state an exit of unknown cause, as after a reboot.
	step("PowerLossRestartsContainersInPlace", func(t *testing.T) {
		victim.PowerOff()
		restartVictim(t)
		lcWait(t, c, 2*time.Minute, time.Second, "pods restarted in place after the power loss", func() (bool, string) {
			pods := lcPods(t, c, "-l", "app=movers")
			n := 0
			for _, p := range pods {
				st := containerStatus(&p, "web")
				if _, ok := gone[p.UID]; ok && p.Spec.NodeName == victim.Name && st != nil && st.RestartCount == 1 &&
					podCondition(&p, corev1.PodReady) == corev1.ConditionTrue {
					n++
				}
			}
			return n == 3, c.kubectlNoFail("get", "pods", "-o", "wide")
		}, func() string { return c.kubectlNoFail("describe", "pods") })
		for _, p := range lcPods(t, c, "-l", "app=movers") {
			lt := containerStatus(&p, "web").LastTerminationState.Terminated
			if lt == nil || lt.ExitCode != 255 || lt.Reason != "Unknown" {
				t.Errorf("pod %s lastState %s: want the lost run, terminated Unknown with exit code 255", p.Name, lcJSON(lt))
			}
			for _, was := range before {
				if was.UID == p.UID && was.Status.PodIP != p.Status.PodIP {
					t.Errorf("pod %s: IP %s before the power loss, %s after", p.Name, was.Status.PodIP, p.Status.PodIP)
				}
			}
		}
	})

	step("KilledAgentNodeNotReady_PodsMoveAfterToleration", func(t *testing.T) {
		victim.Kill()
		killed := time.Now()
		var taintAdded time.Time
		lcWait(t, c, 90*time.Second, time.Second, victim.Name+" NotReady and tainted unreachable:NoExecute", func() (bool, string) {
			ready, taints := nodeReadyStatus(t, c, victim.Name)
			for _, tn := range taints {
				if tn.Key == corev1.TaintNodeUnreachable && tn.Effect == corev1.TaintEffectNoExecute && tn.TimeAdded != nil {
					taintAdded = tn.TimeAdded.Time
				}
			}
			return ready != corev1.ConditionTrue && !taintAdded.IsZero(), fmt.Sprintf("Ready %s, taints %s", ready, lcJSON(taints))
		}, c.describe("node", victim.Name))
		t.Logf("%s NotReady, tainted %v after the kill", victim.Name, taintAdded.Sub(killed).Round(time.Second))

		lcWait(t, c, 2*time.Minute, time.Second, "3 movers ready on "+other.Name, func() (bool, string) {
			on := readyOn(t, c, "app=movers")
			n := 0
			for _, node := range on {
				if node == other.Name {
					n++
				}
			}
			return n == 3 && len(on) == 3, fmt.Sprint(on)
		}, func() string { return c.kubectlNoFail("get", "pods", "-o", "wide") })
		// The old pods were evicted (deleted, stuck terminating while their
		// node is away), no earlier than the toleration allowed.
		for _, p := range lcPods(t, c, "-l", "app=movers") {
			if _, old := gone[p.UID]; !old {
				continue
			}
			if p.DeletionTimestamp == nil {
				t.Fatalf("old pod %s on the dead node is not being deleted", p.Name)
			}
			grace := int64(0)
			if p.DeletionGracePeriodSeconds != nil {
				grace = *p.DeletionGracePeriodSeconds
			}
			deleted := p.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
			if deleted.Before(taintAdded.Add(toleration*time.Second - time.Second)) {
				t.Errorf("pod %s deleted at %s, the taint came at %s: before its %ds toleration", p.Name,
					deleted.Format(time.TimeOnly), taintAdded.Format(time.TimeOnly), toleration)
			}
		}
		// One evicted pod is force-deleted while its node is down: the
		// restarted agent finds containers of a pod the API no longer has.
		var forced string
		for _, name := range gone {
			forced = name
			break
		}
		lcKubectl(t, c, "delete", "pod", forced, "--force", "--grace-period=0")
	})

	step("RestartedAgentLeavesNoOrphans", func(t *testing.T) {
		restartVictim(t)
		lcWait(t, c, 2*time.Minute, time.Second, victim.Name+" Ready again and untainted", func() (bool, string) {
			ready, taints := nodeReadyStatus(t, c, victim.Name)
			return ready == corev1.ConditionTrue && len(taints) == 0, fmt.Sprintf("Ready %s, taints %s", ready, lcJSON(taints))
		}, c.describe("node", victim.Name))
		lcWait(t, c, 2*time.Minute, time.Second, "the evicted pods gone from the API", func() (bool, string) {
			var left []string
			for _, p := range lcPods(t, c, "-A") {
				if _, old := gone[p.UID]; old {
					left = append(left, p.Name)
				}
			}
			return len(left) == 0, fmt.Sprint(left)
		}, func() string { return c.kubectlNoFail("get", "pods", "-o", "wide") })
		lcWait(t, c, 30*time.Second, time.Second, "no trace of the deleted pods on "+victim.Name, func() (bool, string) {
			left := victimLeftovers(t, victim, gone)
			return len(left) == 0, strings.Join(left, "\n")
		})
		// And nothing else either: the node runs no pod now.
		if pods := lcPods(t, c, "-A", "--field-selector", "spec.nodeName="+victim.Name); len(pods) != 0 {
			t.Fatalf("pods on %s after the restart: %d", victim.Name, len(pods))
		}
		if left := nodeContents(t, victim); len(left) != 0 {
			t.Fatalf("%s runs no pod, but has:\n%s", victim.Name, strings.Join(left, "\n"))
		}
		if on := readyOn(t, c, "app=movers"); len(on) != 3 {
			t.Fatalf("movers after the restart: %v, want 3 ready", on)
		}
	})
}

// nodeState is what a node's agent holds for pods: containerd containers
// (by pod UID), netns files and mounts, address allocations and veths.
type nodeState struct {
	containers map[string][]string // pod UID → container IDs
	netns      []string            // names in --netns-dir
	netnsMnt   []string            // mounts below --netns-dir
	allocs     []string            // files in <data-dir>/agent/network/pods
	veths      []string            // veth links in the node's namespace
	volumes    []string            // pod dirs in <data-dir>/agent/pods
	logs       []string            // pod dirs in --pod-log-dir
	fifos      []string            // stdio FIFOs in <data-dir>/agent/containers/fifo
	cgroups    []string            // pod cgroups (hierarchy:path) below --cgroup-root
}

// podCgroups lists the pod<uid> cgroups below the node's --cgroup-root
// in every hierarchy, as hierarchy:path.
func podCgroups(n *netNode) []string {
	var out []string
	hiers, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hiers {
		root := filepath.Join(h, "skiff-e2e", n.NS)
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.HasPrefix(d.Name(), "pod") {
				rel, _ := filepath.Rel(root, p)
				out = append(out, filepath.Base(h)+":"+rel)
				return filepath.SkipDir
			}
			return nil
		})
	}
	return out
}

func readNodeState(t *testing.T, n *netNode) nodeState {
	t.Helper()
	var s nodeState
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sock := filepath.Join(n.DataDir, "agent", "containerd", "containerd.sock")
	cl, err := client.New(sock, client.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("containerd of %s: %v", n.Name, err)
	}
	defer cl.Close()
	ctrs, err := cl.Containers(namespaces.WithNamespace(ctx, "skiff"))
	if err != nil {
		t.Fatalf("containers of %s: %v", n.Name, err)
	}
	s.containers = map[string][]string{}
	for _, ctr := range ctrs {
		labels, err := ctr.Labels(namespaces.WithNamespace(ctx, "skiff"))
		if err != nil {
			t.Fatalf("labels of container %s: %v", ctr.ID(), err)
		}
		uid := labels["io.skiff.pod.uid"]
		s.containers[uid] = append(s.containers[uid], ctr.ID())
	}
	nsDir := filepath.Join(n.DataDir, "netns")
	s.netns = dirNames(t, nsDir)
	mps, err := mountinfo.Under(nsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range mps {
		if mp != nsDir {
			s.netnsMnt = append(s.netnsMnt, filepath.Base(mp))
		}
	}
	s.allocs = dirNames(t, filepath.Join(n.DataDir, "agent", "network", "pods"))
	out, err := n.Exec(ctx, "ip", "-o", "link", "show", "type", "veth")
	if err != nil {
		t.Fatalf("veths of %s: %v: %s", n.Name, err, out)
	}
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			// Pods' host ends are veth<hash>; eth0 is the node's own cable.
			if name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@"); strings.HasPrefix(name, "veth") {
				s.veths = append(s.veths, name)
			}
		}
	}
	s.volumes = dirNames(t, filepath.Join(n.DataDir, "agent", "pods"))
	s.logs = dirNames(t, filepath.Join(n.DataDir, "pod-logs"))
	s.fifos = dirNames(t, filepath.Join(n.DataDir, "agent", "containers", "fifo"))
	s.cgroups = podCgroups(n)
	return s
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// victimLeftovers lists what node n still holds for the pods in uids.
func victimLeftovers(t *testing.T, n *netNode, uids map[types.UID]string) []string {
	t.Helper()
	s := readNodeState(t, n)
	var left []string
	for uid, name := range uids {
		u := string(uid)
		if ids := s.containers[u]; len(ids) > 0 {
			left = append(left, fmt.Sprintf("pod %s: %d containers in containerd", name, len(ids)))
		}
		if slices.Contains(s.netns, u) || slices.Contains(s.netnsMnt, u) {
			left = append(left, fmt.Sprintf("pod %s: netns %s", name, filepath.Join(n.DataDir, "netns", u)))
		}
		if slices.Contains(s.allocs, u+".json") {
			left = append(left, fmt.Sprintf("pod %s: address allocation %s.json", name, u))
		}
		if v := podnet.HostVethName(u); slices.Contains(s.veths, v) {
			left = append(left, fmt.Sprintf("pod %s: veth %s", name, v))
		}
		if slices.Contains(s.volumes, u) {
			left = append(left, fmt.Sprintf("pod %s: volume dir", name))
		}
		if slices.ContainsFunc(s.logs, func(d string) bool { return strings.HasSuffix(d, "_"+u) }) {
			left = append(left, fmt.Sprintf("pod %s: log dir", name))
		}
		if slices.ContainsFunc(s.cgroups, func(cg string) bool { return strings.HasSuffix(cg, "pod"+u) }) {
			left = append(left, fmt.Sprintf("pod %s: cgroups", name))
		}
	}
	slices.Sort(left)
	return left
}

// nodeContents lists every pod trace on n, whoever it belongs to.
func nodeContents(t *testing.T, n *netNode) []string {
	s := readNodeState(t, n)
	var out []string
	for uid, ids := range s.containers {
		out = append(out, fmt.Sprintf("containers of pod %s: %v", uid, ids))
	}
	for _, x := range s.netns {
		out = append(out, "netns "+x)
	}
	for _, x := range s.netnsMnt {
		out = append(out, "netns mount "+x)
	}
	for _, x := range s.allocs {
		out = append(out, "address allocation "+x)
	}
	for _, x := range s.veths {
		out = append(out, "veth "+x)
	}
	for _, x := range s.volumes {
		out = append(out, "volume dir "+x)
	}
	for _, x := range s.logs {
		out = append(out, "log dir "+x)
	}
	for _, x := range s.fifos {
		out = append(out, "stdio FIFO "+x)
	}
	for _, x := range s.cgroups {
		out = append(out, "cgroup "+x)
	}
	return out
}
