package podnet

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"skiff/runtime/nsthread"
)

// inNetNS runs fn on an OS thread switched into ns (nsthread.Do).
func inNetNS(ns netns.NsHandle, fn func() error) error {
	if err := nsthread.Do(ns, fn); err != nil {
		return fmt.Errorf("podnet: %w", err)
	}
	return nil
}

// newNetNSAt creates a network namespace and bind-mounts it at path (an
// existing empty file), as `ip netns add` does.
func newNetNSAt(path string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("podnet: current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("podnet: unshare netns: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		var mountErr error
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			mountErr = fmt.Errorf("podnet: bind-mount netns at %s: %w", path, err)
		}
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(mountErr, fmt.Errorf("podnet: restore netns: %w", err))
			return // thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- mountErr
	}()
	return <-errc
}

// isNetNSMount reports whether path is a bind-mounted network namespace.
func isNetNSMount(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// ensureNetNS makes sure path is a mounted network namespace, creating one
// when it is missing (or left unmounted by a crash).
func ensureNetNS(path string) error {
	if isNetNSMount(path) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o444)
	if err != nil {
		return fmt.Errorf("podnet: create netns file: %w", err)
	}
	_ = f.Close()
	if err := newNetNSAt(path); err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

// removeNetNS unmounts and deletes the namespace file at path; missing is fine.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil &&
		!errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("podnet: unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("podnet: remove netns file: %w", err)
	}
	return nil
}

// makeSharedMount turns dir into a mount point with shared propagation (as
// iproute2 does for /run/netns), so that unmounting a pod namespace here
// also unmounts the copies other mount namespaces took, and the namespace
// can really go away.
func makeSharedMount(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("podnet: netns dir: %w", err)
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) { // EINVAL: dir is not a mount point yet
		return fmt.Errorf("podnet: make %s shared: %w", dir, err)
	}
	if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("podnet: bind %s onto itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("podnet: make %s shared: %w", dir, err)
	}
	return nil
}
