package containers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"skiff/runtime/testimage"
)

// The tests run a real containerd: Debian's 1.6 daemon with its own
// configuration, root, state and sockets in a temporary directory.
const (
	testNamespace = "skiff-test"
	testImage     = testimage.DefaultRef
)

var (
	testAddress  string // containerd's gRPC socket
	testStateDir string // Config.StateDir for every test runtime
)

// Hooks for the embedded-daemon variant (v2daemon_test.go, build tag
// skiffv2): the test binary then also serves as containerd and its shim.
var (
	dispatch    = func() (handled bool, code int) { return false, 0 }
	startDaemon = startContainerd
)

func TestMain(m *testing.M) {
	if handled, code := dispatch(); handled {
		os.Exit(code)
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("/tmp", "ctr")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	stop, err := startDaemon(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start containerd:", err)
		return 1
	}
	defer stop()
	testStateDir = filepath.Join(dir, "skiff")
	if err := importTestImage(dir); err != nil {
		fmt.Fprintln(os.Stderr, "import test image:", err)
		return 1
	}
	defer removeCgroupRoot()
	return m.Run()
}

// startContainerd starts containerd with a config of its own under dir and
// returns the function that stops it (and cleans what it mounted).
func startContainerd(dir string) (func(), error) {
	testAddress = filepath.Join(dir, "c.sock")
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), testAddress,
		filepath.Join(dir, "t.sock"), filepath.Join(dir, "opt"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/usr/bin/containerd", "-c", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/usr/sbin:/bin:/sbin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	stop := func() {
		removeAllContainers()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		// overlay mounts of still-running tasks would keep root busy
		_ = exec.Command("sh", "-c", "grep -o '"+dir+"[^ ]*' /proc/mounts | sort -r | xargs -r umount -l").Run()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := client.New(testAddress, client.WithTimeout(time.Second))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = c.Version(ctx)
			cancel()
			c.Close()
			if err == nil {
				return stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("containerd did not come up: %w (log in %s)", err, logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// importTestImage imports and unpacks the busybox test image.
func importTestImage(dir string) error {
	tarball := filepath.Join(dir, "busybox.tar")
	if err := testimage.WriteOCI(tarball, testImage); err != nil {
		return err
	}
	c, err := client.New(testAddress)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), testNamespace), 2*time.Minute)
	defer cancel()
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	imgs, err := c.Import(ctx, f)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if err := client.NewImage(c, img).Unpack(ctx, DefaultSnapshotter); err != nil {
			return err
		}
	}
	return nil
}

// removeAllContainers kills and deletes whatever a failed test left behind.
func removeAllContainers() {
	c, err := client.New(testAddress)
	if err != nil {
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), testNamespace), time.Minute)
	defer cancel()
	cs, err := c.Containers(ctx)
	if err != nil {
		return
	}
	for _, ctr := range cs {
		if t, err := ctr.Task(ctx, nil); err == nil {
			_, _ = t.Delete(ctx, client.WithProcessKill)
		}
		_ = ctr.Delete(ctx, client.WithSnapshotCleanup)
	}
}
