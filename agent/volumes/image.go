package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"skiff/runtime/mountinfo"
)

// pluginImage is the directory of image volumes (KEP-4639) under a pod's
// volumes directory: each is the mount point of a read-only view of an
// image's root filesystem.
const pluginImage = "kubernetes.io~image"

// ImageViewPrefix starts the key of every image-volume view; the pod UID
// and the volume name follow (ImageViewPrefix + uid + "/" + volume).
const ImageViewPrefix = "skiff/image-volume/"

// ImageViews mounts images' root filesystems read-only
// (runtime/images.Store satisfies it).
type ImageViews interface {
	// MountView mounts the local image ref's root filesystem read-only at
	// target through a view named key; idempotent.
	MountView(ctx context.Context, ref, key, target string) error
	// RemoveView unmounts target and removes the view; idempotent.
	RemoveView(ctx context.Context, key, target string) error
}

// MountImage mounts the root filesystem of the image ref (already present
// on the node: the kubelet pulls it with the volume's pullPolicy first) as
// the pod's image volume named volume, and returns its host path. The
// kubelet binds it read-only into the containers that mount it.
func (m *Manager) MountImage(ctx context.Context, pod *corev1.Pod, volume, ref string) (string, error) {
	uid := string(pod.UID)
	if uid == "" {
		return "", errors.New("pod has no UID")
	}
	if v := podVolume(pod, volume); v == nil || v.Image == nil {
		return "", fmt.Errorf("volume %q is not an image volume of the pod", volume)
	}
	if m.cfg.Images == nil {
		return "", fmt.Errorf("image volume %q: %w (this node mounts no images)", volume, ErrUnsupported)
	}
	defer m.lockPod(uid)()
	target := m.volumeDir(uid, pluginImage, volume)
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return "", fmt.Errorf("image volume %q: %w", volume, err)
	}
	if err := m.cfg.Images.MountView(ctx, ref, imageViewKey(uid, volume), target); err != nil {
		return "", fmt.Errorf("image volume %q: %w", volume, err)
	}
	return target, nil
}

func imageViewKey(uid, volume string) string { return ImageViewPrefix + uid + "/" + volume }

// mountedImage is the host path of the pod's image volume when its view
// is mounted (MountImage ran), so that Setup keeps it among the volumes.
func (m *Manager) mountedImage(uid, volume string) (string, bool) {
	target := m.volumeDir(uid, pluginImage, volume)
	ok, err := mountinfo.IsMountPoint(target)
	return target, err == nil && ok
}

// removeImageViews removes the views of the pod's image volumes (listed
// by their mount points on disk), before the pod directory goes.
func (m *Manager) removeImageViews(ctx context.Context, uid string) error {
	dir := filepath.Join(m.PodDir(uid), "volumes", pluginImage)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if m.cfg.Images == nil {
		return nil // nothing was mounted through a view: unmountAll suffices
	}
	var errs []error
	for _, e := range entries {
		if err := m.cfg.Images.RemoveView(ctx, imageViewKey(uid, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("image volume %q: %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

func podVolume(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// imageSubPath resolves a subPath inside an image volume: it must exist
// and be a directory inside the view, as containerd's CRI plugin requires
// (the view is read-only, so nothing can be created).
func imageSubPath(root, sub string) (string, error) {
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("%w %q: must be relative", ErrSubPath, sub)
	}
	for _, el := range strings.Split(filepath.ToSlash(sub), "/") {
		if el == ".." {
			return "", fmt.Errorf("%w %q: must not contain '..'", ErrSubPath, sub)
		}
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("volume path: %w", err)
	}
	full := filepath.Join(root, sub)
	if err := within(realRoot, full, sub); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w %q: only a directory of an image volume can be mounted", ErrSubPath, sub)
	}
	return real, nil
}
