//go:build skiffv2

package containers

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"skiff/runtime/daemon"
)

// With -tags skiffv2,no_cri,no_btrfs,no_devmapper,no_zfs the suite runs
// against skiff's embedded containerd v2 daemon instead of Debian's 1.6.
func init() {
	dispatch = func() (bool, int) { return daemon.Dispatch(os.Args[0], os.Args[1:]) }
	startDaemon = startEmbedded
}

func startEmbedded(dir string) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.Start(ctx, daemon.Config{Dir: filepath.Join(dir, "d")})
	if err != nil {
		cancel()
		return nil, err
	}
	testAddress = d.Address()
	return func() {
		removeAllContainers()
		cancel()
		select {
		case <-d.Done():
		case <-time.After(20 * time.Second):
		}
	}, nil
}
