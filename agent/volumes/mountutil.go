package volumes

import (
	"skiff/runtime/mountinfo"

	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs on dir (its root with mode, size in bytes when
// > 0) unless one is already there.
func mountTmpfs(dir string, size int64, mode os.FileMode) error {
	mounted, err := mountinfo.IsMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	opts := fmt.Sprintf("mode=%#o", uint32(mode.Perm()))
	if size > 0 {
		opts += fmt.Sprintf(",size=%d", size)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmountAll unmounts everything at or below dir, deepest first; a busy
// mount is detached lazily.
func unmountAll(dir string) error {
	mps, err := mountinfo.Under(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mps {
		err := unix.Unmount(mp, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(mp, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}
