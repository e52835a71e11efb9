package daemon

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// linkSelf makes bin/containerd and bin/containerd-shim-runc-v2 hard links
// to the running executable. Symlinks do not work: the shim re-executes
// os.Executable(), which resolves symlinks to the skiff name. When a hard
// link is impossible (bin on another filesystem) the executable is copied.
// Links that already point at the executable are kept; stale ones (after
// an upgrade) are replaced.
func linkSelf(bin string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("daemon: find own executable: %w", err)
	}
	selfInfo, err := os.Stat(self)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if len(embeddedShim) > 0 {
		if err := writeShim(filepath.Join(bin, ShimName)); err != nil {
			return err
		}
		return linkOne(self, selfInfo, filepath.Join(bin, DaemonName))
	}
	for _, name := range []string{DaemonName, ShimName} {
		if err := linkOne(self, selfInfo, filepath.Join(bin, name)); err != nil {
			return err
		}
	}
	return nil
}

// writeShim writes the embedded shim binary to target unless it is there
// already with the same content.
func writeShim(target string) error {
	if old, err := os.ReadFile(target); err == nil && bytes.Equal(old, embeddedShim) {
		return nil
	}
	tmp := target + ".new"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, embeddedShim, 0o755); err != nil {
		return fmt.Errorf("daemon: write shim: %w", err)
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("daemon: write shim: %w", err)
	}
	return nil
}

func linkOne(self string, selfInfo os.FileInfo, target string) error {
	if fi, err := os.Lstat(target); err == nil {
		if fi.Mode().IsRegular() && os.SameFile(fi, selfInfo) {
			return nil
		}
		if sameContent(selfInfo, fi) {
			return nil
		}
	}
	tmp := target + ".new"
	_ = os.Remove(tmp)
	if err := os.Link(self, tmp); err != nil {
		if cerr := copyFile(self, tmp); cerr != nil {
			return fmt.Errorf("daemon: link %s: %v; copy: %w", target, err, cerr)
		}
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("daemon: link %s: %w", target, err)
	}
	return nil
}

// sameContent reports whether fi is an earlier copy of self (same size
// and modification time, as copyFile preserves them).
func sameContent(selfInfo, fi os.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Size() == selfInfo.Size() && fi.ModTime().Equal(selfInfo.ModTime())
}

// copyFile copies an executable, keeping its modification time.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(dst)
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}
