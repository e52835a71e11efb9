package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// LogConfig is upstream's log backend options.
type LogConfig struct {
	// Path is the file events are appended to, one JSON object a line
	// ("-": Stdout).
	Path string
	// MaxSizeMB is the size at which the file is rotated (0: 100 MB, as
	// upstream's lumberjack default).
	MaxSizeMB int
	// MaxBackups is how many rotated files are kept (0: all).
	MaxBackups int
	// Stdout is where "-" writes (os.Stdout when nil).
	Stdout io.Writer
}

const defaultMaxSizeMB = 100

// backupTimeFormat names rotated files as lumberjack (which upstream
// uses) does: audit.log becomes audit-2006-01-02T15-04-05.000.log.
const backupTimeFormat = "2006-01-02T15-04-05.000"

// LogBackend writes events as JSON lines, synchronously (upstream's
// default "blocking" mode): an event is on disk, or its error returned,
// before the request goes on. It starts no goroutines.
type LogBackend struct {
	cfg  LogConfig
	max  int64
	mu   sync.Mutex
	w    io.Writer
	file *os.File // nil for stdout
	size int64
	now  func() time.Time
}

// OpenLog opens (creating it and its directory) the log file, so that a
// path the server cannot write is an error at start.
func OpenLog(cfg LogConfig) (*LogBackend, error) {
	if cfg.Path == "" {
		return nil, errors.New("audit log path is empty")
	}
	if cfg.MaxSizeMB < 0 || cfg.MaxBackups < 0 {
		return nil, fmt.Errorf("audit log max size (%d) and max backups (%d) must not be negative", cfg.MaxSizeMB, cfg.MaxBackups)
	}
	b := &LogBackend{cfg: cfg, now: time.Now}
	if cfg.Path == "-" {
		b.w = cfg.Stdout
		if b.w == nil {
			b.w = os.Stdout
		}
		return b, nil
	}
	mb := cfg.MaxSizeMB
	if mb == 0 {
		mb = defaultMaxSizeMB
	}
	b.max = int64(mb) << 20
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	if err := b.open(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *LogBackend) open() error {
	f, err := os.OpenFile(b.cfg.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	b.file, b.w, b.size = f, f, st.Size()
	return nil
}

// ProcessEvent implements Sink.
func (b *LogBackend) ProcessEvent(ev *Event) error {
	line, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("audit: encode event: %w", err)
	}
	line = append(line, '\n')
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil {
		return fmt.Errorf("audit log: %w", os.ErrClosed)
	}
	if b.file != nil && b.size > 0 && b.size+int64(len(line)) > b.max {
		if err := b.rotate(); err != nil {
			return err
		}
	}
	n, err := b.w.Write(line)
	b.size += int64(n)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// rotate renames the full file to a timestamped backup, starts a new one
// and removes the oldest backups beyond MaxBackups.
func (b *LogBackend) rotate() error {
	if err := b.file.Close(); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	b.file, b.w = nil, nil
	dir, prefix, ext := b.parts()
	t := b.now().UTC()
	backup := filepath.Join(dir, prefix+t.Format(backupTimeFormat)+ext)
	for {
		// Two rotations within a millisecond must not overwrite a backup.
		if _, err := os.Lstat(backup); errors.Is(err, os.ErrNotExist) {
			break
		}
		t = t.Add(time.Millisecond)
		backup = filepath.Join(dir, prefix+t.Format(backupTimeFormat)+ext)
	}
	if err := os.Rename(b.cfg.Path, backup); err != nil {
		// Keep logging to the full file rather than to nothing.
		return errors.Join(fmt.Errorf("audit log: rotate: %w", err), b.open())
	}
	if err := b.open(); err != nil {
		return err
	}
	return b.prune()
}

// parts splits the path as lumberjack does: dir, "name-" and ".ext".
func (b *LogBackend) parts() (dir, prefix, ext string) {
	base := filepath.Base(b.cfg.Path)
	ext = filepath.Ext(base)
	return filepath.Dir(b.cfg.Path), strings.TrimSuffix(base, ext) + "-", ext
}

// Backups lists the rotated files, newest first.
func (b *LogBackend) Backups() ([]string, error) {
	dir, prefix, ext := b.parts()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	type backup struct {
		path string
		t    time.Time
	}
	var found []backup
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ext) {
			continue
		}
		t, err := time.Parse(backupTimeFormat, strings.TrimSuffix(strings.TrimPrefix(name, prefix), ext))
		if err != nil {
			continue // another file that happens to share the prefix
		}
		found = append(found, backup{filepath.Join(dir, name), t})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].t.After(found[j].t) })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.path
	}
	return out, nil
}

func (b *LogBackend) prune() error {
	if b.cfg.MaxBackups == 0 {
		return nil
	}
	backups, err := b.Backups()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range backups[min(len(backups), b.cfg.MaxBackups):] {
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("audit log: remove old backups: %w", err)
	}
	return nil
}

// Close syncs and closes the file; events after it are refused.
func (b *LogBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.file
	b.file, b.w = nil, nil
	if f == nil {
		return nil
	}
	return errors.Join(f.Sync(), f.Close())
}
