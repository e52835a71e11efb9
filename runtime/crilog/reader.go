package crilog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// PollInterval is how often a following Read looks for new output.
var PollInterval = 150 * time.Millisecond

// ReadOptions select what Read writes, as `kubectl logs` options do.
type ReadOptions struct {
	// Follow keeps reading new output (across rotations) until ctx ends or,
	// when Done is set, until Done reports true and the log is drained.
	Follow bool
	// Timestamps prefixes each line with its RFC3339Nano time and a space.
	Timestamps bool
	// SinceTime drops lines written before it.
	SinceTime *time.Time
	// TailLines starts at the last N lines of existing output.
	TailLines *int64
	// LimitBytes stops after this many bytes of output.
	LimitBytes *int64
	// Stream is "stdout" or "stderr"; "" means both.
	Stream string
	// Done, with Follow, reports that no more output will come (the
	// container exited): Read returns once it has read everything.
	Done func() bool
}

// errLimit stops reading once LimitBytes have been written.
var errLimit = errors.New("crilog: byte limit reached")

// record is one parsed log line.
type record struct {
	ts     []byte
	stream []byte
	full   bool
	text   []byte
}

// parseRecord splits "<time> <stream> <tag> <text>"; ok is false for a
// malformed line.
func parseRecord(line []byte) (r record, ok bool) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	var rest []byte
	var found bool
	if r.ts, rest, found = bytes.Cut(line, []byte(" ")); !found {
		return r, false
	}
	if r.stream, rest, found = bytes.Cut(rest, []byte(" ")); !found {
		return r, false
	}
	tag, text, _ := bytes.Cut(rest, []byte(" "))
	switch string(tag) {
	case tagFull:
		r.full = true
	case tagPartial:
	default:
		return r, false
	}
	r.text = text
	return r, true
}

// lineState is the per-stream progress through a logical line.
type lineState struct {
	inLine bool // a partial record started a line that has not ended
	emit   bool // the current line is written
}

// emitter applies the filters and writes records out.
type emitter struct {
	opts    ReadOptions
	since   time.Time
	skip    int64     // logical lines to drop (TailLines)
	lines   int64     // logical lines that passed SinceTime so far
	limit   int64     // bytes left; < 0 means unlimited
	out     io.Writer // nil: count only
	streams map[string]*lineState
}

func newEmitter(opts ReadOptions, out io.Writer) *emitter {
	e := &emitter{opts: opts, limit: -1, out: out, streams: map[string]*lineState{}}
	if opts.SinceTime != nil {
		e.since = *opts.SinceTime
	}
	if opts.LimitBytes != nil {
		e.limit = max(*opts.LimitBytes, 0)
	}
	return e
}

// handle processes one raw line; it returns errLimit when done.
func (e *emitter) handle(line []byte) error {
	r, ok := parseRecord(line)
	if !ok || (e.opts.Stream != "" && string(r.stream) != e.opts.Stream) {
		return nil
	}
	st := e.streams[string(r.stream)]
	if st == nil {
		st = &lineState{}
		e.streams[string(r.stream)] = st
	}
	startsLine := !st.inLine
	if startsLine {
		st.emit = false
		if e.passesSince(r.ts) {
			st.emit = e.lines >= e.skip
			e.lines++
		}
	}
	st.inLine = !r.full
	if !st.emit || e.out == nil {
		return nil
	}
	var b []byte
	if e.opts.Timestamps && startsLine {
		b = append(append(b, r.ts...), ' ')
	}
	b = append(b, r.text...)
	if r.full {
		b = append(b, '\n')
	}
	return e.write(b)
}

func (e *emitter) passesSince(ts []byte) bool {
	if e.since.IsZero() {
		return true
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	return err != nil || !t.Before(e.since)
}

func (e *emitter) write(b []byte) error {
	if e.limit == 0 {
		return errLimit
	}
	if e.limit > 0 && int64(len(b)) > e.limit {
		b = b[:e.limit]
	}
	n, err := e.out.Write(b)
	if e.limit > 0 {
		e.limit -= int64(n)
	}
	if err != nil {
		return fmt.Errorf("crilog: write output: %w", err)
	}
	if e.limit == 0 {
		return errLimit
	}
	return nil
}

// Read writes the log at path (rotated files first, oldest first) to out as
// `kubectl logs` shows it. Without Follow it returns at the end of the log;
// with Follow it returns nil when ctx ends or Done reports true and the log
// is drained. A missing log is an error wrapping fs.ErrNotExist.
func Read(ctx context.Context, path string, opts ReadOptions, out io.Writer) error {
	rotated, err := rotatedFiles(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if !fileExists(path) && len(rotated) == 0 {
		return fmt.Errorf("crilog: %s: %w", path, fs.ErrNotExist)
	}
	e := newEmitter(opts, out)
	if opts.TailLines != nil {
		counter := newEmitter(opts, nil)
		for _, p := range append(rotated, path) {
			if err := readFile(p, counter); err != nil {
				return err
			}
		}
		e.skip = max(counter.lines-max(*opts.TailLines, 0), 0)
	}
	for _, p := range rotated {
		if err := readFile(p, e); err != nil {
			return stopErr(err)
		}
	}
	if !opts.Follow {
		return stopErr(readFile(path, e))
	}
	return stopErr(follow(ctx, path, opts, e))
}

// stopErr turns the byte-limit stop into success.
func stopErr(err error) error {
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// readFile feeds every complete line of the file at p to e; a file that
// vanished (rotated away) reads as empty.
func readFile(p string, e *emitter) error {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("crilog: %w", err)
	}
	defer f.Close()
	lr := &lineReader{r: bufio.NewReaderSize(f, 64*1024)}
	_, err = lr.drain(e)
	return err
}

// lineReader reads complete lines, keeping an unterminated tail for later.
type lineReader struct {
	r       *bufio.Reader
	pending []byte
}

// drain handles every complete line now available; it reports whether any
// bytes were read.
func (lr *lineReader) drain(e *emitter) (bool, error) {
	progressed := false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(chunk) > 0 {
			progressed = true
		}
		switch {
		case err == nil:
			line := chunk
			if len(lr.pending) > 0 {
				line = append(lr.pending, chunk...)
				lr.pending = nil
			}
			if herr := e.handle(line); herr != nil {
				return progressed, herr
			}
		case errors.Is(err, bufio.ErrBufferFull):
			lr.pending = append(lr.pending, chunk...)
		case errors.Is(err, io.EOF):
			lr.pending = append(lr.pending, chunk...)
			return progressed, nil
		default:
			return progressed, fmt.Errorf("crilog: read: %w", err)
		}
	}
}

// follow reads the live file and waits for more, switching to the new file
// when the writer rotates.
func follow(ctx context.Context, path string, opts ReadOptions, e *emitter) error {
	f, err := openWhenPresent(ctx, path)
	if err != nil || f == nil {
		return err
	}
	defer func() { f.Close() }()
	lr := &lineReader{r: bufio.NewReaderSize(f, 64*1024)}
	doneSeen := false
	for {
		progressed, err := lr.drain(e)
		if err != nil {
			return err
		}
		if progressed {
			continue
		}
		if rotatedAway(path, f) {
			// The writer closes a file before renaming it: what it wrote
			// after the last drain is there now.
			if _, err := lr.drain(e); err != nil {
				return err
			}
			nf, err := nextFile(ctx, path, f, e)
			if err != nil || nf == nil {
				return err
			}
			f.Close()
			f, lr = nf, &lineReader{r: bufio.NewReaderSize(nf, 64*1024)}
			continue
		}
		if opts.Done != nil && opts.Done() {
			if doneSeen {
				return nil
			}
			doneSeen = true // one more poll for output still in flight
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(PollInterval):
		}
	}
}

// openWhenPresent opens p, waiting while it is missing (mid-rotation); it
// returns nil, nil when ctx ends first.
func openWhenPresent(ctx context.Context, p string) (*os.File, error) {
	for {
		f, err := os.Open(p)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("crilog: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(PollInterval):
		}
	}
}

// rotatedAway reports whether path no longer names the open file f.
func rotatedAway(path string, f *os.File) bool {
	cur, err := f.Stat()
	if err != nil {
		return false
	}
	st, err := os.Stat(path)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return !os.SameFile(cur, st)
}

// nextFile opens the file that comes after f, which the writer rotated
// away: the live file at path, once the files rotated between the two are
// read in full into e. The live file is opened before the rotated files
// are listed, so that a rotation in between shows in the list instead of
// skipping a file; if the file opened was itself rotated meanwhile, it is
// the one returned (the caller reads it, then finds it rotated away).
// It returns nil, nil when ctx ends first.
func nextFile(ctx context.Context, path string, f *os.File, e *emitter) (*os.File, error) {
	cur, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("crilog: %w", err)
	}
	nf, err := openWhenPresent(ctx, path)
	if err != nil || nf == nil {
		return nil, err
	}
	next, err := nf.Stat()
	if err != nil {
		nf.Close()
		return nil, fmt.Errorf("crilog: %w", err)
	}
	rotated, err := rotatedFiles(path)
	if err != nil {
		nf.Close()
		return nil, err
	}
	after := false // past f in the list
	for _, p := range rotated {
		st, err := os.Stat(p)
		if err != nil {
			continue // removed meanwhile: too old to be after f
		}
		switch {
		case os.SameFile(st, cur):
			after = true
		case os.SameFile(st, next):
			return nf, nil
		case after:
			if err := readFile(p, e); err != nil {
				nf.Close()
				return nil, err
			}
		}
	}
	return nf, nil
}
