package containers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestUpdateResources_RunningContainer_CgroupsChangeInPlace(t *testing.T) {
	r := newTestRuntime(t)
	cc := baseConfig(t, "sleep", "1000")
	cc.Resources = Resources{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20}
	id := run(t, r, cc)
	waitState(t, r, id, StateRunning)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	read := func() string {
		var out bytes.Buffer
		code, err := r.Exec(ctx, id, ExecRequest{Cmd: []string{"cat", "/sys/fs/cgroup/cpu/cpu.shares",
			"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}, Stdout: &out})
		if err != nil || code != 0 {
			t.Fatalf("exec: %d %v", code, err)
		}
		return out.String()
	}
	if err := r.UpdateResources(ctx, id, Resources{CPUShares: 1024, CPUQuota: 20000, CPUPeriod: 100000, MemoryLimit: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	if got, want := read(), "1024\n20000\n134217728\n"; got != want {
		t.Fatalf("after update: %q, want %q", got, want)
	}
	// Zero lifts the limits.
	if err := r.UpdateResources(ctx, id, Resources{CPUShares: 2}); err != nil {
		t.Fatal(err)
	}
	got := read()
	if want := "2\n-1\n"; len(got) < len(want) || got[:len(want)] != want || got == "2\n-1\n134217728\n" {
		t.Fatalf("after lifting limits: %q", got)
	}
	if st, _ := r.Status(ctx, id); st.State != StateRunning {
		t.Fatalf("container state %s after updates, want running", st.State)
	}
}

func TestPIDNamespacePath_JoinsTargetProcessNamespace(t *testing.T) {
	r := newTestRuntime(t)
	target := run(t, r, baseConfig(t, "sleep", "1000"))
	st := waitState(t, r, target, StateRunning)
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", st.Pid))
	if err != nil {
		t.Fatal(err)
	}
	cc := baseConfig(t, "sh", "-c", "readlink /proc/self/ns/pid; ps | grep -c '[s]leep 1000'")
	cc.Name = "debugger"
	cc.PIDNamespacePath = fmt.Sprintf("/proc/%d/ns/pid", st.Pid)
	id := run(t, r, cc)
	waitState(t, r, id, StateExited)
	r.waitOutput(id, outputDrainTimeout)
	if got := logText(t, cc.LogPath, ""); got != want+"\n1\n" {
		t.Fatalf("debug container saw %q, want the target's namespace %q and its process", got, want)
	}
}
