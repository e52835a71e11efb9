package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	dataLink    = "..data"
	dataLinkTmp = "..data_tmp"
	tsLayout    = "2006_01_02_15_04_05"
)

// file is one file of a configMap/secret/downwardAPI/projected volume.
type file struct {
	Data []byte
	Mode os.FileMode
	// UID, when set, owns the file (the service-account token of a pod
	// whose containers all run as one user).
	UID *int64
}

// payload maps a relative path inside the volume to its file.
type payload map[string]file

// validatePath refuses absolute paths, ".." elements and elements starting
// with ".." (reserved for the writer's own entries).
func validatePath(p string) error {
	if p == "" {
		return errors.New("empty path")
	}
	if filepath.IsAbs(p) {
		return fmt.Errorf("path %q must be relative", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." || strings.HasPrefix(el, "..") {
			return fmt.Errorf("path %q must not contain '..'", p)
		}
	}
	return nil
}

// writeAtomic makes dir hold exactly p, the way the kubelet's atomic writer
// does: the files are written into a new timestamped directory
// "..<timestamp>.<random>", the "..data" symlink is switched to it with a
// rename (atomic), and every top-level entry is a symlink "name ->
// ..data/name", so a container sees either the old or the new content,
// never a mix. Nothing is rewritten when the content is unchanged. gid,
// when set, is the fsGroup that must be able to read the files.
func writeAtomic(dir string, p payload, now time.Time, gid *int64) error {
	for rel := range p {
		if err := validatePath(rel); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	if old == "" || !sameContent(filepath.Join(dir, old), p, gid) {
		tsDir, err := os.MkdirTemp(dir, ".."+now.UTC().Format(tsLayout)+".")
		if err != nil {
			return err
		}
		if err := os.Chmod(tsDir, 0o755); err != nil {
			return err
		}
		if err := writeFiles(tsDir, p, gid); err != nil {
			os.RemoveAll(tsDir)
			return err
		}
		tmp := filepath.Join(dir, dataLinkTmp)
		os.Remove(tmp)
		if err := os.Symlink(filepath.Base(tsDir), tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
			return err
		}
	}
	if err := linkTopLevel(dir, p); err != nil {
		return err
	}
	return removeStaleDirs(dir)
}

func writeFiles(root string, p payload, gid *int64) error {
	for rel, f := range p {
		full := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.Data, 0o600); err != nil {
			return err
		}
		mode := fileMode(f.Mode, gid)
		if err := os.Chmod(full, mode); err != nil {
			return err
		}
		uid, g := -1, -1
		if f.UID != nil {
			uid = int(*f.UID)
		}
		if gid != nil {
			g = int(*gid)
		}
		if uid != -1 || g != -1 {
			if err := os.Lchown(full, uid, g); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileMode is a file's mode; with an fsGroup the group may always read it
// (the kubelet's volume ownership rule for read-only volumes).
func fileMode(m os.FileMode, gid *int64) os.FileMode {
	if gid != nil {
		m |= 0o440
	}
	return m.Perm()
}

// sameContent reports whether dir already holds exactly p.
func sameContent(dir string, p payload, gid *int64) bool {
	seen := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		f, ok := p[rel]
		if !ok {
			return errors.New("extra file")
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm() != fileMode(f.Mode, gid) || !sameOwner(info, f.UID, gid) {
			return errors.New("mode differs")
		}
		data, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(data, f.Data) {
			return errors.New("data differs")
		}
		seen++
		return nil
	})
	return err == nil && seen == len(p)
}

func sameOwner(info fs.FileInfo, uid, gid *int64) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	return (uid == nil || int64(st.Uid) == *uid) && (gid == nil || int64(st.Gid) == *gid)
}

// linkTopLevel makes "name -> ..data/name" for every top-level element of
// p and removes user-visible symlinks into ..data that p no longer has.
func linkTopLevel(dir string, p payload) error {
	want := map[string]bool{}
	for rel := range p {
		want[strings.SplitN(rel, "/", 2)[0]] = true
	}
	for name := range want {
		link := filepath.Join(dir, name)
		target := filepath.Join(dataLink, name)
		if cur, err := os.Readlink(link); err == nil && cur == target {
			continue
		}
		if err := os.RemoveAll(link); err != nil {
			return err
		}
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") || want[name] {
			continue
		}
		if cur, err := os.Readlink(filepath.Join(dir, name)); err == nil && strings.HasPrefix(cur, dataLink+"/") {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeStaleDirs deletes timestamped directories ..data no longer points to.
func removeStaleDirs(dir string) error {
	cur, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "..") || name == cur || name == dataLink {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
