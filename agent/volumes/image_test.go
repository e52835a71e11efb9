package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"skiff/runtime/containers"
	"skiff/runtime/mountinfo"
)

// tmpfsViews stands in for runtime/images.Store: a view is a read-only
// tmpfs holding etc/os-release and a file "blob".
type tmpfsViews struct {
	mu      sync.Mutex
	mounted map[string]string // key → ref
	removed []string
}

func (v *tmpfsViews) MountView(_ context.Context, ref, key, target string) error {
	if ok, _ := mountinfo.IsMountPoint(target); ok {
		return nil
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	_ = os.MkdirAll(filepath.Join(target, "etc"), 0o755)
	_ = os.WriteFile(filepath.Join(target, "etc", "os-release"), []byte("NAME="+ref+"\n"), 0o644)
	_ = os.WriteFile(filepath.Join(target, "blob"), []byte("x"), 0o644)
	if err := unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return err
	}
	v.mu.Lock()
	v.mounted[key] = ref
	v.mu.Unlock()
	return nil
}

func (v *tmpfsViews) RemoveView(_ context.Context, key, target string) error {
	if err := unix.Unmount(target, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	v.mu.Lock()
	delete(v.mounted, key)
	v.removed = append(v.removed, key)
	v.mu.Unlock()
	return os.Remove(target)
}

func imagePod() *corev1.Pod {
	pod := newPod(
		corev1.Volume{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "kitten:1.7"}}},
		corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	)
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "img", MountPath: "/volume"}}
	return pod
}

func TestImageVolume_MountedByMountImage_ListedByReadOnlyMountsRemovedByTeardown(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newTestManager(t)
	views := &tmpfsViews{mounted: map[string]string{}}
	m.cfg.Images = views
	pod := imagePod()

	vols, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := vols["img"]; ok {
		t.Fatalf("Setup lists the image volume before it is mounted: %v", vols)
	}
	path, err := m.MountImage(ctx, pod, "img", "docker.io/library/kitten:1.7")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(m.PodDir("uid-1"), "volumes", pluginImage, "img"); path != want {
		t.Fatalf("MountImage path %s, want %s", path, want)
	}
	if got := views.mounted[ImageViewPrefix+"uid-1/img"]; got != "docker.io/library/kitten:1.7" {
		t.Fatalf("views %v: want key %suid-1/img showing the image", views.mounted, ImageViewPrefix)
	}
	if vols, err = m.Setup(ctx, pod); err != nil || vols["img"] != path {
		t.Fatalf("Setup after MountImage: %v, %v; want img at %s", vols, err, path)
	}
	mounts, err := m.Mounts(pod, &pod.Spec.Containers[0], vols)
	if err != nil {
		t.Fatal(err)
	}
	if want := (containers.Mount{HostPath: path, ContainerPath: "/volume", ReadOnly: true}); len(mounts) == 0 || mounts[0] != want {
		t.Fatalf("mounts %+v, want first %+v", mounts, want)
	}

	if err := m.Teardown(ctx, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(views.removed, []string{ImageViewPrefix + "uid-1/img"}) || len(views.mounted) != 0 {
		t.Fatalf("after Teardown: removed %v, still mounted %v", views.removed, views.mounted)
	}
	if _, err := os.Stat(m.PodDir("uid-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pod dir: %v, want removed", err)
	}
}

func TestImageVolume_SubPath_ExistingDirectoryOnly(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newTestManager(t)
	m.cfg.Images = &tmpfsViews{mounted: map[string]string{}}
	pod := imagePod()
	path, err := m.MountImage(ctx, pod, "img", "kitten:1.7")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Teardown(ctx, "uid-1") })
	vols := Volumes{"img": path}
	tests := []struct {
		sub, wantHost string
		wantErr       error
	}{
		{sub: "etc", wantHost: filepath.Join(path, "etc")},
		{sub: "missing", wantErr: ErrSubPath},
		{sub: "blob", wantErr: ErrSubPath},
		{sub: "../escape", wantErr: ErrSubPath},
	}
	for _, tt := range tests {
		t.Run(tt.sub, func(t *testing.T) {
			c := corev1.Container{Name: "main", VolumeMounts: []corev1.VolumeMount{{Name: "img", MountPath: "/v", SubPath: tt.sub}}}
			got, err := m.Mounts(pod, &c, vols)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Mounts: %v, want %v", err, tt.wantErr)
				}
				if _, serr := os.Stat(filepath.Join(path, tt.sub)); tt.sub == "missing" && serr == nil {
					t.Fatal("subPath created inside the image volume")
				}
				return
			}
			if err != nil || len(got) == 0 || got[0].HostPath != tt.wantHost || !got[0].ReadOnly {
				t.Fatalf("Mounts = %+v, %v; want %s read-only", got, err, tt.wantHost)
			}
		})
	}
}

func TestImageVolume_NoImageViews_MountImageUnsupported(t *testing.T) {
	m, _, _ := newTestManager(t)
	_, err := m.MountImage(context.Background(), imagePod(), "img", "kitten:1.7")
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("MountImage without ImageViews: %v, want ErrUnsupported", err)
	}
}
