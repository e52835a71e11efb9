package testimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The host's busybox-static stands in for a static Go program.
func TestBuildProgram_StaticBinary_OneProgramImage(t *testing.T) {
	img, err := BuildProgram(Program{Binary: BusyboxPath, Path: "/usr/local/bin/prog", Cmd: []string{"--help"}, User: "65534"})
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	files, headers := readTar(t, bytes.NewReader(img.Layer))
	if !bytes.Equal(files["usr/local/bin/prog"], bin) || headers["usr/local/bin/prog"].Mode != 0o755 {
		t.Errorf("usr/local/bin/prog: %d bytes mode %o, want the binary, 0755", len(files["usr/local/bin/prog"]), headers["usr/local/bin/prog"].Mode)
	}
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/", "etc/"} {
		if h := headers[d]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("%s: want a directory", d)
		}
	}
	if h := headers["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v, want mode 1777", h)
	}
	if !strings.Contains(string(files["etc/passwd"]), "nobody:x:65534") || len(files) != 3 {
		t.Errorf("files %v, want only the program, passwd and group", len(files))
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(img.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if !reflect.DeepEqual(c.Entrypoint, []string{"/usr/local/bin/prog"}) || !reflect.DeepEqual(c.Cmd, []string{"--help"}) || c.User != "65534" {
		t.Errorf("config %+v, want entrypoint the program, cmd --help, user 65534", c)
	}
	if cfg.RootFS.DiffIDs[0] != img.DiffID {
		t.Errorf("diff ID %s, layer %s", cfg.RootFS.DiffIDs[0], img.DiffID)
	}

	again, err := BuildProgram(Program{Binary: BusyboxPath, Path: "/usr/local/bin/prog", Cmd: []string{"--help"}, User: "65534"})
	if err != nil {
		t.Fatal(err)
	}
	if again.ManifestDigest != img.ManifestDigest {
		t.Errorf("two builds differ: %s, %s", img.ManifestDigest, again.ManifestDigest)
	}

	out := filepath.Join(t.TempDir(), "prog.tar")
	if err := img.WriteOCI(out, "skiff.test/prog:v1"); err != nil {
		t.Fatal(err)
	}
	oci, _ := readTarFile(t, out)
	var index ocispec.Index
	if err := json.Unmarshal(oci["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if got := index.Manifests[0].Annotations[ocispec.AnnotationRefName]; got != "skiff.test/prog:v1" || index.Manifests[0].Digest != img.ManifestDigest {
		t.Errorf("index %+v", index)
	}
}

func TestBuildProgram_Entrypoint_Kept(t *testing.T) {
	img, err := BuildProgram(Program{Binary: BusyboxPath, Path: "/bb", Entrypoint: []string{"/bb", "sh"}})
	if err != nil {
		t.Fatal(err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(img.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Config.Entrypoint, []string{"/bb", "sh"}) {
		t.Errorf("entrypoint %v", cfg.Config.Entrypoint)
	}
}

func TestBuildProgram_BadInput_Error(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho a shell script, not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		p       Program
		wantErr error
		want    string
	}{
		{"dynamic binary", Program{Binary: "/bin/ls", Path: "/ls"}, ErrNotStatic, ""},
		{"relative path", Program{Binary: BusyboxPath, Path: "bb"}, nil, "clean absolute"},
		{"root path", Program{Binary: BusyboxPath, Path: "/"}, nil, "clean absolute"},
		{"missing binary", Program{Binary: filepath.Join(t.TempDir(), "none"), Path: "/x"}, os.ErrNotExist, ""},
		{"not ELF", Program{Binary: script, Path: "/x"}, nil, "bad magic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildProgram(tc.p)
			if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || (tc.want != "" && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("err = %v, want %v %q", err, tc.wantErr, tc.want)
			}
		})
	}
}
