package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func i64(v int64) *int64 { return &v }

func TestContainerRunsToExit(t *testing.T) {
	r := newTestRuntime(t)
	tests := []struct {
		name       string
		cfg        func(cc *ContainerConfig)
		wantCode   int32
		wantReason string
		wantLog    string
	}{
		{name: "exit zero is Completed", cfg: func(cc *ContainerConfig) { cc.Command = []string{"true"} },
			wantReason: ReasonCompleted},
		{name: "non-zero exit is Error", cfg: func(cc *ContainerConfig) { cc.Command = []string{"sh", "-c", "exit 3"} },
			wantCode: 3, wantReason: ReasonError},
		{name: "Args alone replace the image Cmd",
			cfg:        func(cc *ContainerConfig) { cc.Args = []string{"echo", "args", "only"} },
			wantReason: ReasonCompleted, wantLog: "args only\n"},
		{name: "Command takes Args",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", `echo "$0-$1"`}
				cc.Args = []string{"first", "second"}
			},
			wantReason: ReasonCompleted, wantLog: "first-second\n"},
		{name: "Env overrides and extends the image env",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", `echo "$PATH $FOO"`}
				cc.Env = []string{"PATH=/bin:/sbin", "FOO=bar"}
			},
			wantReason: ReasonCompleted, wantLog: "/bin:/sbin bar\n"},
		{name: "image env is kept", cfg: func(cc *ContainerConfig) { cc.Command = []string{"sh", "-c", "echo $PATH"} },
			wantReason: ReasonCompleted, wantLog: "/usr/sbin:/usr/bin:/sbin:/bin\n"},
		{name: "working dir", cfg: func(cc *ContainerConfig) { cc.Command = []string{"pwd"}; cc.WorkingDir = "/etc" },
			wantReason: ReasonCompleted, wantLog: "/etc\n"},
		{name: "runAsUser takes its group from the image passwd",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", "id -u; id -g"}
				cc.Security.RunAsUser = i64(65534)
			},
			wantReason: ReasonCompleted, wantLog: "65534\n65534\n"},
		{name: "runAsUser, runAsGroup and supplemental groups",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", "id -u; id -g; id -G"}
				cc.Security.RunAsUser, cc.Security.RunAsGroup = i64(1000), i64(2000)
				cc.Security.SupplementalGroups = []int64{3000}
			},
			wantReason: ReasonCompleted, wantLog: "1000\n2000\n2000 3000\n"},
		{name: "read-only root filesystem",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"touch", "/newfile"}
				cc.Security.ReadOnlyRootFilesystem = true
			},
			wantCode: 1, wantReason: ReasonError, wantLog: "touch: /newfile: Read-only file system\n"},
		{name: "writable root filesystem by default", cfg: func(cc *ContainerConfig) { cc.Command = []string{"touch", "/newfile"} },
			wantReason: ReasonCompleted},
		{name: "drop ALL capabilities",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", "grep CapEff /proc/self/status"}
				cc.Security.CapDrop = []string{"ALL"}
			},
			wantReason: ReasonCompleted, wantLog: "CapEff:\t0000000000000000\n"},
		{name: "drop ALL then add NET_ADMIN",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", "grep CapEff /proc/self/status"}
				cc.Security.CapDrop, cc.Security.CapAdd = []string{"ALL"}, []string{"NET_ADMIN"}
			},
			wantReason: ReasonCompleted, wantLog: "CapEff:\t0000000000001000\n"},
		{name: "no_new_privs when escalation is disallowed",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", "grep NoNewPrivs /proc/self/status"}
				f := false
				cc.Security.AllowPrivilegeEscalation = &f
			},
			wantReason: ReasonCompleted, wantLog: "NoNewPrivs:\t1\n"},
		{name: "no no_new_privs when escalation is not disallowed",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", "grep NoNewPrivs /proc/self/status"}
			},
			wantReason: ReasonCompleted, wantLog: "NoNewPrivs:\t0\n"},
		{name: "pod sysctls are set in the container's IPC namespace",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"cat", "/proc/sys/kernel/shm_rmid_forced"}
				cc.Security.Sysctls = map[string]string{"kernel.shm_rmid_forced": "1"}
			},
			wantReason: ReasonCompleted, wantLog: "1\n"},
		{name: "a 0666 file bind-mounted under /dev is writable by a non-root user",
			cfg: func(cc *ContainerConfig) {
				f := filepath.Join(t.TempDir(), "0.termination-log")
				if err := os.WriteFile(f, nil, 0o666); err != nil || os.Chmod(f, 0o666) != nil {
					t.Fatal(err)
				}
				cc.Mounts = []Mount{{HostPath: f, ContainerPath: "/dev/termination-custom-log"}}
				cc.Security.RunAsUser = i64(10000)
				cc.Command = []string{"sh", "-c", "echo -n DONE > /dev/termination-custom-log && cat /dev/termination-custom-log"}
			},
			wantReason: ReasonCompleted, wantLog: "DONE"},
		{name: "privileged sees host devices and may mount",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", "test -e /dev/kmsg && mkdir /m && mount -t tmpfs none /m && echo mounted"}
				cc.Security.Privileged = true
			},
			wantReason: ReasonCompleted, wantLog: "mounted\n"},
		{name: "unprivileged may not mount",
			cfg: func(cc *ContainerConfig) {
				cc.Command = []string{"sh", "-c", "mkdir /m && mount -t tmpfs none /m"}
			},
			wantCode: 1, wantReason: ReasonError, wantLog: "mount: permission denied (are you root?)\n"},
		{name: "read-only and read-write bind mounts",
			cfg: func(cc *ContainerConfig) {
				dir := t.TempDir()
				if err := os.WriteFile(dir+"/f", []byte("from host\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				rw := t.TempDir()
				cc.Mounts = []Mount{{HostPath: dir, ContainerPath: "/ro", ReadOnly: true}, {HostPath: rw, ContainerPath: "/rw"}}
				cc.Command = []string{"sh", "-c", "cat /ro/f; touch /rw/x && echo rw ok; touch /ro/x 2>/dev/null || echo ro refused"}
			},
			wantReason: ReasonCompleted, wantLog: "from host\nrw ok\nro refused\n"},
		{name: "cgroup limits", cfg: func(cc *ContainerConfig) {
			cc.Resources = Resources{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20, OOMScoreAdj: 999}
			cc.Command = []string{"sh", "-c", "cat /sys/fs/cgroup/cpu/cpu.shares /sys/fs/cgroup/cpu/cpu.cfs_quota_us " +
				"/sys/fs/cgroup/memory/memory.limit_in_bytes /proc/self/oom_score_adj"}
		}, wantReason: ReasonCompleted, wantLog: "512\n50000\n67108864\n999\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := baseConfig(t)
			tt.cfg(&cc)
			id := run(t, r, cc)
			st := waitState(t, r, id, StateExited)
			if st.ExitCode != tt.wantCode || st.Reason != tt.wantReason {
				t.Fatalf("exit %d %q, want %d %q; log %q", st.ExitCode, st.Reason, tt.wantCode, tt.wantReason, logText(t, cc.LogPath, ""))
			}
			if err := r.Stop(context.Background(), id, time.Second); err != nil {
				t.Fatalf("stop of an exited container: %v", err)
			}
			r.waitOutput(id, outputDrainTimeout)
			if got := logText(t, cc.LogPath, ""); tt.wantLog != "" && got != tt.wantLog {
				t.Fatalf("log %q, want %q", got, tt.wantLog)
			}
		})
	}
}

var criLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z (stdout|stderr) [FP] `)

func TestLogsAreCRIFormatWithBothStreams(t *testing.T) {
	r := newTestRuntime(t)
	cc := baseConfig(t, "sh", "-c", "echo out1; echo err1 >&2; printf 'no newline'")
	id := run(t, r, cc)
	st := waitState(t, r, id, StateExited)
	r.waitOutput(id, outputDrainTimeout)
	raw, err := os.ReadFile(cc.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	for _, l := range lines {
		if !criLine.MatchString(l) {
			t.Fatalf("not a CRI log line: %q", l)
		}
	}
	if got := logText(t, cc.LogPath, "stdout"); got != "out1\nno newline" { // an unterminated last line stays so, as containerd's
		t.Fatalf("stdout %q", got)
	}
	if got := logText(t, cc.LogPath, "stderr"); got != "err1\n" {
		t.Fatalf("stderr %q", got)
	}
	if st.LogPath != cc.LogPath || st.PodName != cc.PodName || st.PodUID != cc.PodUID || st.Name != "main" ||
		!strings.HasPrefix(st.ImageID, "sha256:") || st.Image != testImage || st.StartedAt.IsZero() ||
		st.FinishedAt.Before(st.StartedAt) || st.CreatedAt.IsZero() {
		t.Fatalf("status %+v", st)
	}
}

func TestStopWaitsGraceThenKills(t *testing.T) {
	r := newTestRuntime(t)
	tests := []struct {
		name     string
		cmd      []string
		grace    time.Duration
		minTime  time.Duration
		maxTime  time.Duration
		wantCode int32
	}{
		{name: "SIGTERM ignored by PID 1 is followed by SIGKILL after grace", cmd: []string{"sh", "-c", "sleep 1000"},
			grace: 2 * time.Second, minTime: 2 * time.Second, maxTime: 10 * time.Second, wantCode: 137},
		{name: "SIGTERM handled exits before grace",
			cmd:   []string{"sh", "-c", "trap 'exit 0' TERM; echo ready; while true; do sleep 0.1; done"},
			grace: 30 * time.Second, maxTime: 5 * time.Second, wantCode: 0},
		{name: "zero grace kills at once", cmd: []string{"sleep", "1000"}, maxTime: 3 * time.Second, wantCode: 137},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := baseConfig(t, tt.cmd...)
			id := run(t, r, cc)
			waitState(t, r, id, StateRunning)
			if strings.Contains(strings.Join(tt.cmd, " "), "ready") {
				waitLog(t, cc.LogPath, "ready")
			}
			start := time.Now()
			if err := r.Stop(context.Background(), id, tt.grace); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if took < tt.minTime || took > tt.maxTime {
				t.Fatalf("stop took %v, want %v..%v", took, tt.minTime, tt.maxTime)
			}
			st, err := r.Status(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != StateExited || st.ExitCode != tt.wantCode {
				t.Fatalf("after stop: %s code %d, want exited %d", st.State, st.ExitCode, tt.wantCode)
			}
		})
	}
}

func TestMemoryLimitOOMKill(t *testing.T) {
	r := newTestRuntime(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Events(ctx)
	cc := baseConfig(t, "tail", "/dev/zero") // tail buffers the endless line
	cc.Resources.MemoryLimit = 16 << 20
	id := run(t, r, cc)
	st := waitState(t, r, id, StateExited)
	if st.ExitCode != 137 || st.Reason != ReasonOOMKilled {
		t.Fatalf("exit %d %q, want 137 OOMKilled", st.ExitCode, st.Reason)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-events:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatal("no event for the OOM-killed container")
		}
	}
}

func TestExec(t *testing.T) {
	r := newTestRuntime(t)
	cc := baseConfig(t, "sleep", "1000")
	cc.Env = []string{"FROM_CONTAINER=yes"}
	id := run(t, r, cc)
	waitState(t, r, id, StateRunning)
	tests := []struct {
		name       string
		req        ExecRequest
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "output and exit code", req: ExecRequest{Cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 5"}},
			wantCode: 5, wantStdout: "out\n", wantStderr: "err\n"},
		{name: "container env is inherited", req: ExecRequest{Cmd: []string{"sh", "-c", "echo $FROM_CONTAINER"}},
			wantStdout: "yes\n"},
		{name: "stdin end closes the process stdin", req: ExecRequest{Cmd: []string{"cat"}, Stdin: strings.NewReader("piped\ndata")},
			wantStdout: "piped\ndata"},
		{name: "tty", req: ExecRequest{Cmd: []string{"sh", "-c", "tty; echo $TERM"}, TTY: true},
			wantStdout: "/dev/pts/0\r\nxterm\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			tt.req.Stdout, tt.req.Stderr = &stdout, &stderr
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			code, err := r.Exec(ctx, id, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || stdout.String() != tt.wantStdout || stderr.String() != tt.wantStderr {
				t.Fatalf("exec: code %d stdout %q stderr %q; want %d %q %q", code, stdout.String(), stderr.String(),
					tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
	t.Run("a process left holding the output does not hold back the exit code", func(t *testing.T) {
		var stdout, stderr syncBuffer
		// The context outlives the drain, and the leftover sleep outlives it.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		start := time.Now()
		code, err := r.Exec(ctx, id, ExecRequest{Cmd: []string{"sh", "-c", "sleep 100 & echo hi; exit 3"}, Stdout: &stdout, Stderr: &stderr})
		if err != nil || code != 3 || stdout.String() != "hi\n" {
			t.Fatalf("exec: code %d, stdout %q, %v; want 3 and hi", code, stdout.String(), err)
		}
		t.Logf("exit code after %v", time.Since(start).Round(time.Millisecond))
	})
	t.Run("cancelled context kills the process", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if _, err := r.Exec(ctx, id, ExecRequest{Cmd: []string{"sleep", "100"}}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if time.Since(start) > 15*time.Second {
			t.Fatal("exec did not end with its context")
		}
	})
	t.Run("not running", func(t *testing.T) {
		other := run(t, r, baseConfig(t, "true"))
		waitState(t, r, other, StateExited)
		if _, err := r.Exec(context.Background(), other, ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, ErrNotRunning) {
			t.Fatalf("err = %v, want ErrNotRunning", err)
		}
	})
}

func TestAttach(t *testing.T) {
	r := newTestRuntime(t)
	t.Run("receives live output while the log continues", func(t *testing.T) {
		cc := baseConfig(t, "sh", "-c", "for i in $(seq 1 15); do echo tick $i; sleep 0.2; done")
		id := run(t, r, cc)
		waitLog(t, cc.LogPath, "tick 2\n")
		var out syncBuffer
		if err := r.Attach(context.Background(), id, AttachRequest{Stdout: &out}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "tick 15\n") || strings.Contains(out.String(), "tick 1\n") {
			t.Fatalf("attached output %q", out.String())
		}
		if log := logText(t, cc.LogPath, ""); !strings.HasPrefix(log, "tick 1\n") || !strings.HasSuffix(log, "tick 15\n") {
			t.Fatalf("log %q", log)
		}
	})
	t.Run("stdin once", func(t *testing.T) {
		cc := baseConfig(t, "sh", "-c", "read line; echo got $line; cat; echo eof")
		cc.Stdin, cc.StdinOnce = true, true
		id := run(t, r, cc)
		waitState(t, r, id, StateRunning)
		var out syncBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := r.Attach(ctx, id, AttachRequest{Stdin: strings.NewReader("hello\nmore\n"), Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != "got hello\nmore\neof\n" {
			t.Fatalf("attached output %q", out.String())
		}
		st := waitState(t, r, id, StateExited)
		if st.ExitCode != 0 {
			t.Fatalf("exit %d", st.ExitCode)
		}
	})
	t.Run("tty with resize", func(t *testing.T) {
		cc := baseConfig(t, "sh", "-c", "read line; stty size; echo got $line $TERM")
		cc.Stdin, cc.StdinOnce, cc.TTY = true, true, true
		id := run(t, r, cc)
		waitState(t, r, id, StateRunning)
		var out syncBuffer
		sizes := make(chan TermSize, 1)
		sizes <- TermSize{Width: 100, Height: 40}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stdinR, stdinW := io.Pipe()
		errc := make(chan error, 1)
		go func() {
			errc <- r.Attach(ctx, id, AttachRequest{Stdin: stdinR, Stdout: &out, TTY: true, Resize: sizes})
		}()
		time.Sleep(300 * time.Millisecond) // let the resize land before the input
		if _, err := stdinW.Write([]byte("hi\n")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "tty output", func() bool { return strings.Contains(out.String(), "got hi xterm\r\n") })
		stdinW.Close()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "40 100\r\n") {
			t.Fatalf("attached output %q lacks the terminal size", out.String())
		}
	})
	t.Run("exited container", func(t *testing.T) {
		id := run(t, r, baseConfig(t, "true"))
		waitState(t, r, id, StateExited)
		r.waitOutput(id, outputDrainTimeout)
		if err := r.Attach(context.Background(), id, AttachRequest{}); !errors.Is(err, ErrNotRunning) {
			t.Fatalf("err = %v, want ErrNotRunning", err)
		}
	})
}

func TestRestartReattachesAndLogsContinue(t *testing.T) {
	r1 := newTestRuntime(t)
	cc := baseConfig(t, "sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done")
	ctx := context.Background()
	id, err := r1.Create(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Start(ctx, id); err != nil {
		_ = r1.Remove(ctx, id)
		t.Fatal(err)
	}
	waitLog(t, cc.LogPath, "tick 3\n")
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the agent is down; output waits in the FIFO
	r2 := newTestRuntime(t)
	t.Cleanup(func() { _ = r2.Remove(context.Background(), id) })
	list, err := r2.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, st := range list {
		if st.ID == id {
			found = st.State == StateRunning && st.PodUID == cc.PodUID
		}
	}
	if !found {
		t.Fatalf("List lacks running %s: %+v", id, list)
	}
	log := waitLog(t, cc.LogPath, "tick 20\n")
	if err := r2.Stop(context.Background(), id, time.Second); err != nil {
		t.Fatal(err)
	}
	log = logText(t, cc.LogPath, "")
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	for i, l := range lines {
		if l != fmt.Sprintf("tick %d", i) {
			t.Fatalf("line %d is %q: output lost or garbled across the restart", i, l)
		}
	}
	if err := r2.Remove(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveIsIdempotent(t *testing.T) {
	r := newTestRuntime(t)
	cc := baseConfig(t, "sleep", "1000")
	ctx := context.Background()
	id, err := r.Create(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Status(ctx, id)
	if err != nil || st.State != StateCreated {
		t.Fatalf("status %+v, %v", st, err)
	}
	if err := r.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Status(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("status after remove: %v, want ErrNotFound", err)
	}
	if err := r.Stop(ctx, id, time.Second); !errors.Is(err, ErrNotFound) {
		t.Fatalf("stop after remove: %v, want ErrNotFound", err)
	}
}

func TestPodContainersShareTheNetworkNamespace(t *testing.T) {
	name := "skiffct" + newID()[:8]
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	nsPath := "/run/netns/" + name
	var st syscall.Stat_t
	if err := syscall.Stat(nsPath, &st); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("net:[%d]\n", st.Ino)
	r := newTestRuntime(t)
	uid := newID()[:16]
	for _, name := range []string{"one", "two"} {
		cc := baseConfig(t, "sh", "-c", "readlink /proc/self/ns/net; hostname")
		cc.PodUID, cc.Name, cc.HostNetwork, cc.NetNSPath, cc.Hostname = uid, name, false, nsPath, "pod-host"
		id := run(t, r, cc)
		waitState(t, r, id, StateExited)
		r.waitOutput(id, outputDrainTimeout)
		if got := logText(t, cc.LogPath, ""); got != want+"pod-host\n" {
			t.Fatalf("container %s: %q, want %q", name, got, want+"pod-host\n")
		}
	}
}

func TestRestartKeepsStdinAndEvents(t *testing.T) {
	ctx := context.Background()
	r1 := newTestRuntime(t)
	cc := baseConfig(t, "sh", "-c", "while read line; do echo got $line; done; echo stdin closed")
	cc.Stdin = true
	id, err := r1.Create(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Start(ctx, id); err != nil {
		_ = r1.Remove(ctx, id)
		t.Fatal(err)
	}
	attach(t, r1, id, "one")
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := newTestRuntime(t)
	t.Cleanup(func() { _ = r2.Remove(context.Background(), id) })
	events := r2.Events(ctx)
	// Without StdinOnce the end of one attach's input leaves stdin open.
	attach(t, r2, id, "two")
	if st, _ := r2.Status(ctx, id); st.State != StateRunning {
		t.Fatalf("state %s after the attach ended, want running", st.State)
	}
	if err := r2.Stop(ctx, id, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-events:
		if got != id {
			t.Fatalf("event for %s, want %s", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit event")
	}
}

// attach sends line to the container's stdin and detaches once the
// container echoed it.
func attach(t *testing.T, r *Runtime, id, line string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- r.Attach(ctx, id, AttachRequest{Stdin: strings.NewReader(line + "\n"), Stdout: &out}) }()
	waitFor(t, "echo of "+line, func() bool { return strings.Contains(out.String(), "got "+line+"\n") })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("attach ended with %v, want context.Canceled", err)
	}
}

func TestLogRotationKeepsTheNewestOutput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := New(ctx, Config{Address: testAddress, Namespace: testNamespace, StateDir: testStateDir,
		LogMaxSize: 2048, LogMaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cc := baseConfig(t, "sh", "-c", "for i in $(seq 1 500); do echo line $i; done")
	id := run(t, r, cc)
	waitState(t, r, id, StateExited)
	r.waitOutput(id, outputDrainTimeout)
	files, err := filepath.Glob(cc.LogPath + "*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("log files %v, want 3", files)
	}
	lines := strings.Split(strings.TrimSuffix(logText(t, cc.LogPath, ""), "\n"), "\n")
	if lines[len(lines)-1] != "line 500" || len(lines) > 120 {
		t.Fatalf("%d lines ending %q", len(lines), lines[len(lines)-1])
	}
	first := 0
	fmt.Sscanf(lines[0], "line %d", &first)
	for i, l := range lines {
		if l != fmt.Sprintf("line %d", first+i) {
			t.Fatalf("line %d is %q: rotated files read out of order", i, l)
		}
	}
}

func TestStartTwiceIsHarmless(t *testing.T) {
	r := newTestRuntime(t)
	id := run(t, r, baseConfig(t, "sleep", "1000"))
	if err := r.Start(context.Background(), id); err != nil {
		t.Fatalf("second start: %v", err)
	}
	if err := r.Stop(context.Background(), id, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), id); err == nil {
		t.Fatal("start of an exited container succeeded")
	}
}
