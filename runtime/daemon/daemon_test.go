package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"

	"skiff/runtime/testimage"
)

// TestMain makes the test binary stand in for skiff: Start hard-links it as
// containerd and containerd-shim-runc-v2, which land here.
func TestMain(m *testing.M) {
	if handled, code := Dispatch(os.Args[0], os.Args[1:]); handled {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// startDaemon starts a daemon in a short temporary directory and stops it
// (and removes the directory) when the test ends.
func startDaemon(t *testing.T) (*Daemon, time.Duration) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "cd")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	began := time.Now()
	d, err := Start(ctx, Config{Dir: dir})
	took := time.Since(began)
	if err != nil {
		cancel()
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.Done():
		case <-time.After(20 * time.Second):
			t.Error("daemon did not stop")
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "containerd.log")); err == nil {
				t.Logf("containerd.log:\n%s", b)
			}
		}
		unmountUnder(dir)
		os.RemoveAll(dir)
	})
	return d, took
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

// rssKiB describes the memory of a process: resident, proportional
// (shared binary pages split between the processes mapping them) and
// private (anonymous) sizes.
func rssKiB(pid int64) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return "?"
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("RSS %s (PSS %s, anonymous %s)", fields["Rss"], fields["Pss"], fields["Anonymous"])
}

// syncBuffer is a bytes.Buffer safe for the IO copy goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// connect returns a client that is closed after the test's other cleanups.
func connect(t *testing.T, d *Daemon) *client.Client {
	t.Helper()
	c, err := client.New(d.Address(), client.WithDefaultNamespace("skiff-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// shimRSS returns the resident memory of the shims of d.
func shimRSS(t *testing.T, d *Daemon) string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return "?"
	}
	var out []string
	for _, e := range ents {
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.HasPrefix(string(cl), filepath.Join(d.paths.bin, ShimName)) {
			var pid int64
			fmt.Sscan(e.Name(), &pid)
			out = append(out, rssKiB(pid))
		}
	}
	return strings.Join(out, ", ")
}

// importBusybox imports the test image and returns it unpacked.
func importBusybox(ctx context.Context, t *testing.T, c *client.Client) client.Image {
	t.Helper()
	path := filepath.Join(t.TempDir(), "busybox.tar")
	if err := testimage.WriteOCI(path, testimage.DefaultRef); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	imgs, err := c.Import(ctx, f)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if len(imgs) != 1 || imgs[0].Name != testimage.DefaultRef {
		t.Fatalf("imported %+v", imgs)
	}
	img := client.NewImage(c, imgs[0])
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	return img
}

// runTask creates a container running args and starts its task. The ID is
// made unique: runc keeps its state under /run/containerd/runc, shared by
// every daemon on the machine.
func runTask(ctx context.Context, t *testing.T, c *client.Client, img client.Image, name string, out io.Writer, args ...string) (client.Task, <-chan client.ExitStatus) {
	t.Helper()
	id := fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	ctr, err := c.NewContainer(ctx, id,
		client.WithNewSnapshot(id, img),
		client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs(args...)))
	if err != nil {
		t.Fatalf("new container: %v", err)
	}
	t.Cleanup(func() {
		if err := ctr.Delete(context.WithoutCancel(ctx), client.WithSnapshotCleanup); err != nil {
			t.Errorf("delete container %s: %v", id, err)
		}
	})
	task, err := ctr.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, out, out)))
	if err != nil {
		t.Fatalf("new task: %v", err)
	}
	t.Cleanup(func() {
		if _, err := task.Delete(context.WithoutCancel(ctx), client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("delete task %s: %v", id, err)
		}
	})
	exit, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start task: %v", err)
	}
	return task, exit
}

func TestStartedDaemonRunsAContainerWithTheEmbeddedShim(t *testing.T) {
	d, took := startDaemon(t)
	t.Logf("daemon ready in %s, memory: %s", took.Round(time.Millisecond), rssKiB(d.pid.Load()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := connect(t, d)
	img := importBusybox(ctx, t, c)
	var out syncBuffer
	task, exit := runTask(ctx, t, c, img, "hi", &out, "sh", "-c", "echo hi; exit 3")
	select {
	case st := <-exit:
		if st.ExitCode() != 3 {
			t.Errorf("exit code %d, want 3", st.ExitCode())
		}
	case <-ctx.Done():
		t.Fatal("container did not exit")
	}
	// The output is copied from the shim's FIFO asynchronously: wait for
	// it before Delete, which cancels a copy that has not started yet.
	for deadline := time.Now().Add(10 * time.Second); out.String() == "" && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := task.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "hi\n" {
		t.Errorf("output %q, want %q", got, "hi\n")
	}
	t.Logf("daemon memory after running a container: %s", rssKiB(d.pid.Load()))
}

func TestDaemonIsRestartedAfterACrashAndContainersSurvive(t *testing.T) {
	old := minBackoff
	minBackoff = 100 * time.Millisecond
	defer func() { minBackoff = old }()
	d, _ := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := connect(t, d)
	img := importBusybox(ctx, t, c)
	var out syncBuffer
	task, _ := runTask(ctx, t, c, img, "sleeper", &out, "sleep", "60")

	t.Logf("shim memory: %s", shimRSS(t, d))
	pid := d.pid.Load()
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if np := d.pid.Load(); np != 0 && np != pid && ping(ctx, d.Address()) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon not restarted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := task.Status(ctx)
	if err != nil {
		t.Fatalf("status after restart: %v", err)
	}
	if st.Status != client.Running {
		t.Errorf("task status after daemon restart: %s, want running", st.Status)
	}
}

func TestDaemonStopsWhenTheContextEnds(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "cd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	d, err := Start(ctx, Config{Dir: dir, Stderr: &bytes.Buffer{}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pid := d.pid.Load()
	cancel()
	select {
	case <-d.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not stop")
	}
	if err := syscall.Kill(int(pid), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("daemon process %d still exists (kill 0: %v)", pid, err)
	}
}

func TestStartRejectsDirsWhoseSocketPathIsTooLong(t *testing.T) {
	dir := "/tmp/" + strings.Repeat("d", 100)
	_, err := Start(context.Background(), Config{Dir: dir})
	if !errors.Is(err, ErrSocketPathTooLong) {
		t.Fatalf("err = %v, want ErrSocketPathTooLong", err)
	}
	if _, serr := os.Stat(dir); serr == nil {
		t.Error("Start created the directory before checking the path")
	}
}

func TestStartFailsClearlyWhenTheDaemonCannotStart(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "cd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// A directory where the gRPC socket must go makes the daemon exit.
	if err := os.MkdirAll(filepath.Join(dir, "containerd.sock", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = Start(ctx, Config{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "exited during start") {
		t.Fatalf("err = %v, want an exit during start", err)
	}
}
