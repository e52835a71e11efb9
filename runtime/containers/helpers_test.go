package containers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff/runtime/crilog"
)

// testCgroupRoot is the cgroupfs parent of every test container; runMain
// removes it at the end.
var testCgroupRoot = fmt.Sprintf("/skiff-ctest-%d", os.Getpid())

func newTestRuntime(t *testing.T) *Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := New(ctx, Config{
		Address: testAddress, Namespace: testNamespace, StateDir: testStateDir,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// testWriter sends log output to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// baseConfig is a host-network container of a pod named after the test.
func baseConfig(t *testing.T, cmd ...string) ContainerConfig {
	uid := newID()[:16]
	return ContainerConfig{
		PodUID: uid, PodNamespace: "default", PodName: strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")),
		Name: "main", Image: testImage, Command: cmd, HostNetwork: true,
		CgroupParent: testCgroupRoot + "/pod" + uid,
		LogPath:      filepath.Join(t.TempDir(), "main", "0.log"),
		Resources:    Resources{CPUShares: 2},
	}
}

// create creates the container and removes it when the test ends.
func create(t *testing.T, r *Runtime, cc ContainerConfig) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := r.Create(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Remove(ctx, id); err != nil {
			t.Errorf("remove %s: %v", id, err)
		}
	})
	return id
}

// run creates and starts the container.
func run(t *testing.T, r *Runtime, cc ContainerConfig) string {
	t.Helper()
	id := create(t, r, cc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitState polls until the container reaches state.
func waitState(t *testing.T, r *Runtime, id string, state State) ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := r.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == state {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s is %s, want %s", id, st.State, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logText reads the container's log as `kubectl logs` would (optionally one
// stream only).
func logText(t *testing.T, path, stream string) string {
	t.Helper()
	var buf bytes.Buffer
	err := crilog.Read(context.Background(), path, crilog.ReadOptions{Stream: stream}, &buf)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return buf.String()
}

// waitLog polls until the log contains want.
func waitLog(t *testing.T, path, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := logText(t, path, "")
		if strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %s lacks %q; has %q", path, want, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// removeCgroupRoot removes the test cgroup tree in every hierarchy.
func removeCgroupRoot() {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	hierarchies = append(hierarchies, "/sys/fs/cgroup")
	for _, h := range hierarchies {
		root := filepath.Join(h, testCgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			_ = os.Remove(d)
		}
	}
}
