package images

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/platforms"
	"github.com/klauspost/compress/zstd"
	corev1 "k8s.io/api/core/v1"

	"skiff/runtime/daemon"
	"skiff/runtime/testimage"
)

// testClient is connected to the embedded containerd TestMain starts.
var testClient *client.Client

// TestMain makes the test binary stand in for skiff (it is linked as
// containerd and its shim) and runs one embedded daemon for the package.
func TestMain(m *testing.M) {
	if handled, code := daemon.Dispatch(os.Args[0], os.Args[1:]); handled {
		os.Exit(code)
	}
	os.Exit(runWithDaemon(m))
}

func runWithDaemon(m *testing.M) int {
	// SKIFF_TEST_CONTAINERD runs the tests against an existing containerd
	// (for instance Debian's 1.6) at that socket instead.
	if addr := os.Getenv("SKIFF_TEST_CONTAINERD"); addr != "" {
		var err error
		if testClient, err = client.New(addr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer testClient.Close()
		return m.Run()
	}
	dir, err := os.MkdirTemp("/tmp", "cd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.Start(ctx, daemon.Config{Dir: dir})
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		cancel()
		<-d.Done()
		unmountUnder(dir)
	}()
	testClient, err = client.New(d.Address())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testClient.Close()
	return m.Run()
}

// unmountUnder lazily unmounts anything left mounted under dir.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			_ = syscall.Unmount(f[1], syscall.MNT_DETACH)
		}
	}
}

var nsCounter atomic.Int64

// newStore returns a Store in a fresh namespace with registries.yaml
// content regs ("" for none).
func newStore(t *testing.T, regs string) *Store {
	t.Helper()
	cfg := Config{Client: testClient, Namespace: fmt.Sprintf("t%d", nsCounter.Add(1))}
	if regs != "" {
		cfg.RegistriesFile = filepath.Join(t.TempDir(), "registries.yaml")
		if err := os.WriteFile(cfg.RegistriesFile, []byte(regs), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tarball builds the busybox image as a tarball in the given format,
// named ref, compressed with comp ("", "gzip" or "zstd").
func tarball(t *testing.T, format, ref, comp string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "img.tar")
	write := testimage.WriteOCI
	if format == "docker" {
		write = testimage.WriteDockerArchive
	}
	if err := write(path, ref); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	switch comp {
	case "":
		return raw
	case "gzip":
		zw := gzip.NewWriter(&buf)
		zw.Write(raw)
		zw.Close()
	case "zstd":
		zw, _ := zstd.NewWriter(&buf)
		zw.Write(raw)
		zw.Close()
	}
	return buf.Bytes()
}

func busyboxID(t *testing.T) string {
	t.Helper()
	img, err := testimage.Build()
	if err != nil {
		t.Fatal(err)
	}
	return img.ConfigDigest.String()
}

func isUnpacked(ctx context.Context, t *testing.T, s *Store, ref string) bool {
	t.Helper()
	ctx = namespaces.WithNamespace(ctx, s.cfg.Namespace)
	rec, err := testClient.ImageService().Get(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := client.NewImageWithPlatform(testClient, rec, platforms.Default()).IsUnpacked(ctx, "overlayfs")
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestImportStoresAndUnpacksEveryTarballFormat(t *testing.T) {
	tests := []struct {
		name, format, comp, ref, wantRef string
	}{
		{"oci layout", "oci", "", "busybox", "docker.io/library/busybox:latest"},
		{"docker archive", "docker", "", "busybox:1.36", "docker.io/library/busybox:1.36"},
		{"gzip oci layout", "oci", "gzip", "registry.local:5000/team/app:v2", "registry.local:5000/team/app:v2"},
		{"zstd docker archive", "docker", "zstd", "quay.io/x/y:z", "quay.io/x/y:z"},
	}
	id := busyboxID(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			s := newStore(t, "")
			imgs, err := s.Import(ctx, bytes.NewReader(tarball(t, tt.format, tt.ref, tt.comp)))
			if err != nil {
				t.Fatal(err)
			}
			if len(imgs) != 1 || imgs[0].Ref != tt.wantRef || imgs[0].ID != id || imgs[0].Size <= 0 {
				t.Fatalf("imported %+v, want one %s with ID %s", imgs, tt.wantRef, id)
			}
			got, err := s.Get(ctx, tt.ref)
			if err != nil || got != imgs[0] {
				t.Fatalf("Get(%s) = %+v, %v; want %+v", tt.ref, got, err, imgs[0])
			}
			if !isUnpacked(ctx, t, s, tt.wantRef) {
				t.Error("image not unpacked")
			}
		})
	}
}

func TestImportRejectsSomethingThatIsNotAnImageTarball(t *testing.T) {
	s := newStore(t, "")
	if _, err := s.Import(testCtx(t), strings.NewReader("not a tarball")); err == nil {
		t.Fatal("want an error")
	}
}

func TestImportDirImportsEveryTarballAndReportsBadOnes(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t, "")
	dir := t.TempDir()
	files := map[string][]byte{
		"a.tar":     tarball(t, "oci", "a:1", ""),
		"b.tar.gz":  tarball(t, "docker", "b:1", "gzip"),
		"c.tgz":     tarball(t, "oci", "c:1", "gzip"),
		"d.tar.zst": tarball(t, "oci", "d:1", "zstd"),
		"notes.txt": []byte("not an image"),
		"e.tar":     []byte("broken"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.tar"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := s.ImportDir(ctx, dir)
	if err == nil || !strings.Contains(err.Error(), "e.tar") {
		t.Errorf("err = %v, want an error naming e.tar", err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, img := range list {
		refs = append(refs, img.Ref)
	}
	want := "docker.io/library/a:1 docker.io/library/b:1 docker.io/library/c:1 docker.io/library/d:1"
	if got := strings.Join(refs, " "); got != want {
		t.Errorf("listed %s, want %s", got, want)
	}
	if err := s.ImportDir(ctx, filepath.Join(dir, "missing")); err != nil {
		t.Errorf("missing dir: %v", err)
	}
}

func TestGetReportsAMissingImageAsNotPresent(t *testing.T) {
	s := newStore(t, "")
	_, err := s.Get(testCtx(t), "nothere:1")
	if !errors.Is(err, ErrNotPresent) {
		t.Fatalf("err = %v, want ErrNotPresent", err)
	}
}

func TestEnsureHonoursThePullPolicy(t *testing.T) {
	reg := newTestRegistry(t, "", "")
	remoteID := reg.add(t, "app", "v1", "remote")
	local := reg.host() + "/app:v1"
	// Nothing listens on port 1: pulls from there fail at once.
	const unreachable = "127.0.0.1:1/app:v1"
	tests := []struct {
		name    string
		ref     string
		policy  corev1.PullPolicy
		preload bool // import the busybox tarball as ref first
		wantErr error
		wantID  string // "" = the imported busybox
		wantMsg string
	}{
		{name: "Never uses the local image", ref: unreachable, policy: corev1.PullNever, preload: true},
		{name: "Never fails when absent", ref: "absent:1", policy: corev1.PullNever, wantErr: ErrNotPresent, wantMsg: "is not present with pull policy of Never"},
		{name: "IfNotPresent uses the local image without pulling", ref: unreachable, policy: corev1.PullIfNotPresent, preload: true},
		{name: "IfNotPresent pulls when absent", ref: local, policy: corev1.PullIfNotPresent, wantID: remoteID},
		{name: "IfNotPresent reports an unreachable registry", ref: unreachable, policy: corev1.PullIfNotPresent, wantErr: ErrPull, wantMsg: "127.0.0.1:1"},
		{name: "Always pulls over a local copy", ref: local, policy: corev1.PullAlways, preload: true, wantID: remoteID},
		{name: "Always fails if the pull fails even with a local copy", ref: unreachable, policy: corev1.PullAlways, preload: true, wantErr: ErrPull},
		{name: "an invalid name is rejected", ref: "busybox:in valid", policy: corev1.PullIfNotPresent, wantErr: ErrInvalidReference},
	}
	bbID := busyboxID(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			s := newStore(t, "")
			if tt.preload {
				if _, err := s.Import(ctx, bytes.NewReader(tarball(t, "oci", tt.ref, ""))); err != nil {
					t.Fatal(err)
				}
			}
			img, err := s.Ensure(ctx, tt.ref, tt.policy, nil)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantID := tt.wantID
			if wantID == "" {
				wantID = bbID
			}
			if img.ID != wantID || img.Ref != Normalize(tt.ref) {
				t.Errorf("got %+v, want ref %s ID %s", img, Normalize(tt.ref), wantID)
			}
			if !isUnpacked(ctx, t, s, img.Ref) {
				t.Error("image not unpacked")
			}
		})
	}
}

func TestPullGoesThroughTheMirrorWithItsLogin(t *testing.T) {
	reg := newTestRegistry(t, "mirror-user", "mirror-pass")
	id := reg.add(t, "library/mirrored", "v1", "mirrored")
	tests := []struct {
		name, regs string
		creds      []Credential
		wantErr    error
	}{
		{
			name: "registries.yaml login",
			regs: fmt.Sprintf("mirrors:\n  docker.io:\n    endpoint: [%q]\nconfigs:\n  %q:\n    auth: {username: mirror-user, password: mirror-pass}\n", reg.URL, reg.host()),
		},
		{
			name:  "pod pull secret for the mirror host",
			regs:  fmt.Sprintf("mirrors:\n  docker.io:\n    endpoint: [%q]\n", reg.URL),
			creds: []Credential{{Registry: "http://" + reg.host() + "/", Username: "mirror-user", Password: "mirror-pass"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, tt.regs)
			img, err := s.Ensure(testCtx(t), "mirrored:v1", corev1.PullAlways, tt.creds)
			if err != nil {
				t.Fatal(err)
			}
			if img.ID != id || img.Ref != "docker.io/library/mirrored:v1" {
				t.Errorf("pulled %+v, want ID %s", img, id)
			}
		})
	}
}

func TestPullWithAWrongLoginFails(t *testing.T) {
	reg := newTestRegistry(t, "u", "right")
	reg.add(t, "app", "v1", "x")
	s := newStore(t, "")
	_, err := s.Ensure(testCtx(t), reg.host()+"/app:v1", corev1.PullAlways,
		[]Credential{{Registry: reg.host(), Username: "u", Password: "wrong"}})
	if !errors.Is(err, ErrPull) {
		t.Fatalf("err = %v, want ErrPull", err)
	}
}

func TestGCRemovesUnusedImagesOldestFirstUntilBelowLow(t *testing.T) {
	reg := newTestRegistry(t, "", "")
	ctx := testCtx(t)
	s := newStore(t, "")
	ids := map[string]string{}
	for _, name := range []string{"old", "mid", "new", "used"} {
		ids[name] = reg.add(t, name, "v1", name)
		if _, err := s.Ensure(ctx, reg.host()+"/"+name+":v1", corev1.PullAlways, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // distinct creation times
	}
	if _, err := s.Import(ctx, bytes.NewReader(tarball(t, "oci", "pinned:1", ""))); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, img := range all {
		sizes[img.ID] = img.Size
	}
	size := sizes[ids["old"]]
	// 88% used; getting below 80% needs 1.5 images' worth: old and mid go.
	capacity := size * 20
	s.fsUsage = func(context.Context) (FSUsage, error) {
		return FSUsage{Capacity: capacity, Available: 3*size - size/2}, nil
	}
	freed, err := s.GC(ctx, map[string]bool{ids["used"]: true}, 85, 80)
	if err != nil {
		t.Fatal(err)
	}
	if want := sizes[ids["old"]] + sizes[ids["mid"]]; freed != want {
		t.Errorf("freed %d, want %d", freed, want)
	}
	left, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, img := range left {
		refs = append(refs, strings.TrimPrefix(img.Ref, reg.host()+"/"))
	}
	want := "new:v1 used:v1 docker.io/library/pinned:1"
	if got := strings.Join(refs, " "); got != want {
		t.Errorf("left %s, want %s", got, want)
	}

	// Below the high threshold nothing is removed.
	s.fsUsage = func(context.Context) (FSUsage, error) { return FSUsage{Capacity: 100, Available: 50}, nil }
	if freed, err := s.GC(ctx, nil, 85, 80); err != nil || freed != 0 {
		t.Errorf("GC below threshold freed %d, %v", freed, err)
	}
}

func TestImageFSReportsTheSnapshotterFilesystem(t *testing.T) {
	s := newStore(t, "")
	u, err := s.ImageFS(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if u.Capacity <= 0 || u.Available < 0 || u.Available > u.Capacity {
		t.Errorf("usage %+v", u)
	}
}

func TestConcurrentEnsuresOfOneImageAllSucceed(t *testing.T) {
	reg := newTestRegistry(t, "", "")
	id := reg.add(t, "app", "v1", "concurrent")
	s := newStore(t, "")
	ctx := testCtx(t)
	errs := make(chan error, 4)
	for i := 0; i < cap(errs); i++ {
		go func() {
			img, err := s.Ensure(ctx, reg.host()+"/app:v1", corev1.PullIfNotPresent, nil)
			if err == nil && img.ID != id {
				err = fmt.Errorf("got ID %s, want %s", img.ID, id)
			}
			errs <- err
		}()
	}
	for i := 0; i < cap(errs); i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := len(s.pulling); n != 0 {
		t.Errorf("%d name locks left", n)
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	// One pull: /v2/ probe, manifest HEAD and GET, config and layer.
	if reg.requests > 6 {
		t.Errorf("%d registry requests: the image was pulled more than once", reg.requests)
	}
}
