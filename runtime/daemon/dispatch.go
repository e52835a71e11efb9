package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	"github.com/containerd/containerd/v2/cmd/containerd/command"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"

	// The daemon's built-in plugins (snapshotters, content, services…);
	// build with -tags no_cri,no_btrfs,no_devmapper,no_zfs to leave out
	// CRI and the snapshotters skiff does not use.
	_ "github.com/containerd/containerd/v2/cmd/containerd/builtins"
	// The runc v2 shim's task service, registered at init.
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task/plugin"
)

// Executable names under which the skiff binary runs containerd parts.
const (
	DaemonName = "containerd"
	ShimName   = "containerd-shim-runc-v2"
	// runcRuntime is the runtime name the shim serves.
	runcRuntime = "io.containerd.runc.v2"
)

// Dispatch runs the containerd daemon or the runc v2 shim when the binary
// was invoked under one of their names (argv0 is os.Args[0], args the rest).
// It returns handled=false for any other name; otherwise it returns only
// when the daemon exits (the shim exits the process itself). main() calls it
// before anything else and exits with exitCode when handled.
func Dispatch(argv0 string, args []string) (handled bool, exitCode int) {
	switch filepath.Base(argv0) {
	case DaemonName:
		return true, runDaemon(argv0, args)
	case ShimName:
		return true, runShim()
	default:
		return false, 0
	}
}

func runDaemon(argv0 string, args []string) int {
	argv := append([]string{argv0}, args...)
	if err := command.App().Run(context.Background(), argv); err != nil {
		fmt.Fprintln(os.Stderr, "containerd:", err)
		return 1
	}
	return 0
}

// runShim runs the runc v2 shim. The daemon's plugins share the global
// plugin registry with the shim's (both are linked into this binary), so
// the registry is reset to the shim's task service alone first; otherwise
// the shim would try to initialise daemon plugins and die. The shim reads
// its flags from os.Args and exits the process itself.
func runShim() int {
	var task *plugin.Registration
	for _, r := range registry.Graph(nil) {
		if r.Type == plugins.TTRPCPlugin && r.ID == "task" {
			r := r
			task = &r
			break
		}
	}
	if task == nil {
		fmt.Fprintln(os.Stderr, "containerd-shim-runc-v2: task plugin not registered")
		return 1
	}
	registry.Reset()
	registry.Register(task)
	shim.RunShim(context.Background(), manager.NewShimManager(runcRuntime))
	return 0
}
