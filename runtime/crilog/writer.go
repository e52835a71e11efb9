package crilog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxLineSize is the longest text one record carries; longer lines are split
// into partial (P) records of this size followed by a full (F) one.
const MaxLineSize = 16 * 1024

// Stream names and record tags of the CRI log format.
const (
	Stdout     = "stdout"
	Stderr     = "stderr"
	tagFull    = "F"
	tagPartial = "P"
)

// rotatedLayout names rotated files: <path>.<UTC time>, so that rotated files
// sort oldest first and are never renamed again once written.
const rotatedLayout = "20060102-150405.000000000"

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("crilog: writer closed")

// Writer writes one container's output to a CRI-format log file, rotating it
// by size. It is safe for concurrent use by its streams.
type Writer struct {
	path     string
	maxSize  int64
	maxFiles int
	now      func() time.Time

	mu      sync.Mutex
	f       *os.File
	size    int64
	closed  bool
	streams []*stream
	// lastRotated is the suffix of the newest rotated file, so that the
	// next one sorts after it even within one clock tick.
	lastRotated string
}

// NewWriter opens (appending) the log at path, creating its directory.
// maxSize <= 0 disables rotation; maxFiles counts the live file too (at least 1).
func NewWriter(path string, maxSize int64, maxFiles int) (*Writer, error) {
	if maxFiles < 1 {
		maxFiles = 1
	}
	w := &Writer{path: path, maxSize: maxSize, maxFiles: maxFiles, now: time.Now}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("crilog: %w", err)
	}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("crilog: open: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("crilog: stat: %w", err)
	}
	w.f, w.size = f, st.Size()
	return nil
}

// Stream returns the writer for one stream ("stdout" or "stderr"). Text is
// split into lines; a line without its newline stays buffered until the
// newline arrives, it grows past MaxLineSize, or the Writer is closed.
func (w *Writer) Stream(name string) io.Writer {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &stream{w: w, name: name}
	w.streams = append(w.streams, s)
	return s
}

// Close flushes every stream's unterminated line and closes the file. The
// line goes out as a partial record, as containerd's CRI logger does at end
// of output: readers then show it without a newline ("echo -n DONE" logs
// "DONE", which the termination message fallback reports as is).
func (w *Writer) Close() error { return w.close(tagPartial) }

// Detach is Close for output that goes on in a later Writer on the same
// path (an agent restart): unterminated lines are written as partial
// records, which the later Writer's records complete.
func (w *Writer) Detach() error { return w.close(tagPartial) }

func (w *Writer) close(tag string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	var errs []error
	for _, s := range w.streams {
		if len(s.buf) > 0 {
			errs = append(errs, w.writeRecord(s.name, tag, s.buf, w.now()))
			s.buf = nil
		}
	}
	w.closed = true
	errs = append(errs, w.f.Close())
	return errors.Join(errs...)
}

// writeRecord appends one record; w.mu is held.
func (w *Writer) writeRecord(name, tag string, text []byte, t time.Time) error {
	if w.closed {
		return ErrClosed
	}
	rec := make([]byte, 0, len(text)+64)
	rec = t.UTC().AppendFormat(rec, time.RFC3339Nano)
	rec = append(rec, ' ')
	rec = append(rec, name...)
	rec = append(rec, ' ')
	rec = append(rec, tag...)
	rec = append(rec, ' ')
	rec = append(rec, text...)
	rec = append(rec, '\n')
	if w.maxSize > 0 && w.size > 0 && w.size+int64(len(rec)) > w.maxSize {
		if err := w.rotate(t); err != nil {
			return err
		}
	}
	n, err := w.f.Write(rec)
	w.size += int64(n)
	if err != nil {
		return fmt.Errorf("crilog: write: %w", err)
	}
	return nil
}

// rotate renames the live file to <path>.<time>, opens a new one and keeps
// at most maxFiles files in all; w.mu is held.
func (w *Writer) rotate(t time.Time) error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("crilog: rotate: %w", err)
	}
	suffix := nextRotatedSuffix(t.UTC().Format(rotatedLayout), w.lastRotated)
	for fileExists(w.path + "." + suffix) {
		suffix = nextRotatedSuffix(suffix, suffix)
	}
	name := w.path + "." + suffix
	w.lastRotated = suffix
	if err := os.Rename(w.path, name); err != nil {
		return fmt.Errorf("crilog: rotate: %w", err)
	}
	old, err := rotatedFiles(w.path)
	if err != nil {
		return err
	}
	for len(old) > w.maxFiles-1 {
		if err := os.Remove(old[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("crilog: rotate: %w", err)
		}
		old = old[1:]
	}
	return w.open()
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// rotatedFiles lists the rotated files of path, oldest first.
func rotatedFiles(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("crilog: list rotated: %w", err)
	}
	var suffixes []string
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), base+".")
		if ok && isRotatedSuffix(suffix) {
			suffixes = append(suffixes, suffix)
		}
	}
	sort.Slice(suffixes, func(i, j int) bool { return rotatedKey(suffixes[i]) < rotatedKey(suffixes[j]) })
	out := make([]string, len(suffixes))
	for i, s := range suffixes {
		out[i] = filepath.Join(dir, base+"."+s)
	}
	return out, nil
}

// isRotatedSuffix reports whether s looks like a rotatedLayout time, with an
// optional "-N" collision counter.
func isRotatedSuffix(s string) bool {
	if len(s) < len(rotatedLayout) {
		return false
	}
	_, err := time.Parse(rotatedLayout, s[:len(rotatedLayout)])
	if err != nil {
		return false
	}
	rest := s[len(rotatedLayout):]
	if rest == "" {
		return true
	}
	if rest[0] != '-' || len(rest) == 1 {
		return false
	}
	for _, c := range rest[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// nextRotatedSuffix is ts, unless that would not sort after last: then
// last's time with the next collision counter.
func nextRotatedSuffix(ts, last string) string {
	if last == "" || rotatedKey(ts) > rotatedKey(last) {
		return ts
	}
	base, n := last[:len(rotatedLayout)], strings.TrimPrefix(last[len(rotatedLayout):], "-")
	i, _ := strconv.Atoi(n)
	return fmt.Sprintf("%s-%d", base, i+1)
}

// rotatedKey orders rotated suffixes by time, then by collision counter.
func rotatedKey(suffix string) string {
	ts, n := suffix[:len(rotatedLayout)], strings.TrimPrefix(suffix[len(rotatedLayout):], "-")
	return fmt.Sprintf("%s-%010s", ts, n)
}

// stream splits one stream's bytes into records.
type stream struct {
	w    *Writer
	name string
	buf  []byte // text after the last newline, guarded by w.mu
}

// Write records every complete line of p (and pending text) and keeps the
// rest. It always consumes all of p; an error reports a failed file write.
func (s *stream) Write(p []byte) (int, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.w.closed {
		return 0, ErrClosed
	}
	s.buf = append(s.buf, p...)
	var errs []error
	for {
		i := bytes.IndexByte(s.buf, '\n')
		switch {
		case i >= 0 && i <= MaxLineSize:
			errs = append(errs, s.w.writeRecord(s.name, tagFull, s.buf[:i], s.w.now()))
			s.buf = s.buf[i+1:]
		case len(s.buf) > MaxLineSize:
			errs = append(errs, s.w.writeRecord(s.name, tagPartial, s.buf[:MaxLineSize], s.w.now()))
			s.buf = s.buf[MaxLineSize:]
		default:
			if len(s.buf) == 0 {
				s.buf = nil
			} else {
				s.buf = bytes.Clone(s.buf) // let the consumed prefix be freed
			}
			return len(p), errors.Join(errs...)
		}
	}
}
