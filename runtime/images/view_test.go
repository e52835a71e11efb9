package images

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"skiff/runtime/mountinfo"
)

func TestMountView_ImportedImage_ReadOnlyRootFSUntilRemoved(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t, "")
	if _, err := s.Import(ctx, bytes.NewReader(tarball(t, "oci", "busybox", ""))); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "vol")
	const key = "pod-uid/vol"
	t.Cleanup(func() { _ = s.RemoveView(ctx, key, target) })
	for i := range 2 { // the second call finds it mounted and keeps it
		if err := s.MountView(ctx, "busybox", key, target); err != nil {
			t.Fatalf("MountView #%d: %v", i+1, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(target, "bin", "busybox")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("bin/busybox in the view: %v, %v; want the image's executable", fi, err)
	}
	err := os.WriteFile(filepath.Join(target, "new"), []byte("x"), 0o644)
	if !errors.Is(err, syscall.EROFS) {
		t.Fatalf("writing into the view: %v, want EROFS", err)
	}
	views, err := s.Views(ctx, "pod-uid/")
	if err != nil || !slices.Equal(views, []string{key}) {
		t.Fatalf("Views = %v, %v; want [%s]", views, err, key)
	}
	if other, _ := s.Views(ctx, "other-pod/"); len(other) != 0 {
		t.Fatalf("Views(other-pod/) = %v, want none", other)
	}

	for i := range 2 { // idempotent
		if err := s.RemoveView(ctx, key, target); err != nil {
			t.Fatalf("RemoveView #%d: %v", i+1, err)
		}
	}
	if mounted, err := mountinfo.IsMountPoint(target); err != nil || mounted {
		t.Fatalf("target still mounted (%v, %v)", mounted, err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("target directory: %v, want removed", err)
	}
	if views, _ := s.Views(ctx, ""); len(views) != 0 {
		t.Fatalf("views after RemoveView: %v, want none", views)
	}
	ls, err := testClient.LeasesService().List(namespaces.WithNamespace(ctx, s.cfg.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(ls, func(l leases.Lease) bool { return l.ID == key }) {
		t.Fatalf("lease %s still there: %v", key, ls)
	}
}

func TestMountView_MissingImage_NotPresentAndNothingMounted(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t, "")
	target := filepath.Join(t.TempDir(), "vol")
	err := s.MountView(ctx, "registry.local/absent:v1", "k", target)
	if !errors.Is(err, ErrNotPresent) {
		t.Fatalf("MountView of an absent image: %v, want ErrNotPresent", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("target: %v, want not created", err)
	}
}
