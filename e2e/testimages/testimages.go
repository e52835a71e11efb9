// Package testimages builds the container images of skiff's own e2e test
// programs (the CRD conversion webhook in ./crdconvert, the aggregated API
// server in ./extapi, the admission webhook in ./admwebhook) as OCI image
// tarballs that `skiff images import` takes, so that tests run them in pods
// without a registry. Builds are static (CGO_ENABLED=0) and cached under
// the e2e cache directory, keyed by the binary's content: the Go build
// cache makes a rebuild of unchanged sources a link, and an unchanged
// binary reuses its tarball.
package testimages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"skiff/runtime/testimage"
)

// Image is a built image tarball and the reference it carries.
type Image struct {
	// Ref is the full reference, e.g. "docker.io/skiff/crdconvert:e2e";
	// a pod names it with imagePullPolicy: Never (or IfNotPresent).
	Ref string
	// Path is the OCI tarball, for `skiff images import` or a node's
	// agent/images directory.
	Path string
	// Entrypoint is the program in the image.
	Entrypoint string
}

// Program is one test program and how its image is named.
type Program struct {
	// Pkg is the Go package of its main, inside the skiff module.
	Pkg string
	// Ref names the image.
	Ref string
	// Path is where the binary is in the image (the entrypoint).
	Path string
}

// The test programs. Their refs have a tag other than latest so that
// kubelet's default pull policy for them is IfNotPresent.
var (
	CRDConvert = Program{Pkg: "skiff/e2e/testimages/crdconvert", Ref: "docker.io/skiff/crdconvert:e2e", Path: "/crdconvert"}
	ExtAPI     = Program{Pkg: "skiff/e2e/testimages/extapi", Ref: "docker.io/skiff/extapi:e2e", Path: "/extapi"}
	AdmWebhook = Program{Pkg: "skiff/e2e/testimages/admwebhook", Ref: "docker.io/skiff/admwebhook:e2e", Path: "/admwebhook"}
)

// CacheDir is the e2e cache root shared by test tools (helm, charts,
// images): $SKIFF_E2E_CACHE, else skiff-e2e in the user's cache directory
// (~/.cache/skiff-e2e).
func CacheDir() (string, error) {
	if d := os.Getenv("SKIFF_E2E_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testimages: cache dir: %w", err)
	}
	return filepath.Join(d, "skiff-e2e"), nil
}

// Build compiles p statically and returns its image tarball under
// cacheDir/images. The go command runs in the working directory, which
// must be inside the skiff module (go test runs tests in their package's).
func Build(ctx context.Context, cacheDir string, p Program) (Image, error) {
	dir := filepath.Join(cacheDir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Image{}, fmt.Errorf("testimages: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return Image{}, fmt.Errorf("testimages: %w", err)
	}
	defer os.RemoveAll(tmp)
	name := filepath.Base(p.Path)
	bin := filepath.Join(tmp, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, p.Pkg)
	// Static, and free of the caller's build flags (skiff's cgo and
	// containerd tags, -race) that have nothing to do with the program.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Image{}, fmt.Errorf("testimages: go build %s: %w\n%s", p.Pkg, err, out)
	}
	sum, err := fileSum(bin)
	if err != nil {
		return Image{}, err
	}
	img := Image{Ref: p.Ref, Path: filepath.Join(dir, name+"-"+sum[:16]+".tar"), Entrypoint: p.Path}
	if _, err := os.Stat(img.Path); err == nil {
		return img, nil
	}
	built, err := testimage.BuildProgram(testimage.Program{Binary: bin, Path: p.Path})
	if err != nil {
		return Image{}, err
	}
	if err := built.WriteOCI(img.Path, p.Ref); err != nil {
		return Image{}, err
	}
	removeStale(dir, name, img.Path)
	return img, nil
}

// fileSum is the hex sha256 of a file.
func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("testimages: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("testimages: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// removeStale deletes the tarballs of earlier builds of name, so that the
// cache holds one per program. Errors are ignored: a stale file costs disk,
// not correctness.
func removeStale(dir, name, keep string) {
	old, _ := filepath.Glob(filepath.Join(dir, name+"-*.tar"))
	for _, o := range old {
		if o != keep {
			_ = os.Remove(o)
		}
	}
}
