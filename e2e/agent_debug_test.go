package e2e

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const debugPods = `apiVersion: v1
kind: Pod
metadata: {name: target, labels: {app: debug}}
spec:
  nodeSelector: {kubernetes.io/hostname: ` + streamNode + `}
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    imagePullPolicy: Never
    command: [sh, -c, 'exec sleep 31337']
---
apiVersion: v1
kind: ReplicationController
metadata: {name: keeper}
spec:
  replicas: 2
  selector: {app: rc}
  template:
    metadata: {labels: {app: rc}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        imagePullPolicy: Never
        command: [sh, -c, 'exec sleep 3600']
`

// TestAgent_KubectlDebugIT_AttachesEphemeralContainer_ReplicationControllerKeepsReplicas
// drives two features end to end on a real agent: `kubectl debug -it` adds
// an ephemeral container to a running pod, in the target container's PID
// namespace, and attaches a terminal to it; a ReplicationController
// replaces a deleted pod and follows a scale.
func TestAgent_KubectlDebugIT_AttachesEphemeralContainer_ReplicationControllerKeepsReplicas(t *testing.T) {
	c := newNetCluster(t, netClusterSpec{Agents: 1})
	c.waitNodesReady(2, 2*time.Minute)
	c.kubectlIn(debugPods, "apply", "-f", "-")
	c.waitPodsReady("app=debug", 1, 3*time.Minute)

	t.Run("kubectl debug -it runs an ephemeral container beside the target", func(t *testing.T) {
		debugTTY(t, c, kubectlVersions(t)["1.33"])
		var pod corev1.Pod
		if err := json.Unmarshal([]byte(c.kubectlOK("get", "pod", "target", "-o", "json")), &pod); err != nil {
			t.Fatal(err)
		}
		if len(pod.Spec.EphemeralContainers) != 1 || len(pod.Status.EphemeralContainerStatuses) != 1 {
			t.Fatalf("ephemeral containers %d, statuses %d; want 1 and 1", len(pod.Spec.EphemeralContainers), len(pod.Status.EphemeralContainerStatuses))
		}
		// The target kept running; the debugger is not restarted after it exits.
		if st := pod.Status.ContainerStatuses; len(st) != 1 || st[0].State.Running == nil || st[0].RestartCount != 0 {
			t.Fatalf("target container status %+v, want running, never restarted", st)
		}
	})

	t.Run("a ReplicationController replaces a deleted pod and follows a scale", func(t *testing.T) {
		before := c.waitPodsReady("app=rc", 2, 3*time.Minute)
		c.kubectlOK("delete", "pod", before[0].Name, "--wait=false")
		after := c.waitPodsReady("app=rc", 2, 2*time.Minute)
		if slices.ContainsFunc(after, func(p corev1.Pod) bool { return p.Name == before[0].Name }) {
			t.Fatalf("deleted pod %s still counted: %v", before[0].Name, after)
		}
		for _, p := range after {
			if ref := metav1ControllerOf(p); ref != "ReplicationController/keeper" {
				t.Fatalf("pod %s controlled by %q, want ReplicationController/keeper", p.Name, ref)
			}
		}
		c.kubectlOK("scale", "rc", "keeper", "--replicas=3")
		c.waitPodsReady("app=rc", 3, 2*time.Minute)
	})
}

func metav1ControllerOf(p corev1.Pod) string {
	for _, r := range p.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return r.Kind + "/" + r.Name
		}
	}
	return ""
}

// debugTTY runs `kubectl debug -it target --target=app` under a
// pseudo-terminal, checks that the shell it gets sees the target's
// processes, and leaves it with exit.
func debugTTY(t *testing.T, c *netCluster, bin string) {
	s := startTTY(t, c, 120*time.Second, bin, "debug", "-it", "target", "--image=busybox", "--image-pull-policy=Never",
		"--target=app", "--container=debugger", "--", "sh")
	s.onTimeout = func() string { return c.kubectlNoFail("describe", "pod", "target") }
	// kubectl prints its hint, then attaches; the prompt may have been
	// drawn before the attach, so ask for one until it shows.
	s.waitFor("shell prompt", regexp.MustCompile(`/ # `), 60*time.Second, "\r", 2*time.Second)
	// The target's sleep is visible: the debugger shares its PID namespace.
	s.waitFor("target's process", regexp.MustCompile(`sleep 31337`), 15*time.Second, "ps\r", 2*time.Second)
	s.typeIn("echo $((6*7)); exit 0\r")
	if err := s.wait(30 * time.Second); err != nil {
		t.Fatalf("kubectl debug -it exited with %v; terminal shows %q", err, s.screen())
	}
	if !regexp.MustCompile(`(?m)^42\r?$`).MatchString(s.screen()) {
		t.Fatalf("no 42 on the terminal: %q", s.screen())
	}
}
