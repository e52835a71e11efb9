package testimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// readTar returns the regular files and the types of all entries of a tarball.
func readTar(t *testing.T, r io.Reader) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, headers
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("read %s: %v", h.Name, err)
			}
			files[h.Name] = b
		}
	}
}

func readTarFile(t *testing.T, path string) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readTar(t, f)
}

// checkLayer checks the root filesystem of the uncompressed layer.
func checkLayer(t *testing.T, layer []byte) {
	t.Helper()
	files, headers := readTar(t, bytes.NewReader(layer))
	if len(files["bin/busybox"]) == 0 {
		t.Fatal("layer has no bin/busybox")
	}
	for _, name := range []string{"sh", "httpd", "nc", "wget", "sleep"} {
		h := headers["bin/"+name]
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("bin/%s: want a symlink to busybox, got %+v", name, h)
		}
	}
	if !strings.Contains(string(files["etc/passwd"]), "nobody:x:65534:65534") {
		t.Errorf("etc/passwd lacks nobody: %q", files["etc/passwd"])
	}
	if !strings.HasPrefix(string(files["etc/group"]), "root:x:0:") {
		t.Errorf("etc/group: %q", files["etc/group"])
	}
	if h := headers["tmp/"]; h == nil || h.Mode&0o7777 != 0o1777 {
		t.Errorf("tmp/: want mode 1777, got %+v", h)
	}
	for _, d := range []string{"root/", "var/www/"} {
		if h := headers[d]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("%s: want a directory", d)
		}
	}
}

func checkConfig(t *testing.T, raw []byte, diffID digest.Digest) {
	t.Helper()
	var cfg ocispec.Image
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != runtime.GOARCH || cfg.OS != "linux" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if len(cfg.Config.Cmd) != 1 || cfg.Config.Cmd[0] != "sh" {
		t.Errorf("cmd %v", cfg.Config.Cmd)
	}
	if len(cfg.Config.Env) != 1 || cfg.Config.Env[0] != "PATH=/usr/sbin:/usr/bin:/sbin:/bin" {
		t.Errorf("env %v", cfg.Config.Env)
	}
	if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != diffID {
		t.Errorf("diff IDs %v, want [%s]", cfg.RootFS.DiffIDs, diffID)
	}
}

func TestWriteOCIProducesAValidLayoutWithMatchingDigests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busybox-oci.tar")
	if err := WriteOCI(path, "busybox"); err != nil {
		t.Fatal(err)
	}
	files, _ := readTarFile(t, path)
	for name, data := range files {
		if strings.HasPrefix(name, "blobs/sha256/") {
			if got := digest.FromBytes(data).Encoded(); got != strings.TrimPrefix(name, "blobs/sha256/") {
				t.Errorf("blob %s has digest %s", name, got)
			}
		}
	}
	if !strings.Contains(string(files["oci-layout"]), `"imageLayoutVersion":"1.0.0"`) {
		t.Errorf("oci-layout: %s", files["oci-layout"])
	}
	var index ocispec.Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests", len(index.Manifests))
	}
	md := index.Manifests[0]
	for _, key := range []string{ocispec.AnnotationRefName, "io.containerd.image.name"} {
		if got := md.Annotations[key]; got != DefaultRef {
			t.Errorf("annotation %s = %q, want %q", key, got, DefaultRef)
		}
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(files[blobPath(md.Digest)], &m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType != ocispec.MediaTypeImageManifest || len(m.Layers) != 1 || m.Layers[0].MediaType != ocispec.MediaTypeImageLayerGzip {
		t.Fatalf("manifest: %+v", m)
	}
	gz := files[blobPath(m.Layers[0].Digest)]
	if int64(len(gz)) != m.Layers[0].Size {
		t.Errorf("layer size %d, manifest says %d", len(gz), m.Layers[0].Size)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	checkLayer(t, layer)
	checkConfig(t, files[blobPath(m.Config.Digest)], digest.FromBytes(layer))
}

func TestWriteDockerArchiveProducesDockerSaveFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busybox-docker.tar")
	if err := WriteDockerArchive(path, DefaultRef); err != nil {
		t.Fatal(err)
	}
	files, _ := readTarFile(t, path)
	var manifest []dockerManifest
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || manifest[0].RepoTags[0] != "busybox:latest" {
		t.Fatalf("manifest.json: %+v", manifest)
	}
	cfg := files[manifest[0].Config]
	if got := digest.FromBytes(cfg).Encoded() + ".json"; got != manifest[0].Config {
		t.Errorf("config file %s has digest %s", manifest[0].Config, got)
	}
	layer := files[manifest[0].Layers[0]]
	checkLayer(t, layer)
	checkConfig(t, cfg, digest.FromBytes(layer))
	if !strings.Contains(string(files["repositories"]), `"busybox":{"latest":`) {
		t.Errorf("repositories: %s", files["repositories"])
	}
}

func TestOutputIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		write func(path, ref string) error
	}{
		{"oci", WriteOCI},
		{"docker", WriteDockerArchive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := filepath.Join(dir, tt.name+"-a.tar"), filepath.Join(dir, tt.name+"-b.tar")
			for _, p := range []string{a, b} {
				if err := tt.write(p, DefaultRef); err != nil {
					t.Fatal(err)
				}
			}
			ba, _ := os.ReadFile(a)
			bb, _ := os.ReadFile(b)
			if !bytes.Equal(ba, bb) {
				t.Error("two writes of the same image differ")
			}
		})
	}
}

func TestInvalidReferenceIsRejected(t *testing.T) {
	tests := []struct {
		name  string
		write func(path, ref string) error
		ref   string
	}{
		{"oci upper-case", WriteOCI, "BusyBox"},
		{"docker upper-case", WriteDockerArchive, "BusyBox"},
		{"docker digest only", WriteDockerArchive, "busybox@sha256:" + strings.Repeat("a", 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.write(filepath.Join(t.TempDir(), "x.tar"), tt.ref); err == nil {
				t.Error("want an error")
			}
		})
	}
}
