package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Version is the etcd release the tests run against; it matches the
// go.etcd.io/etcd/client/v3 version in skiff's go.mod.
const Version = "v3.7.3"

// Binary returns the path of the etcd server binary, building it on first
// use (see BuildBinary). It fails the test when the build fails.
func Binary(tb testing.TB) string {
	tb.Helper()
	p, err := BuildBinary()
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	return p
}

var build struct {
	once sync.Once
	path string
	err  error
}

// BuildBinary returns the path of the etcd server binary,
// <cache>/etcd-<Version>/etcd with <cache> $SKIFF_E2E_CACHE or skiff-e2e in
// the user's cache directory, building it when it is missing. A file lock
// makes parallel test processes build it once; within a process the result
// is remembered.
//
// `go install go.etcd.io/etcd/server/v3@<Version>` is refused by the go
// command (the module's go.mod has replace directives pointing at the
// sibling modules of etcd's repository), so the binary is built from a
// throwaway main module that requires go.etcd.io/etcd/server/v3 at Version
// and calls etcdmain.Main, exactly as that module's own main.go does. The
// replaced sibling modules are published at the same version, so the
// dependency graph is the release's.
func BuildBinary() (string, error) {
	build.once.Do(func() { build.path, build.err = buildBinary() })
	return build.path, build.err
}

func cacheDir() (string, error) {
	if d := os.Getenv("SKIFF_E2E_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	return filepath.Join(d, "skiff-e2e"), nil
}

func buildBinary() (string, error) {
	root, err := cacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "etcd-"+Version)
	bin := filepath.Join(dir, "etcd")
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build etcd: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(bin) { // another process built it while we waited
		return bin, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := goBuild(ctx, dir, bin); err != nil {
		return "", err
	}
	return bin, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// lockFile takes an exclusive flock on path, waiting for it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("build etcd: lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("build etcd: lock %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

const buildMain = `package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
`

// goBuild builds etcd into bin (through a temporary file renamed into
// place, so that a half-written binary is never found).
func goBuild(ctx context.Context, cache, bin string) error {
	src, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return fmt.Errorf("build etcd: %w", err)
	}
	defer os.RemoveAll(src)
	gomod := "module skiffetcdbuild\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 " + Version + "\n"
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644); err != nil {
		return fmt.Errorf("build etcd: %w", err)
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(buildMain), 0o644); err != nil {
		return fmt.Errorf("build etcd: %w", err)
	}
	tmp := filepath.Join(src, "etcd")
	steps := [][]string{
		{"go", "mod", "tidy"},
		{"go", "build", "-trimpath", "-o", tmp, "."},
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = src
		// Free of the caller's build flags (skiff's containerd tags, -race)
		// and of a workspace that has nothing to do with etcd.
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build etcd: %v: %w\n%s", args, err, out)
		}
	}
	if err := os.Rename(tmp, bin); err != nil {
		return fmt.Errorf("build etcd: %w", err)
	}
	return nil
}
