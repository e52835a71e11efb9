package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"skiff/runtime/containers"
)

// criLog writes lines as CRI log records ("P" for a line without newline).
func criLog(t *testing.T, path string, lines ...string) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		tag, text := "F", l
		if !strings.HasSuffix(l, "\n") {
			tag = "P"
		}
		fmt.Fprintf(&b, "2026-01-01T00:00:00.000000000Z stdout %s %s\n", tag, strings.TrimSuffix(text, "\n"))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTerminationMessage_PolicyAndExit_Table(t *testing.T) {
	many := make([]string, 100)
	for i := range many {
		many[i] = fmt.Sprintf("line %03d\n", i)
	}
	tests := []struct {
		name     string
		policy   corev1.TerminationMessagePolicy
		path     string // terminationMessagePath; "" for none
		file     *string
		log      []string
		exit     int32
		want     string
		wantTail bool // want is a suffix and the message is at most 2 KiB
	}{
		{name: "file is reported with policy File", path: "/dev/termination-log", file: sp("DONE"), log: []string{"x\n"}, want: "DONE"},
		{name: "empty file with policy File is empty even on failure", path: "/dev/termination-log", file: sp(""), log: []string{"boom\n"}, exit: 1, want: ""},
		{name: "fallback: failed container with empty file reports its log", policy: corev1.TerminationMessageFallbackToLogsOnError,
			path: "/dev/termination-log", file: sp(""), log: []string{"DONE"}, exit: 1, want: "DONE"},
		{name: "fallback: the file wins when written", policy: corev1.TerminationMessageFallbackToLogsOnError,
			path: "/dev/termination-log", file: sp("OK"), log: []string{"DONE\n"}, exit: 1, want: "OK"},
		{name: "fallback: a succeeded container reports its file", policy: corev1.TerminationMessageFallbackToLogsOnError,
			path: "/dev/termination-log", file: sp("OK"), log: []string{"DONE\n"}, want: "OK"},
		{name: "fallback: a succeeded container never reports its log", policy: corev1.TerminationMessageFallbackToLogsOnError,
			path: "/dev/termination-log", file: sp(""), log: []string{"DONE\n"}, want: ""},
		{name: "fallback: missing file on failure reports the log", policy: corev1.TerminationMessageFallbackToLogsOnError,
			path: "/dev/termination-log", log: []string{"a\n", "b\n"}, exit: 2, want: "a\nb\n"},
		{name: "fallback: no path on failure reports the log", policy: corev1.TerminationMessageFallbackToLogsOnError,
			log: []string{"oops\n"}, exit: 2, want: "oops\n"},
		{name: "fallback: the log is cut to its last 80 lines and 2 KiB", policy: corev1.TerminationMessageFallbackToLogsOnError,
			path: "/dev/termination-log", file: sp(""), log: many, exit: 1, want: "line 099\n", wantTail: true},
		{name: "the file is cut to its last 4 KiB", path: "/dev/termination-log", file: sp(strings.Repeat("a", 5000) + "END"),
			want: strings.Repeat("a", 4093) + "END"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "0.log")
			criLog(t, logPath, tt.log...)
			if tt.file != nil {
				if err := os.WriteFile(terminationFile(logPath), []byte(*tt.file), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			c := &corev1.Container{Name: "c", TerminationMessagePath: tt.path, TerminationMessagePolicy: tt.policy}
			st := containers.ContainerStatus{State: containers.StateExited, ExitCode: tt.exit}
			got := terminationMessage(context.Background(), c, st, logPath)
			if tt.wantTail {
				if !strings.HasSuffix(got, tt.want) || len(got) > maxTerminationLogBytes || strings.Contains(got, "line 019\n") {
					t.Fatalf("message %q (%d bytes) is not the log's tail", got, len(got))
				}
				return
			}
			if got != tt.want {
				t.Fatalf("message %q, want %q", got, tt.want)
			}
		})
	}
}

func sp(s string) *string { return &s }

func TestTerminationMount_NoPath_NoMount(t *testing.T) {
	if _, ok, err := terminationMount(&corev1.Container{}, filepath.Join(t.TempDir(), "0.log")); ok || err != nil {
		t.Fatalf("mount %v, err %v", ok, err)
	}
}

func TestTerminationMount_Path_WorldWritableEmptyFile(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "3.log")
	if err := os.WriteFile(terminationFile(logPath), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, ok, err := terminationMount(&corev1.Container{TerminationMessagePath: "/dev/termination-custom-log"}, logPath)
	if err != nil || !ok {
		t.Fatalf("mount %v, err %v", ok, err)
	}
	if m.ContainerPath != "/dev/termination-custom-log" || m.HostPath != terminationFile(logPath) || m.ReadOnly {
		t.Fatalf("mount %+v", m)
	}
	fi, err := os.Stat(m.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
		t.Fatalf("file mode %o size %d, want an empty 0666 file", fi.Mode().Perm(), fi.Size())
	}
}

// configOf is the runtime config the newest attempt of pod/name was made with.
func (r *fakeRuntime) configOf(pod, name string) containers.ContainerConfig {
	c := r.find(pod, name)
	if c == nil {
		return containers.ContainerConfig{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfgs[c.ID]
}

func TestTerminationMessage_ReportedInContainerStatus(t *testing.T) {
	tests := []struct {
		name   string
		policy corev1.TerminationMessagePolicy
		write  string // into the mounted file
		log    []string
		exit   int32
		want   string
	}{
		{name: "from the file", write: "DONE", want: "DONE"},
		{name: "from the log of a failed container", policy: corev1.TerminationMessageFallbackToLogsOnError, log: []string{"DONE"}, exit: 1, want: "DONE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			pod := testPod("term", corev1.RestartPolicyNever, "main")
			pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-custom-log"
			pod.Spec.Containers[0].TerminationMessagePolicy = tt.policy
			h.create(pod)
			c := h.running("term", "main", 0)
			cfg := h.rt.configOf("term", "main")
			var host string
			for _, m := range cfg.Mounts {
				if m.ContainerPath == "/dev/termination-custom-log" {
					host = m.HostPath
				}
			}
			if host == "" {
				t.Fatalf("no mount at the termination message path: %+v", cfg.Mounts)
			}
			if err := os.WriteFile(host, []byte(tt.write), 0o666); err != nil {
				t.Fatal(err)
			}
			criLog(t, cfg.LogPath, tt.log...)
			h.rt.exit(c.ID, tt.exit, "")
			h.waitFor("terminated with the message", func() bool {
				cs := h.cstatus("term", "main")
				return cs != nil && cs.State.Terminated != nil && cs.State.Terminated.Message == tt.want
			})
		})
	}
}

func TestInitContainerFailing_LaterContainersWaitPodInitializing(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("init", corev1.RestartPolicyAlways, "run1")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init1", Image: "busybox"}, {Name: "init2", Image: "busybox"}}
	h.create(pod)
	c := h.running("init", "init1", 0)
	check := func() {
		t.Helper()
		for _, name := range []string{"init2", "run1"} {
			cs := h.cstatus("init", name)
			if cs == nil || cs.State.Waiting == nil || cs.State.Waiting.Reason != reasonPodInitializing {
				t.Fatalf("%s: %+v, want waiting PodInitializing", name, cs)
			}
		}
	}
	h.waitFor("statuses written", func() bool { return h.cstatus("init", "init2") != nil })
	check()
	h.rt.exit(c.ID, 1, "")
	c = h.running("init", "init1", 1)
	check()
	h.rt.exit(c.ID, 1, "")
	h.waitFor("init1 restarted and back-off", func() bool {
		cs := h.cstatus("init", "init1")
		return cs != nil && cs.RestartCount == 1 && cs.LastTerminationState.Terminated != nil
	})
	check()
	p := h.get("init")
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodInitialized {
			if cond.Status != corev1.ConditionFalse || cond.Reason != "ContainersNotInitialized" ||
				cond.Message != "containers with incomplete status: [init1 init2]" {
				t.Fatalf("Initialized condition %+v", cond)
			}
			return
		}
	}
	t.Fatal("no Initialized condition")
}

func TestCommandAndArgs_ExpandFromEnv(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := testPod("expand", corev1.RestartPolicyNever, "main")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TEST_VAR", Value: "test-value"}}
	pod.Spec.Containers[0].Command = []string{"sh", "-c", `TEST_VAR=wrong echo "$(TEST_VAR)"`}
	pod.Spec.Containers[0].Args = []string{"$(TEST_VAR)", "$$(TEST_VAR)", "$(UNSET)"}
	h.create(pod)
	h.running("expand", "main", 0)
	cfg := h.rt.configOf("expand", "main")
	if got := strings.Join(cfg.Command, "|"); got != `sh|-c|TEST_VAR=wrong echo "test-value"` {
		t.Fatalf("command %q", cfg.Command)
	}
	if got := strings.Join(cfg.Args, "|"); got != "test-value|$(TEST_VAR)|$(UNSET)" {
		t.Fatalf("args %q", cfg.Args)
	}
}

func TestSysctls_ForbiddenFailsPod_SafeReachRuntime(t *testing.T) {
	h := newHarness(t)
	h.start()
	bad := testPod("unsafe", corev1.RestartPolicyNever, "main")
	bad.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{
		{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "kernel.msgmax", Value: "10000"}}}
	h.create(bad)
	h.waitFor("pod failed with SysctlForbidden", func() bool {
		p := h.get("unsafe")
		return p != nil && p.Status.Phase == corev1.PodFailed && p.Status.Reason == "SysctlForbidden" &&
			strings.Contains(p.Status.Message, `"kernel.msgmax" not allowlisted`)
	})
	if h.rt.find("unsafe", "main") != nil {
		t.Fatal("a container of a pod with a forbidden sysctl was created")
	}
	if !h.rec.has("SysctlForbidden") {
		t.Fatal("no SysctlForbidden event")
	}

	good := testPod("safe", corev1.RestartPolicyNever, "main")
	good.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel/shm_rmid_forced", Value: "1"}}}
	h.create(good)
	h.running("safe", "main", 0)
	if got := h.rt.configOf("safe", "main").Security.Sysctls; len(got) != 1 || got["kernel.shm_rmid_forced"] != "1" {
		t.Fatalf("sysctls given to the runtime: %v", got)
	}
}
