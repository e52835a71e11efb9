package containers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
)

// A task lost with its shim while no runtime watched (the agent was down
// when the shim was killed, or the machine lost power) is an exit with an
// unknown reason, recorded once: not a container in an unknown state that
// nobody ever restarts.
func TestTaskLostWithItsShimIsAnUnknownExit(t *testing.T) {
	r := newTestRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := r.Create(ctx, baseConfig(t, "sleep", "600"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, r, id, StateRunning)
	r.mu.Lock()
	fifos := filepath.Dir(r.ios[id].io.Config().Stdout)
	r.mu.Unlock()
	if _, err := os.Stat(fifos); err != nil {
		t.Fatalf("stdio FIFOs of the task: %v", err)
	}
	r.Close() // the agent is down

	shim := parentPid(t, int(st.Pid))
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(shim) + "/comm"); !strings.Contains(string(comm), "shim") {
		t.Fatalf("parent %d of the task is %q, want its shim", shim, comm)
	}
	if err := syscall.Kill(shim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// containerd cleans up after the dead shim: the task goes.
	cl, err := client.New(testAddress, client.WithDefaultNamespace(testNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitFor(t, "the task gone with its shim", func() bool {
		c, err := cl.LoadContainer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Task(ctx, nil)
		return errdefs.IsNotFound(err)
	})

	r2 := newTestRuntime(t)
	if _, err := os.Stat(fifos); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lost task's stdio FIFOs %s are still there (%v)", fifos, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r2.Remove(ctx, id); err != nil {
			t.Errorf("remove %s: %v", id, err)
		}
	})
	lost := waitState(t, r2, id, StateExited)
	if lost.ExitCode != ExitCodeUnknown || lost.Reason != ReasonUnknown || lost.FinishedAt.IsZero() {
		t.Fatalf("lost task: exit %d, reason %q, finished %v; want %d, %q and a time", lost.ExitCode, lost.Reason, lost.FinishedAt, ExitCodeUnknown, ReasonUnknown)
	}
	time.Sleep(20 * time.Millisecond)
	again, err := r2.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !again.FinishedAt.Equal(lost.FinishedAt) || again.ExitCode != lost.ExitCode {
		t.Fatalf("the lost exit changed between two looks: %v/%d, then %v/%d", lost.FinishedAt, lost.ExitCode, again.FinishedAt, again.ExitCode)
	}
	list, err := r2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.ID == id && (c.State != StateExited || !c.FinishedAt.Equal(lost.FinishedAt)) {
			t.Fatalf("List reports the lost container as %s (finished %v)", c.State, c.FinishedAt)
		}
	}
}

// parentPid reads the parent of pid from /proc.
func parentPid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid …; comm may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
