package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/image-spec/identity"
	"golang.org/x/sys/unix"

	"skiff/runtime/mountinfo"
)

// ViewLabel marks the snapshot views MountView makes; its value is the
// image reference the view shows.
const ViewLabel = "io.skiff.image-volume"

// ErrInvalidViewKey is returned (wrapped) for an empty view key.
var ErrInvalidViewKey = errors.New("invalid view key")

// MountView mounts the root filesystem of the local image ref read-only at
// target (created when missing), as containerd's CRI plugin does for image
// volumes (KEP-4639): a snapshot view named key over the image's layer
// chain, held by a lease of the same name so that containerd's garbage
// collector keeps it. The image must be present (Ensure it first); it is
// unpacked if needed. MountView is idempotent: a target already mounted is
// left as it is.
func (s *Store) MountView(ctx context.Context, ref, key, target string) error {
	if key == "" {
		return ErrInvalidViewKey
	}
	name, err := normalize(ref)
	if err != nil {
		return err
	}
	if mounted, err := mountinfo.IsMountPoint(target); err != nil || mounted {
		return err
	}
	ctx = s.ctx(ctx)
	rec, err := s.client.ImageService().Get(ctx, name)
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %s", ErrNotPresent, name)
	}
	if err != nil {
		return fmt.Errorf("images: get %s: %w", name, err)
	}
	if err := s.unpack(ctx, rec); err != nil {
		return err
	}
	diffIDs, err := client.NewImageWithPlatform(s.client, rec, platforms.Default()).RootFS(ctx)
	if err != nil {
		return fmt.Errorf("images: layers of %s: %w", name, err)
	}
	if _, err := s.client.LeasesService().Create(ctx, leases.WithID(key)); err != nil && !errdefs.IsAlreadyExists(err) {
		return fmt.Errorf("images: lease %s: %w", key, err)
	}
	lctx := leases.WithLease(ctx, key)
	sn := s.client.SnapshotService(s.cfg.Snapshotter)
	mounts, err := sn.View(lctx, key, identity.ChainID(diffIDs).String(), snapshots.WithLabels(map[string]string{ViewLabel: name}))
	if errdefs.IsAlreadyExists(err) {
		mounts, err = sn.Mounts(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("images: view of %s: %w", name, err)
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("images: view target: %w", err)
	}
	if err := mount.All(mounts, target); err != nil {
		_ = mount.UnmountAll(target, unix.MNT_DETACH)
		return fmt.Errorf("images: mount view of %s on %s: %w", name, target, err)
	}
	return nil
}

// RemoveView undoes MountView: it unmounts target, removes the view and
// its lease and the (then empty) target directory. It is idempotent.
func (s *Store) RemoveView(ctx context.Context, key, target string) error {
	if key == "" {
		return ErrInvalidViewKey
	}
	ctx = s.ctx(ctx)
	var errs []error
	if target != "" {
		if err := mount.UnmountAll(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("images: unmount view %s: %w", target, err))
		}
	}
	if err := s.client.SnapshotService(s.cfg.Snapshotter).Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("images: remove view %s: %w", key, err))
	}
	if err := s.client.LeasesService().Delete(ctx, leases.Lease{ID: key}); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("images: delete lease %s: %w", key, err))
	}
	if target != "" && len(errs) == 0 {
		if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("images: remove view target: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Views lists the keys of the views MountView made whose key starts with
// prefix, so that views left by pods gone while the agent was down can be
// removed.
func (s *Store) Views(ctx context.Context, prefix string) ([]string, error) {
	ctx = s.ctx(ctx)
	var out []string
	err := s.client.SnapshotService(s.cfg.Snapshotter).Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if _, ok := info.Labels[ViewLabel]; ok && strings.HasPrefix(info.Name, prefix) {
			out = append(out, info.Name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("images: list views: %w", err)
	}
	return out, nil
}
