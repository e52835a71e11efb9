// Package snapshot saves, lists, prunes and restores snapshots of the
// state store, as k3s's `etcd-snapshot`: a snapshot is a consistent copy of
// the store's SQLite database (the single server's, or a Raft member's
// replica), named <name>-<node>-<unix seconds> in the snapshot directory,
// with a JSON sidecar in <dir>/.metadata recording its revision, size,
// node and time. Snapshots are taken on demand (`skiff snapshot save`,
// name "on-demand") and on a cron schedule by the server (name
// "scheduled"), whose retention prunes only the scheduled ones.
package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"skiff/store/sqlite"
)

// The names k3s gives its snapshots: "on-demand" for `save`, and ours
// "scheduled" for the server's schedule (k3s's "etcd-snapshot").
const (
	OnDemandName  = "on-demand"
	ScheduledName = "scheduled"
)

// metadataDir holds one JSON sidecar per snapshot, as k3s's .metadata.
const metadataDir = ".metadata"

var (
	// ErrInvalidName: a snapshot, name prefix or node name that is not a
	// plain file name (empty, hidden, or with a path separator).
	ErrInvalidName = errors.New("snapshot: invalid name")
	// ErrExists: a snapshot of that name exists already.
	ErrExists = errors.New("snapshot: already exists")
	// ErrNotFound: no snapshot of that name.
	ErrNotFound = errors.New("snapshot: not found")
)

// Backuper writes a consistent copy of a store's database to path, which
// must not exist. *sqlite.Store and *raft.Store implement it.
type Backuper interface {
	Backup(ctx context.Context, path string) error
}

// Info describes one snapshot.
type Info struct {
	Name string `json:"name"`
	// Path is the snapshot file: <dir>/<Name>.
	Path string `json:"-"`
	// Node is the server that took it ("" when its sidecar is missing).
	Node      string    `json:"node,omitempty"`
	Size      int64     `json:"size"`
	Created   time.Time `json:"created"`
	Revision  int64     `json:"revision"`
	Compacted int64     `json:"compacted"`
}

// Dir is the default snapshot directory of a data directory
// (--snapshot-dir overrides it).
func Dir(dataDir string) string {
	return filepath.Join(dataDir, "server", "db", "snapshots")
}

// FileName is the name Save gives a snapshot: k3s's <name>-<node>-<unix>.
func FileName(name, node string, at time.Time) string {
	return name + "-" + node + "-" + strconv.FormatInt(at.Unix(), 10)
}

// Save writes a snapshot of src into dir as FileName(name, node, now). The
// copy goes to a hidden temporary file first and is fsynced before it gets
// its name, so a crash never leaves a half-written snapshot under a
// snapshot's name, and an existing snapshot is never overwritten.
func Save(ctx context.Context, src Backuper, dir, name, node string, now time.Time) (Info, error) {
	for _, n := range []string{name, node} {
		if err := checkName(n); err != nil {
			return Info{}, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Info{}, fmt.Errorf("snapshot: %w", err)
	}
	final := FileName(name, node, now)
	tmp, err := tempPath(dir, "."+final+".tmp-*")
	if err != nil {
		return Info{}, err
	}
	defer os.Remove(tmp) // gone already when published
	if err := src.Backup(ctx, tmp); err != nil {
		return Info{}, fmt.Errorf("snapshot: save %s: %w", final, err)
	}
	if err := syncFile(tmp); err != nil {
		return Info{}, err
	}
	meta, err := sqlite.ReadMeta(ctx, tmp)
	if err != nil {
		return Info{}, fmt.Errorf("snapshot: save %s: the copy does not read back: %w", final, err)
	}
	st, err := os.Stat(tmp)
	if err != nil {
		return Info{}, fmt.Errorf("snapshot: %w", err)
	}
	path := filepath.Join(dir, final)
	if err := publish(tmp, path); err != nil {
		return Info{}, err
	}
	info := Info{Name: final, Path: path, Node: node, Size: st.Size(), Created: now.UTC().Truncate(time.Second),
		Revision: meta.Revision, Compacted: meta.Compacted}
	if err := writeMetadata(dir, info); err != nil {
		return info, err // the snapshot itself is whole; List falls back to reading it
	}
	return info, nil
}

// publish gives tmp its final name without replacing anything there: a
// hard link fails if the name exists, where rename would overwrite.
func publish(tmp, path string) error {
	err := os.Link(tmp, path)
	switch {
	case err == nil:
		os.Remove(tmp)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%w: %s", ErrExists, filepath.Base(path))
	default: // a file system without hard links
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%w: %s", ErrExists, filepath.Base(path))
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	return syncDir(filepath.Dir(path))
}

// List returns the snapshots in dir, oldest first. Hidden files (the
// temporary files of a Save in progress or interrupted, the metadata) and
// SQLite's side files are not snapshots. A missing dir has none.
func List(dir string) ([]Info, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var out []Info
	for _, e := range entries {
		if !e.Type().IsRegular() || !isSnapshotName(e.Name()) {
			continue
		}
		info, err := describe(dir, e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// describe reads a snapshot's sidecar, or, for a snapshot without one
// (copied in by hand, or its sidecar write failed), the file itself.
func describe(dir, name string) (Info, error) {
	path := filepath.Join(dir, name)
	st, err := os.Stat(path)
	if err != nil {
		return Info{}, err
	}
	var info Info
	if data, err := os.ReadFile(metadataPath(dir, name)); err == nil && json.Unmarshal(data, &info) == nil && info.Name == name {
		info.Path, info.Size = path, st.Size()
		return info, nil
	}
	info = Info{Name: name, Path: path, Size: st.Size(), Created: st.ModTime().UTC().Truncate(time.Second)}
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		if sec, err := strconv.ParseInt(name[i+1:], 10, 64); err == nil {
			info.Created = time.Unix(sec, 0).UTC()
		}
	}
	// Not a skiff database: listed with revision 0, for the user to see.
	if m, err := sqlite.ReadMeta(context.Background(), path); err == nil {
		info.Revision, info.Compacted = m.Revision, m.Compacted
	}
	return info, nil
}

// Delete removes the named snapshots and their metadata. Names are plain
// file names in dir: anything else (a path, "..") is refused before
// anything is removed.
func Delete(dir string, names ...string) error {
	for _, n := range names {
		if err := checkName(n); err != nil {
			return err
		}
	}
	var errs []error
	for _, n := range names {
		err := os.Remove(filepath.Join(dir, n))
		if errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%w: %s", ErrNotFound, n))
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("snapshot: %w", err))
			continue
		}
		if err := os.Remove(metadataPath(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("snapshot: metadata of %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// Prune deletes the snapshots named <prefix>-<unix seconds> beyond the
// newest retention, as k3s's retention. prefix is "<name>-<node>": the
// server prunes its own scheduled snapshots ("scheduled-<node>"), never
// the on-demand ones nor another node's in a shared directory. A
// retention below 1 keeps everything.
func Prune(dir, prefix string, retention int) error {
	if retention < 1 {
		return nil
	}
	all, err := List(dir)
	if err != nil {
		return err
	}
	var matching []Info
	for _, s := range all {
		ts, ok := strings.CutPrefix(s.Name, prefix+"-")
		if _, err := strconv.ParseUint(ts, 10, 64); ok && err == nil {
			matching = append(matching, s)
		}
	}
	if len(matching) <= retention {
		return nil
	}
	var names []string
	for _, s := range matching[:len(matching)-retention] { // oldest first
		names = append(names, s.Name)
	}
	return Delete(dir, names...)
}

// checkName accepts plain, visible file names.
func checkName(n string) error {
	if n == "" || n == "." || n == ".." || strings.HasPrefix(n, ".") || strings.ContainsAny(n, `/\`) || n != filepath.Base(n) {
		return fmt.Errorf("%w: %q (want a plain file name)", ErrInvalidName, n)
	}
	return nil
}

// isSnapshotName leaves out hidden files and SQLite's side files.
func isSnapshotName(n string) bool {
	if strings.HasPrefix(n, ".") {
		return false
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if strings.HasSuffix(n, suffix) {
			return false
		}
	}
	return true
}

func metadataPath(dir, name string) string {
	return filepath.Join(dir, metadataDir, name+".json")
}

// writeMetadata writes the sidecar atomically (temp file, fsync, rename).
func writeMetadata(dir string, info Info) error {
	mdir := filepath.Join(dir, metadataDir)
	if err := os.MkdirAll(mdir, 0o700); err != nil {
		return fmt.Errorf("snapshot: metadata: %w", err)
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("snapshot: metadata: %w", err)
	}
	f, err := os.CreateTemp(mdir, "."+info.Name+".tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot: metadata: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(f.Name(), metadataPath(dir, info.Name))
	}
	if err != nil {
		return fmt.Errorf("snapshot: metadata of %s: %w", info.Name, err)
	}
	return syncDir(mdir)
}

// tempPath returns a fresh name in dir that does not exist: Backup (VACUUM
// INTO) wants to create the file itself.
func tempPath(dir, pattern string) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	return name, nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	err = f.Sync()
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("snapshot: sync %s: %w", path, err)
	}
	return nil
}

// syncDir makes a rename or link in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) { // some file systems cannot sync directories
		return fmt.Errorf("snapshot: sync %s: %w", dir, err)
	}
	return nil
}
