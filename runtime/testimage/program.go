package testimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ErrNotStatic: an image of one program has no libc or loader, so the
// program must be statically linked.
var ErrNotStatic = errors.New("testimage: program is dynamically linked")

// Program is an image holding one static program (a test webhook or API
// server built with CGO_ENABLED=0), with /etc/passwd, /etc/group and /tmp
// beside it and nothing else.
type Program struct {
	// Binary is the program on this machine.
	Binary string
	// Path is where it lives in the image, e.g. "/crdconvert".
	Path string
	// Entrypoint defaults to [Path]; Cmd are its default arguments.
	Entrypoint, Cmd []string
	// User is the image's USER ("" = root).
	User string
}

// BuildProgram builds the image of p in memory. The same binary gives the
// same digests.
func BuildProgram(p Program) (*Image, error) {
	if !path.IsAbs(p.Path) || path.Clean(p.Path) != p.Path || p.Path == "/" {
		return nil, fmt.Errorf("testimage: program path %q: want a clean absolute file path", p.Path)
	}
	if err := checkStatic(p.Binary); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(p.Binary)
	if err != nil {
		return nil, fmt.Errorf("testimage: read program: %w", err)
	}
	layer, err := programLayer(strings.TrimPrefix(p.Path, "/"), bin)
	if err != nil {
		return nil, err
	}
	entry := p.Entrypoint
	if len(entry) == 0 {
		entry = []string{p.Path}
	}
	created := epoch
	diffID := digest.FromBytes(layer)
	config, err := json.Marshal(ocispec.Image{
		Created:  &created,
		Platform: ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"},
		Config: ocispec.ImageConfig{
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Entrypoint: entry, Cmd: p.Cmd, User: p.User, WorkingDir: "/",
		},
		RootFS:  ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
		History: []ocispec.History{{Created: &created, CreatedBy: "skiff testimage: " + path.Base(p.Path)}},
	})
	if err != nil {
		return nil, fmt.Errorf("testimage: config: %w", err)
	}
	return newImage(layer, config)
}

// checkStatic refuses an ELF binary that asks for a program interpreter.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("testimage: program %s: %w", bin, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%w: %s", ErrNotStatic, bin)
		}
	}
	return nil
}

// programLayer writes the program's root filesystem as an uncompressed tar.
func programLayer(name string, bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, data []byte) error {
		h.ModTime, h.Uname, h.Gname, h.Format = epoch, "root", "root", tar.FormatPAX
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("testimage: tar: %w", err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("testimage: tar: %w", err)
		}
		return nil
	}
	dirs := map[string]int64{"etc/": 0o755, "tmp/": 0o1777}
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		dirs[d+"/"] = 0o755
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names) // a parent sorts before its children
	for _, d := range names {
		if err := add(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: dirs[d]}, nil); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{{"etc/group", 0o644, []byte(group)}, {"etc/passwd", 0o644, []byte(passwd)}, {name, 0o755, bin}}
	for _, f := range files {
		if err := add(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: f.mode}, f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("testimage: tar: %w", err)
	}
	return buf.Bytes(), nil
}
