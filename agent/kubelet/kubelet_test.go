package kubelet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"skiff/runtime/containers"
)

func TestBackoffDoublesToFiveMinutesAndResetsAfterTenQuiet(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	b := newBackoff(clk)
	want := []time.Duration{10, 20, 40, 80, 160, 300, 300}
	for i, w := range want {
		if got := b.next("p/c"); got != w*time.Second {
			t.Fatalf("restart %d: delay %s, want %s", i, got, w*time.Second)
		}
		clk.Step(time.Second)
	}
	if in, d, _ := b.inBackoffSince("p/c", clk.Now()); !in || d != 5*time.Minute {
		t.Fatalf("in back-off right after an exit: %v %s", in, d)
	}
	clk.Step(11 * time.Minute)
	if in, _, _ := b.inBackoffSince("p/c", clk.Now()); in {
		t.Fatal("still in back-off after 10 quiet minutes")
	}
	if got := b.next("p/c"); got != 10*time.Second {
		t.Fatalf("delay after reset = %s, want 10s", got)
	}
}

func TestRunningPodReportsStatusAndConditions(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.create(testPod("web", corev1.RestartPolicyAlways, "app"))
	h.running("web", "app", 0)
	h.waitFor("Ready", func() bool { return h.condition("web", corev1.PodReady) == corev1.ConditionTrue })
	p := h.get("web")
	st := p.Status
	if st.Phase != corev1.PodRunning || st.HostIP != "192.168.1.10" || len(st.HostIPs) != 1 ||
		!strings.HasPrefix(st.PodIP, "10.42.0.") || len(st.PodIPs) != 1 || st.StartTime == nil ||
		st.QOSClass != corev1.PodQOSBestEffort {
		t.Fatalf("status = %+v", st)
	}
	want := map[corev1.PodConditionType]bool{corev1.PodScheduled: true, corev1.PodReadyToStartContainers: true,
		corev1.PodInitialized: true, corev1.ContainersReady: true, corev1.PodReady: true}
	for _, c := range st.Conditions {
		if want[c.Type] && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() || c.Type == corev1.PodScheduled {
			delete(want, c.Type)
		}
	}
	if len(want) != 0 {
		t.Fatalf("conditions missing or false: %v in %+v", want, st.Conditions)
	}
	cs := st.ContainerStatuses[0]
	if cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started || cs.RestartCount != 0 ||
		!strings.HasPrefix(cs.ContainerID, "containerd://") || cs.Image != "docker.io/library/busybox:1.36" || cs.ImageID == "" {
		t.Fatalf("container status = %+v", cs)
	}
	if !h.rec.has("Pulled: ") || !h.rec.has("Created: Created container: app") || !h.rec.has("Started: Started container app") {
		t.Fatalf("events = %v", h.rec.events)
	}
	if got := h.log.matching("files web 10.42.0."); len(got) != 1 {
		t.Fatalf("pod files written %v", got)
	}
}

func TestRestartPolicyDecidesRestartAndPhase(t *testing.T) {
	tests := []struct {
		name        string
		policy      corev1.RestartPolicy
		exit        int32
		restarts    bool
		wantPhase   corev1.PodPhase
		wantNetDown bool
	}{
		{"never-success-succeeds", corev1.RestartPolicyNever, 0, false, corev1.PodSucceeded, true},
		{"never-failure-fails", corev1.RestartPolicyNever, 1, false, corev1.PodFailed, true},
		{"onfailure-success-succeeds", corev1.RestartPolicyOnFailure, 0, false, corev1.PodSucceeded, true},
		{"onfailure-failure-restarts", corev1.RestartPolicyOnFailure, 1, true, corev1.PodRunning, false},
		{"always-success-restarts", corev1.RestartPolicyAlways, 0, true, corev1.PodRunning, false},
		{"always-oom-restarts", corev1.RestartPolicyAlways, 137, true, corev1.PodRunning, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			h.create(testPod("job", tc.policy, "main"))
			c := h.running("job", "main", 0)
			reason := ""
			if tc.exit == 137 {
				reason = "OOMKilled"
			}
			h.rt.exit(c.ID, tc.exit, reason)
			if tc.restarts {
				h.running("job", "main", 1)
				h.waitFor("restartCount 1", func() bool {
					cs := h.cstatus("job", "main")
					return cs != nil && cs.RestartCount == 1 && cs.State.Running != nil && cs.LastTerminationState.Terminated != nil
				})
				if reason != "" && h.cstatus("job", "main").LastTerminationState.Terminated.Reason != reason {
					t.Fatalf("lastState = %+v", h.cstatus("job", "main").LastTerminationState)
				}
			} else {
				h.waitFor("terminal phase", func() bool { return h.phase("job") == tc.wantPhase })
				cs := h.cstatus("job", "main")
				if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != tc.exit || cs.RestartCount != 0 {
					t.Fatalf("container status = %+v", cs)
				}
				if h.condition("job", corev1.PodReady) != corev1.ConditionFalse {
					t.Fatal("a finished pod is Ready")
				}
			}
			if got := h.phase("job"); got != tc.wantPhase {
				t.Fatalf("phase = %s, want %s", got, tc.wantPhase)
			}
			if tc.wantNetDown {
				h.waitFor("network released", func() bool { return !h.net.has("uid-job") })
				if h.rt.find("job", "main") == nil {
					t.Fatal("the finished container was removed before the pod was deleted")
				}
			} else if !h.net.has("uid-job") {
				t.Fatal("network released from a running pod")
			}
		})
	}
}

func TestCrashLoopBackOffSequence(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("crash", corev1.RestartPolicyAlways, "app")
	h.create(pod)
	c := h.running("crash", "app", 0)
	// First exit restarts at once (no back-off yet).
	h.rt.exit(c.ID, 1, "")
	c = h.running("crash", "app", 1)
	for i, delay := range []string{"10s", "20s", "40s"} {
		attempt := uint32(i + 2)
		h.rt.exit(c.ID, 1, "")
		wantMsg := "back-off " + delay + " restarting failed container=app pod=crash_default(uid-crash)"
		h.waitFor("CrashLoopBackOff "+delay, func() bool {
			cs := h.cstatus("crash", "app")
			return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" && cs.State.Waiting.Message == wantMsg
		})
		d, _ := time.ParseDuration(delay)
		h.clock.Step(d - time.Second)
		time.Sleep(50 * time.Millisecond)
		if got := h.rt.find("crash", "app"); got.Attempt != attempt-1 {
			t.Fatalf("restarted before the back-off of %s ended (attempt %d)", delay, got.Attempt)
		}
		h.clock.Step(time.Second)
		c = h.running("crash", "app", attempt)
		// Only the previous attempt is kept beside the current one.
		h.waitFor("older attempts removed", func() bool {
			return len(h.log.matching("remove crash/app#")) == int(attempt)-1
		})
	}
	if !h.rec.has("BackOff: Back-off restarting failed container app in pod crash_default(uid-crash)") {
		t.Fatalf("events %v", h.rec.events)
	}
	ref, err := h.k.Container("default", "crash", "app", true)
	if err != nil || ref.Running || !strings.HasSuffix(ref.LogPath, "/app/3.log") {
		t.Fatalf("previous = %+v, %v", ref, err)
	}
	ref, err = h.k.Container("default", "crash", "app", false)
	if err != nil || !ref.Running || !strings.HasSuffix(ref.LogPath, "default_crash_uid-crash/app/4.log") {
		t.Fatalf("current = %+v, %v", ref, err)
	}
}

func TestInitContainersRunInOrderBeforeApps(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("init", corev1.RestartPolicyAlways, "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "first", Image: "busybox"}, {Name: "second", Image: "busybox"}}
	h.create(pod)
	first := h.running("init", "first", 0)
	h.waitFor("pending and not initialized", func() bool {
		return h.phase("init") == corev1.PodPending && h.condition("init", corev1.PodInitialized) == corev1.ConditionFalse
	})
	if cs := h.cstatus("init", "app"); cs == nil || cs.State.Waiting == nil || cs.State.Waiting.Reason != "PodInitializing" {
		t.Fatalf("app status before init = %+v", cs)
	}
	if h.rt.find("init", "second") != nil {
		t.Fatal("second init container started while the first runs")
	}
	h.rt.exit(first.ID, 0, "")
	second := h.running("init", "second", 0)
	if h.rt.find("init", "app") != nil {
		t.Fatal("app started before init finished")
	}
	h.rt.exit(second.ID, 0, "")
	h.running("init", "app", 0)
	h.waitFor("initialized and running", func() bool {
		return h.phase("init") == corev1.PodRunning && h.condition("init", corev1.PodInitialized) == corev1.ConditionTrue
	})
	cs := h.cstatus("init", "first")
	if cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" || !cs.Ready {
		t.Fatalf("init status = %+v", cs)
	}
	order := h.log.matching("start ")
	if strings.Join(order, ",") != "start init/first#0,start init/second#0,start init/app#0" {
		t.Fatalf("start order = %v", order)
	}
}

func TestFailedInitContainer(t *testing.T) {
	tests := []struct {
		name   string
		policy corev1.RestartPolicy
	}{
		{"never-fails-the-pod", corev1.RestartPolicyNever},
		{"always-retries-the-init-container", corev1.RestartPolicyAlways},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			pod := testPod("bad", tc.policy, "app")
			pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
			h.create(pod)
			c := h.running("bad", "setup", 0)
			h.rt.exit(c.ID, 3, "")
			if tc.policy == corev1.RestartPolicyNever {
				h.waitFor("pod failed", func() bool { return h.phase("bad") == corev1.PodFailed })
				time.Sleep(50 * time.Millisecond)
				if h.rt.find("bad", "app") != nil || h.rt.find("bad", "setup").Attempt != 0 {
					t.Fatal("containers ran after a failed init container with restartPolicy Never")
				}
				return
			}
			c = h.running("bad", "setup", 1)
			h.rt.exit(c.ID, 3, "")
			h.waitFor("init back-off", func() bool {
				cs := h.cstatus("bad", "setup")
				return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
			})
			if h.phase("bad") != corev1.PodPending {
				t.Fatalf("phase = %s", h.phase("bad"))
			}
			h.clock.Step(10 * time.Second)
			c = h.running("bad", "setup", 2)
			h.rt.exit(c.ID, 0, "")
			h.running("bad", "app", 0)
		})
	}
}

func TestSidecarInitContainerKeepsRunning(t *testing.T) {
	h := newHarness(t)
	h.start()
	always := corev1.ContainerRestartPolicyAlways
	pod := testPod("side", corev1.RestartPolicyNever, "app")
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "busybox", RestartPolicy: &always}}
	h.create(pod)
	proxy := h.running("side", "proxy", 0)
	app := h.running("side", "app", 0)
	h.rt.exit(proxy.ID, 1, "")
	h.running("side", "proxy", 1)
	h.rt.exit(app.ID, 0, "")
	h.waitFor("pod succeeded", func() bool { return h.phase("side") == corev1.PodSucceeded })
	if c := h.rt.find("side", "proxy"); c.State != containers.StateExited {
		t.Fatal("sidecar still runs after the app finished")
	}
}

func TestImagePullFailures(t *testing.T) {
	h := newHarness(t)
	h.img.absent["local:1"] = true
	h.img.setFailing("broken:1", errors.New("connection refused"))
	h.start()
	never := testPod("never", corev1.RestartPolicyAlways, "app")
	never.Spec.Containers[0].Image, never.Spec.Containers[0].ImagePullPolicy = "local:1", corev1.PullNever
	h.create(never)
	h.waitFor("ErrImageNeverPull", func() bool {
		cs := h.cstatus("never", "app")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ErrImageNeverPull" &&
			cs.State.Waiting.Message == `Container image "local:1" is not present with pull policy of Never`
	})
	pull := testPod("pull", corev1.RestartPolicyAlways, "app")
	pull.Spec.Containers[0].Image = "broken:1"
	h.create(pull)
	h.waitFor("ErrImagePull (or already ImagePullBackOff)", func() bool {
		cs := h.cstatus("pull", "app")
		return cs != nil && cs.State.Waiting != nil &&
			(cs.State.Waiting.Reason == "ErrImagePull" || cs.State.Waiting.Reason == "ImagePullBackOff")
	})
	if !h.rec.has(`Failed: Failed to pull image "broken:1": `) {
		t.Fatalf("events %v", h.rec.events)
	}
	h.stepUntil("ImagePullBackOff", time.Second, func() bool {
		cs := h.cstatus("pull", "app")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ImagePullBackOff"
	})
	if h.phase("pull") != corev1.PodPending {
		t.Fatalf("phase = %s", h.phase("pull"))
	}
	h.img.setFailing("broken:1", nil)
	h.stepUntil("container runs after the pull works", 5*time.Second, func() bool {
		c := h.rt.find("pull", "app")
		return c != nil && c.State == containers.StateRunning
	})
}

func TestHostNetworkPodUsesNodeIP(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("host", corev1.RestartPolicyAlways, "app")
	pod.Spec.HostNetwork = true
	h.create(pod)
	h.running("host", "app", 0)
	h.waitFor("pod IP is node IP", func() bool { p := h.get("host"); return p.Status.PodIP == "192.168.1.10" })
	if len(h.log.matching("net setup host")) != 0 {
		t.Fatal("hostNetwork pod got a pod network")
	}
	if ns, err := h.k.PodNetNS("default", "host"); err != nil || ns != "" {
		t.Fatalf("PodNetNS = %q, %v", ns, err)
	}
	id := h.rt.find("host", "app").ID
	h.rt.mu.Lock()
	cfg := h.rt.cfgs[id]
	h.rt.mu.Unlock()
	if !cfg.HostNetwork || cfg.NetNSPath != "" {
		t.Fatalf("container config = %+v", cfg)
	}
}

func TestLookupsForStreaming(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.create(testPod("a", corev1.RestartPolicyAlways, "one", "two"))
	h.create(testPod("b", corev1.RestartPolicyNever, "one"))
	h.running("a", "two", 0)
	b := h.running("b", "one", 0)
	h.rt.exit(b.ID, 0, "")
	h.waitFor("b succeeded", func() bool { return h.phase("b") == corev1.PodSucceeded })
	if n := h.k.RunningPods(); n != 1 {
		t.Fatalf("RunningPods = %d", n)
	}
	if in := h.k.ImagesInUse(); !in["sha256:docker.io/library/busybox:1.36"] || len(in) != 1 {
		t.Fatalf("ImagesInUse = %v", in)
	}
	if ns, err := h.k.PodNetNS("default", "a"); err != nil || ns != "/run/skiff/netns/uid-a" {
		t.Fatalf("PodNetNS = %q, %v", ns, err)
	}
	if _, err := h.k.Container("default", "a", "one", true); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("previous of a first attempt: %v", err)
	}
	if _, err := h.k.Container("default", "a", "nope", false); !errors.Is(err, ErrContainerNotFound) {
		t.Fatalf("unknown container: %v", err)
	}
	if _, err := h.k.Container("default", "zzz", "one", false); !errors.Is(err, ErrPodNotFound) {
		t.Fatalf("unknown pod: %v", err)
	}
}

func deleting(h *harness, name string, grace int64) {
	h.t.Helper()
	p := h.get(name)
	now := metav1.NewTime(h.clock.Now())
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func TestGracefulDeletionOrder(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("del", corev1.RestartPolicyAlways, "web", "worker")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}
	h.create(pod)
	h.running("del", "web", 0)
	h.running("del", "worker", 0)
	deleting(h, "del", 20)
	h.waitFor("pod object gone", func() bool { return h.get("del") == nil })
	calls := h.log.all()
	idx := func(prefix string) int {
		for i, c := range calls {
			if strings.HasPrefix(c, prefix) {
				return i
			}
		}
		t.Fatalf("no call %q in %v", prefix, calls)
		return -1
	}
	preStop, stopWeb, stopWorker := idx("exec del/web drain"), idx("stop del/web#0"), idx("stop del/worker#0")
	netDown, volDown, rmWeb := idx("net teardown uid-del"), idx("volumes teardown uid-del"), idx("remove del/web#0")
	if !(preStop < stopWeb && stopWeb < netDown && stopWorker < netDown && netDown < volDown && volDown < rmWeb) {
		t.Fatalf("order wrong: %v", calls)
	}
	if !strings.HasSuffix(calls[stopWorker], "grace=20s") {
		t.Fatalf("worker stopped with %q, want grace=20s", calls[stopWorker])
	}
	var deleted bool
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			deleted = true
		}
	}
	if !deleted || !h.rec.has("Killing: Stopping container web") {
		t.Fatalf("final delete %v, events %v", deleted, h.rec.events)
	}
	if h.rt.count() != 0 {
		t.Fatal("containers left after deletion")
	}
}

func TestSlowStopsRunInParallel(t *testing.T) {
	h := newHarness(t)
	h.rt.stopDelay = 300 * time.Millisecond
	h.start()
	h.create(testPod("slow", corev1.RestartPolicyAlways, "a", "b", "c"))
	for _, c := range []string{"a", "b", "c"} {
		h.running("slow", c, 0)
	}
	start := time.Now()
	deleting(h, "slow", 30)
	h.waitFor("pod object gone", func() bool { return h.get("slow") == nil })
	if took := time.Since(start); took > 800*time.Millisecond {
		t.Fatalf("three 300ms stops took %s: not in parallel", took)
	}
}

func TestPodDisappearingFromAPIIsStopped(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.create(testPod("gone", corev1.RestartPolicyAlways, "app"))
	h.running("gone", "app", 0)
	if err := h.client.CoreV1().Pods("default").Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("containers removed", func() bool { return h.rt.count() == 0 && !h.net.has("uid-gone") && !h.vol.has("uid-gone") })
}
func TestChangedContainerSpecRestartsContainer(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.create(testPod("upd", corev1.RestartPolicyAlways, "app", "other"))
	h.running("upd", "app", 0)
	other := h.running("upd", "other", 0)
	p := h.get("upd")
	p.Spec.Containers[0].Image = "busybox:1.37"
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := h.running("upd", "app", 1)
	if c.Image != "docker.io/library/busybox:1.37" || !h.rec.has("Killing: Container app definition changed, will be restarted") {
		t.Fatalf("image %s, events %v", c.Image, h.rec.events)
	}
	if o := h.rt.find("upd", "other"); o.ID != other.ID {
		t.Fatal("an unchanged container was restarted")
	}
}

func TestStartFailureCountsAsExitAndBacksOff(t *testing.T) {
	h := newHarness(t)
	h.rt.startErr["app"] = errors.New("exec: \"/nope\": no such file")
	h.start()
	h.create(testPod("nostart", corev1.RestartPolicyAlways, "app"))
	h.waitFor("back-off after two failed starts", func() bool {
		cs := h.cstatus("nostart", "app")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" &&
			cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.Reason == "StartError"
	})
	if !h.rec.has("Failed: Error: exec: ") {
		t.Fatalf("events %v", h.rec.events)
	}
}

func TestActiveDeadlineFailsPod(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("deadline", corev1.RestartPolicyAlways, "app")
	d := int64(30)
	pod.Spec.ActiveDeadlineSeconds = &d
	h.create(pod)
	h.running("deadline", "app", 0)
	h.stepUntil("DeadlineExceeded", 10*time.Second, func() bool {
		p := h.get("deadline")
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "DeadlineExceeded"
	})
	if c := h.rt.find("deadline", "app"); c.State != containers.StateExited {
		t.Fatal("container still runs past the deadline")
	}
}
