package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff/e2e/testimages"
)

// The helm and cert-manager versions the extension-API tests install with;
// both come from the Go module proxy and are cached under the e2e cache
// directory (testimages.CacheDir).
const (
	helmVersion        = "v3.22.0"
	certManagerModule  = "github.com/cert-manager/cert-manager"
	certManagerVersion = "v1.21.2"
	// helmKubeMinor is the minor of the client-go helm v3.22.0 builds with
	// (k8s.io/client-go v0.37.0 in its go.mod).
	helmKubeMinor = "37"
)

var (
	helmOnce sync.Once
	helmBin  string
	helmErr  error

	chartOnce sync.Once
	chartDir  string
	chartErr  error
)

// e2eCache is the e2e cache root (made if missing).
func e2eCache(t *testing.T) string {
	t.Helper()
	dir, err := testimages.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// goTool runs the go command outside the skiff module with the machine's
// plain build settings (none of skiff's tags, no cgo).
func goTool(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0", "GO111MODULE=on"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// helmPath is helm v3 built from its module (`go install
// helm.sh/helm/v3/cmd/helm@v3.22.0`, 1-3 minutes the first time on a
// machine), cached as <cache>/helm-v3.22.0-k1.37/helm.
func helmPath(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() { helmBin, helmErr = installHelm(e2eCache(t)) })
	if helmErr != nil {
		t.Fatalf("helm: %v", helmErr)
	}
	return helmBin
}

func installHelm(cache string) (string, error) {
	// The directory names the build recipe too: a change of ldflags must
	// not reuse a helm built the old way.
	dir := filepath.Join(cache, "helm-"+helmVersion+"-k1."+helmKubeMinor)
	bin := filepath.Join(dir, "helm")
	if fi, err := os.Stat(bin); err == nil && fi.Mode()&0o111 != 0 {
		return bin, nil
	}
	// Into a temp GOBIN first, then renamed: a killed install leaves no
	// half-written helm to be taken for a good one.
	tmp, err := os.MkdirTemp(cache, ".helm-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// As helm's release build (its Makefile): the version, and the
	// Kubernetes version `helm template` assumes (1.<client-go minor>; the
	// unstamped default, 1.20, fails charts that require newer, as
	// cert-manager's >= 1.22).
	ldflags := "-s -w -X helm.sh/helm/v3/internal/version.version=" + helmVersion
	for _, pkg := range []string{"helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/lint/rules"} {
		ldflags += " -X " + pkg + ".k8sVersionMajor=1 -X " + pkg + ".k8sVersionMinor=" + helmKubeMinor
	}
	if _, err := goTool(ctx, tmp, []string{"GOBIN=" + tmp}, "install", "-trimpath", "-ldflags", ldflags, "helm.sh/helm/v3/cmd/helm@"+helmVersion); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// helm runs the helm binary with its config, cache and data homes in a
// per-test directory (never the user's), and returns stdout; it fails the
// test on an error.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := helmRun(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// helmRun is helm that returns stdout, stderr and the error.
func helmRun(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	bin := helmPath(t)
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// certManagerChart is cert-manager's Helm chart (deploy/charts/cert-manager
// of its Go module at certManagerVersion) as a chart directory helm
// installs: Chart.yaml's version and appVersion, which cert-manager's
// release tooling fills (v0.0.0 in the source), set to the release, so
// that the images are quay.io/jetstack/cert-manager-*:v1.21.2. The chart
// has no dependencies; its CRDs are templates behind crds.enabled.
func certManagerChart(t *testing.T) string {
	t.Helper()
	chartOnce.Do(func() { chartDir, chartErr = makeCertManagerChart(e2eCache(t)) })
	if chartErr != nil {
		t.Fatalf("cert-manager chart: %v", chartErr)
	}
	return chartDir
}

var chartVersionLine = regexp.MustCompile(`(?m)^(version|appVersion):.*$`)

func makeCertManagerChart(cache string) (string, error) {
	return chartFromModule(cache, moduleChart{
		module: certManagerModule, version: certManagerVersion,
		dir: "deploy/charts/cert-manager", name: "cert-manager-" + certManagerVersion,
		edit: func(rel string, b []byte) ([]byte, error) {
			if rel != "Chart.yaml" {
				return b, nil
			}
			if n := len(chartVersionLine.FindAll(b, -1)); n != 2 {
				return nil, fmt.Errorf("%s: %d version/appVersion lines, want 2", rel, n)
			}
			return chartVersionLine.ReplaceAll(b, []byte("${1}: "+certManagerVersion)), nil
		},
	})
}

// moduleChart is a Helm chart kept in a Go module's source.
type moduleChart struct {
	module, version string
	// dir is the chart's directory in the module (slash-separated).
	dir string
	// name is the copy's directory under <cache>/charts; it must change
	// whenever module, version or edit does.
	name string
	// edit, if set, rewrites each file of the copy (rel is its path in
	// the chart), for what the project's release tooling fills in.
	edit func(rel string, b []byte) ([]byte, error)
}

// chartFromModule copies the chart mc out of its module (`go mod download`
// from the Go module proxy) into <cache>/charts/<mc.name>, once per cache:
// a chart directory helm installs.
func chartFromModule(cache string, mc moduleChart) (string, error) {
	dst := filepath.Join(cache, "charts", mc.name)
	if _, err := os.Stat(filepath.Join(dst, "Chart.yaml")); err == nil {
		return dst, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := goTool(ctx, cache, nil, "mod", "download", "-json", mc.module+"@"+mc.version)
	if err != nil {
		return "", err
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s", mc.module, mc.version, err, mod.Error)
	}
	src := filepath.Join(mod.Dir, filepath.FromSlash(mc.dir))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+mc.name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	// The module cache is read-only: copy with writable modes.
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if mc.edit != nil {
			if b, err = mc.edit(filepath.ToSlash(rel), b); err != nil {
				return err
			}
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copy chart %s from %s@%s: %w", mc.dir, mc.module, mc.version, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		// Another run made it meanwhile: use theirs.
		if _, statErr := os.Stat(filepath.Join(dst, "Chart.yaml")); statErr == nil {
			return dst, nil
		}
		return "", err
	}
	return dst, nil
}
