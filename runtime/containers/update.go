package containers

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// UpdateResources applies new cgroup limits to a running container's task
// (an in-place pod resize): cpu shares (cpu.weight on cgroup v2), the cfs
// quota and the memory limit. A limit of 0 lifts it. The OOM score is the
// process's and stays as it started.
func (r *Runtime) UpdateResources(ctx context.Context, id string, res Resources) error {
	ctx = r.nsctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	t, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("containers: update %s: %w", id, ErrNotRunning)
	}
	if err != nil {
		return fmt.Errorf("containers: update %s: %w", id, err)
	}
	if err := t.Update(ctx, client.WithResources(linuxResources(res, r.swapAccounting))); err != nil {
		return fmt.Errorf("containers: update resources of %s: %w", id, err)
	}
	return nil
}

// linuxResources is the runtime-spec form of res for an update: unlike a
// new spec, an update must say "no limit" (-1) to lift one.
func linuxResources(res Resources, swapAccounting bool) *specs.LinuxResources {
	shares := res.CPUShares
	if shares == 0 {
		shares = 2 // the kernel's minimum, as for a container without requests
	}
	period := res.CPUPeriod
	if period == 0 {
		period = defaultCFSPeriod
	}
	quota := res.CPUQuota
	if quota <= 0 {
		quota = -1
	}
	limit := res.MemoryLimit
	if limit <= 0 {
		limit = -1
	}
	lr := &specs.LinuxResources{
		CPU:    &specs.LinuxCPU{Shares: &shares, Quota: &quota, Period: &period},
		Memory: &specs.LinuxMemory{Limit: &limit},
	}
	if swapAccounting {
		swap := limit
		lr.Memory.Swap = &swap
	}
	return lr
}
