// Package testimage builds a small busybox container image from the host's
// static busybox binary (Debian's busybox-static), as an OCI image-layout
// tarball or a docker-archive tarball, so that tests and air-gapped machines
// can run pods without a registry. The output is deterministic: the same
// busybox binary always gives the same digests.
package testimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "crypto/sha256" // registers sha256 for go-digest
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/distribution/reference"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// DefaultRef is the reference tests use, so that pods with `image: busybox`
// run offline.
const DefaultRef = "docker.io/library/busybox:latest"

// BusyboxPath is the static busybox binary the image is built from.
var BusyboxPath = "/bin/busybox"

// epoch is the fixed modification time of every file in the image.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	group  = "root:x:0:\nnogroup:x:65534:\n"
)

// Image is the built image: its blobs and descriptors.
type Image struct {
	// Layer is the uncompressed layer tar; LayerGz the gzip-compressed one.
	Layer, LayerGz []byte
	// Config is the image configuration JSON.
	Config []byte
	// Manifest is the OCI manifest JSON (referring to LayerGz).
	Manifest []byte
	// DiffID is the digest of Layer; ConfigDigest the digest of Config
	// (the image ID); ManifestDigest the digest of Manifest.
	DiffID, ConfigDigest, ManifestDigest digest.Digest
}

// Build builds the busybox image in memory from BusyboxPath.
func Build() (*Image, error) {
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("testimage: read busybox: %w", err)
	}
	applets, err := listApplets(BusyboxPath)
	if err != nil {
		return nil, err
	}
	layer, err := buildLayer(bin, applets)
	if err != nil {
		return nil, err
	}
	config, err := configJSON(digest.FromBytes(layer))
	if err != nil {
		return nil, err
	}
	return newImage(layer, config)
}

// newImage compresses layer and writes the manifest for it and config.
func newImage(layer, config []byte) (*Image, error) {
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		return nil, fmt.Errorf("testimage: gzip: %w", err)
	}
	if _, err := zw.Write(layer); err != nil {
		return nil, fmt.Errorf("testimage: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("testimage: gzip: %w", err)
	}
	img := &Image{Layer: layer, LayerGz: gz.Bytes(), DiffID: digest.FromBytes(layer), Config: config}
	img.ConfigDigest = digest.FromBytes(img.Config)
	manifest := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{
			MediaType: ocispec.MediaTypeImageConfig,
			Digest:    img.ConfigDigest,
			Size:      int64(len(img.Config)),
		},
		Layers: []ocispec.Descriptor{{
			MediaType: ocispec.MediaTypeImageLayerGzip,
			Digest:    digest.FromBytes(img.LayerGz),
			Size:      int64(len(img.LayerGz)),
		}},
	}
	if img.Manifest, err = json.Marshal(manifest); err != nil {
		return nil, fmt.Errorf("testimage: manifest: %w", err)
	}
	img.ManifestDigest = digest.FromBytes(img.Manifest)
	return img, nil
}

// listApplets returns the applet names of the busybox binary, without
// "busybox" itself.
func listApplets(path string) ([]string, error) {
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("testimage: %s --list: %w", path, err)
	}
	var applets []string
	for _, name := range strings.Fields(string(out)) {
		if name != "busybox" && !strings.Contains(name, "/") {
			applets = append(applets, name)
		}
	}
	sort.Strings(applets)
	return applets, nil
}

// buildLayer writes the root filesystem as an uncompressed tar.
func buildLayer(bin []byte, applets []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(name string, typ byte, mode int64) *tar.Header {
		return &tar.Header{
			Name: name, Typeflag: typ, Mode: mode, ModTime: epoch,
			Uname: "root", Gname: "root", Format: tar.FormatPAX,
		}
	}
	dirs := []struct {
		name string
		mode int64
	}{{"bin/", 0o755}, {"etc/", 0o755}, {"root/", 0o700}, {"tmp/", 0o1777}, {"var/", 0o755}, {"var/www/", 0o755}}
	for _, d := range dirs {
		if err := tw.WriteHeader(hdr(d.name, tar.TypeDir, d.mode)); err != nil {
			return nil, fmt.Errorf("testimage: tar: %w", err)
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{{"bin/busybox", 0o755, bin}, {"etc/passwd", 0o644, []byte(passwd)}, {"etc/group", 0o644, []byte(group)}}
	for _, f := range files {
		h := hdr(f.name, tar.TypeReg, f.mode)
		h.Size = int64(len(f.data))
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("testimage: tar: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("testimage: tar: %w", err)
		}
	}
	for _, a := range applets {
		h := hdr("bin/"+a, tar.TypeSymlink, 0o777)
		h.Linkname = "busybox"
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("testimage: tar: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("testimage: tar: %w", err)
	}
	return buf.Bytes(), nil
}

func configJSON(diffID digest.Digest) ([]byte, error) {
	created := epoch
	cfg := ocispec.Image{
		Created:  &created,
		Platform: ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"},
		Config: ocispec.ImageConfig{
			Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
			Cmd: []string{"sh"},
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
		History: []ocispec.History{{
			Created: &created, CreatedBy: "skiff testimage: busybox-static", Comment: "busybox",
		}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("testimage: config: %w", err)
	}
	return b, nil
}

// WriteOCI writes the busybox image named ref as an OCI image-layout tarball
// (oci-layout, index.json, blobs/sha256/…) to path.
func WriteOCI(path, ref string) error {
	img, err := Build()
	if err != nil {
		return err
	}
	return img.WriteOCI(path, ref)
}

// WriteDockerArchive writes the busybox image named ref as a docker-archive
// tarball (the `docker save` format) to path.
func WriteDockerArchive(path, ref string) error {
	img, err := Build()
	if err != nil {
		return err
	}
	return img.WriteDockerArchive(path, ref)
}

// WriteOCI writes img named ref as an OCI image-layout tarball to path.
func (img *Image) WriteOCI(path, ref string) error {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return fmt.Errorf("testimage: reference %q: %w", ref, err)
	}
	full := reference.TagNameOnly(named).String()
	index := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{
			MediaType: ocispec.MediaTypeImageManifest,
			Digest:    img.ManifestDigest,
			Size:      int64(len(img.Manifest)),
			Annotations: map[string]string{
				ocispec.AnnotationRefName:  full,
				"io.containerd.image.name": full,
			},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("testimage: index: %w", err)
	}
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	entries := []entry{
		{name: "blobs/", dir: true},
		{name: "blobs/sha256/", dir: true},
		{name: blobPath(img.ConfigDigest), data: img.Config},
		{name: blobPath(digest.FromBytes(img.LayerGz)), data: img.LayerGz},
		{name: blobPath(img.ManifestDigest), data: img.Manifest},
		{name: ocispec.ImageLayoutFile, data: layout},
		{name: ocispec.ImageIndexFile, data: indexJSON},
	}
	return writeTar(path, entries)
}

// dockerManifest is one entry of a docker-archive manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// WriteDockerArchive writes img named ref as a docker-archive tarball to path.
func (img *Image) WriteDockerArchive(path, ref string) error {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return fmt.Errorf("testimage: reference %q: %w", ref, err)
	}
	tagged, ok := reference.TagNameOnly(named).(reference.NamedTagged)
	if !ok {
		return fmt.Errorf("testimage: reference %q has a digest, a docker archive needs a tag", ref)
	}
	familiar := reference.FamiliarString(tagged)
	layerID := img.DiffID.Encoded()
	configName := img.ConfigDigest.Encoded() + ".json"
	layerName := layerID + "/layer.tar"
	manifest, err := json.Marshal([]dockerManifest{{
		Config: configName, RepoTags: []string{familiar}, Layers: []string{layerName},
	}})
	if err != nil {
		return fmt.Errorf("testimage: manifest.json: %w", err)
	}
	repos, err := json.Marshal(map[string]map[string]string{
		reference.FamiliarName(tagged): {tagged.Tag(): layerID},
	})
	if err != nil {
		return fmt.Errorf("testimage: repositories: %w", err)
	}
	entries := []entry{
		{name: configName, data: img.Config},
		{name: layerID + "/", dir: true},
		{name: layerID + "/VERSION", data: []byte("1.0")},
		{name: layerName, data: img.Layer},
		{name: "manifest.json", data: manifest},
		{name: "repositories", data: repos},
	}
	return writeTar(path, entries)
}

func blobPath(d digest.Digest) string {
	return "blobs/" + d.Algorithm().String() + "/" + d.Encoded()
}

type entry struct {
	name string
	dir  bool
	data []byte
}

// writeTar writes entries to path atomically (temp file + rename).
func writeTar(path string, entries []entry) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".testimage-*")
	if err != nil {
		return fmt.Errorf("testimage: %w", err)
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, ModTime: epoch, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			tmp.Close()
			return fmt.Errorf("testimage: write %s: %w", path, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			tmp.Close()
			return fmt.Errorf("testimage: write %s: %w", path, err)
		}
	}
	if err := tw.Close(); err != nil {
		tmp.Close()
		return fmt.Errorf("testimage: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("testimage: write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("testimage: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("testimage: %w", err)
	}
	return nil
}
