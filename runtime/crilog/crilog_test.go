package crilog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var recordRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z (stdout|stderr) (F|P) `)

// fakeClock returns times one millisecond apart.
func fakeClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func newTestWriter(t *testing.T, path string, maxSize int64, maxFiles int) *Writer {
	t.Helper()
	w, err := NewWriter(path, maxSize, maxFiles)
	if err != nil {
		t.Fatal(err)
	}
	w.now = fakeClock()
	return w
}

// records returns the file's lines without their timestamps.
func records(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "\n") || !recordRE.MatchString(line) {
			t.Fatalf("malformed record %q", line)
		}
		_, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		out = append(out, rest)
	}
	return out
}

func TestWriterSplitsOutputIntoCRIRecords(t *testing.T) {
	long := strings.Repeat("x", 2*MaxLineSize+100)
	tests := []struct {
		name   string
		writes []struct{ stream, text string }
		close  bool
		want   []string
	}{
		{name: "one full line", writes: []struct{ stream, text string }{{"stdout", "hello\n"}},
			want: []string{"stdout F hello"}},
		{name: "two lines in one write", writes: []struct{ stream, text string }{{"stdout", "a\nb\n"}},
			want: []string{"stdout F a", "stdout F b"}},
		{name: "empty line", writes: []struct{ stream, text string }{{"stdout", "\n"}},
			want: []string{"stdout F "}},
		{name: "unterminated text waits for its newline",
			writes: []struct{ stream, text string }{{"stdout", "ab"}, {"stdout", "c\nd"}},
			want:   []string{"stdout F abc"}},
		{name: "close flushes an unterminated line as partial",
			writes: []struct{ stream, text string }{{"stderr", "tail"}}, close: true,
			want: []string{"stderr P tail"}},
		{name: "streams buffer separately",
			writes: []struct{ stream, text string }{{"stdout", "o"}, {"stderr", "e\n"}, {"stdout", "k\n"}},
			want:   []string{"stderr F e", "stdout F ok"}},
		{name: "long line splits into partial records",
			writes: []struct{ stream, text string }{{"stdout", long + "\n"}},
			want: []string{"stdout P " + long[:MaxLineSize], "stdout P " + long[MaxLineSize:2*MaxLineSize],
				"stdout F " + long[2*MaxLineSize:]}},
		{name: "line of exactly the maximum stays full",
			writes: []struct{ stream, text string }{{"stdout", long[:MaxLineSize] + "\n"}},
			want:   []string{"stdout F " + long[:MaxLineSize]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c", "0.log")
			w := newTestWriter(t, path, 0, 1)
			streams := map[string]interface {
				Write([]byte) (int, error)
			}{"stdout": w.Stream("stdout"), "stderr": w.Stream("stderr")}
			for _, wr := range tt.writes {
				if n, err := streams[wr.stream].Write([]byte(wr.text)); err != nil || n != len(wr.text) {
					t.Fatalf("write = %d, %v", n, err)
				}
			}
			if tt.close {
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
			}
			got := records(t, path)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("records\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestWriterRotatesBySizeAndKeepsMaxFiles(t *testing.T) {
	frozen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		clock  func() time.Time
		writes int // number of Write calls the 40 lines are spread over
	}{
		{name: "one line per write, clock ticking", clock: fakeClock(), writes: 40},
		{name: "all lines in one write", clock: fakeClock(), writes: 1},
		{name: "frozen clock still rotates in order", clock: func() time.Time { return frozen }, writes: 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0.log")
			w := newTestWriter(t, path, 200, 3)
			w.now = tt.clock
			out := w.Stream("stdout")
			var chunk strings.Builder
			for i := range 40 {
				fmt.Fprintf(&chunk, "line %02d\n", i)
				if (i+1)%(40/tt.writes) == 0 {
					fmt.Fprint(out, chunk.String())
					chunk.Reset()
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			rotated, err := rotatedFiles(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(rotated) != 2 {
				t.Fatalf("rotated files = %v, want 2 (3 files in all)", rotated)
			}
			for _, p := range append(rotated, path) {
				if st, _ := os.Stat(p); st.Size() > 200 {
					t.Fatalf("%s is %d bytes, over the 200 limit", p, st.Size())
				}
			}
			var buf bytes.Buffer
			if err := Read(context.Background(), path, ReadOptions{}, &buf); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			if lines[len(lines)-1] != "line 39" || len(lines) < 6 {
				t.Fatalf("lines %q", lines)
			}
			for i := 1; i < len(lines); i++ {
				if lines[i] <= lines[i-1] {
					t.Fatalf("lines out of order: %q", lines)
				}
			}
		})
	}
}

func TestRotatedFilesSortOldestFirst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	names := []string{
		"0.log.20260101-000000.000000002",
		"0.log.20260101-000000.000000001-10",
		"0.log.20260101-000000.000000001",
		"0.log.20260101-000000.000000001-2",
		"0.log.bak", "1.log.20250101-000000.000000000", "0.log",
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := rotatedFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"0.log.20260101-000000.000000001", "0.log.20260101-000000.000000001-2",
		"0.log.20260101-000000.000000001-10", "0.log.20260101-000000.000000002",
	}
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// fixture writes a rotated file and a live file with known records.
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	old := "2026-01-01T00:00:01Z stdout F one\n" +
		"2026-01-01T00:00:02Z stderr F two\n" +
		"2026-01-01T00:00:03Z stdout P thr\n"
	live := "2026-01-01T00:00:04Z stdout F ee\n" +
		"garbage line\n" +
		"2026-01-01T00:00:05.5Z stderr F four\n" +
		"2026-01-01T00:00:06Z stdout F five\n"
	if err := os.WriteFile(path+".20260101-000003.000000000", []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(live), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadAppliesOptions(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	tests := []struct {
		name string
		opts ReadOptions
		want string
	}{
		{name: "everything in order across rotated files", want: "one\ntwo\nthree\nfour\nfive\n"},
		{name: "stdout only", opts: ReadOptions{Stream: "stdout"}, want: "one\nthree\nfive\n"},
		{name: "stderr only", opts: ReadOptions{Stream: "stderr"}, want: "two\nfour\n"},
		{name: "timestamps prefix each line once", opts: ReadOptions{Timestamps: true, Stream: "stdout"},
			want: "2026-01-01T00:00:01Z one\n2026-01-01T00:00:03Z three\n2026-01-01T00:00:06Z five\n"},
		{name: "tail counts logical lines across files", opts: ReadOptions{TailLines: i64(3)},
			want: "three\nfour\nfive\n"},
		{name: "tail larger than the log", opts: ReadOptions{TailLines: i64(100)},
			want: "one\ntwo\nthree\nfour\nfive\n"},
		{name: "tail zero", opts: ReadOptions{TailLines: i64(0)}, want: ""},
		{name: "tail with stream filter", opts: ReadOptions{TailLines: i64(1), Stream: "stderr"},
			want: "four\n"},
		{name: "since time", opts: ReadOptions{SinceTime: at("2026-01-01T00:00:05Z")},
			want: "four\nfive\n"},
		{name: "since between timestamps with fraction", opts: ReadOptions{SinceTime: at("2026-01-01T00:00:05.6Z")},
			want: "five\n"},
		{name: "since and tail", opts: ReadOptions{SinceTime: at("2026-01-01T00:00:02Z"), TailLines: i64(2)},
			want: "four\nfive\n"},
		{name: "limit bytes cuts mid line", opts: ReadOptions{LimitBytes: i64(6)}, want: "one\ntw"},
		{name: "limit bytes zero", opts: ReadOptions{LimitBytes: i64(0)}, want: ""},
		{name: "follow with done returns at the end", opts: ReadOptions{Follow: true, Done: func() bool { return true }},
			want: "one\ntwo\nthree\nfour\nfive\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fixture(t)
			var buf bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := Read(ctx, path, tt.opts, &buf); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Fatalf("got %q, want %q", buf.String(), tt.want)
			}
		})
	}
}

func TestReadMissingLogIsNotExist(t *testing.T) {
	err := Read(context.Background(), filepath.Join(t.TempDir(), "none.log"), ReadOptions{}, &bytes.Buffer{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a reader goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFollowSeesNewOutputAcrossRotations(t *testing.T) {
	tests := []struct {
		name    string
		maxSize int64
		lines   int
	}{
		{name: "no rotation", maxSize: 0, lines: 20},
		{name: "rotates every few lines", maxSize: 120, lines: 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0.log")
			w := newTestWriter(t, path, tt.maxSize, 100)
			out := w.Stream("stdout")
			fmt.Fprintln(out, "before")
			var done sync.Mutex
			finished := false
			var got syncBuffer
			errc := make(chan error, 1)
			go func() {
				errc <- Read(context.Background(), path, ReadOptions{Follow: true, Done: func() bool {
					done.Lock()
					defer done.Unlock()
					return finished
				}}, &got)
			}()
			want := "before\n"
			for i := range tt.lines {
				fmt.Fprintf(out, "line %d\n", i)
				want += fmt.Sprintf("line %d\n", i)
				if i%7 == 0 {
					time.Sleep(30 * time.Millisecond)
				}
			}
			fmt.Fprint(out, "no newline")
			want += "no newline" // Close flushes it as a partial record: no newline added
			waitFor(t, "followed output", func() bool {
				return strings.HasPrefix(want, got.String()) && len(got.String()) >= len(want)-len("no newline")
			})
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			done.Lock()
			finished = true
			done.Unlock()
			select {
			case err := <-errc:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Read did not return after Done")
			}
			if got.String() != want {
				t.Fatalf("got %q\nwant %q", got.String(), want)
			}
		})
	}
}

func TestFollowStopsWhenContextEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w := newTestWriter(t, path, 0, 1)
	defer w.Close()
	fmt.Fprintln(w.Stream("stdout"), "x")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	var got syncBuffer
	go func() { errc <- Read(ctx, path, ReadOptions{Follow: true}, &got) }()
	waitFor(t, "first line", func() bool { return got.String() == "x\n" })
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return after cancel")
	}
}

func TestFollowWithTailStartsAtLastLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w := newTestWriter(t, path, 0, 1)
	defer w.Close()
	out := w.Stream("stdout")
	for i := range 5 {
		fmt.Fprintf(out, "old %d\n", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got syncBuffer
	tail := int64(2)
	go func() { _ = Read(ctx, path, ReadOptions{Follow: true, TailLines: &tail}, &got) }()
	waitFor(t, "tail", func() bool { return got.String() == "old 3\nold 4\n" })
	fmt.Fprintln(out, "new")
	waitFor(t, "new line", func() bool { return got.String() == "old 3\nold 4\nnew\n" })
}

func TestWriteAfterCloseFails(t *testing.T) {
	w := newTestWriter(t, filepath.Join(t.TempDir(), "0.log"), 0, 1)
	s := w.Stream("stdout")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("x\n")); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestDetachLeavesLinesForTheNextWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w1 := newTestWriter(t, path, 0, 1)
	fmt.Fprint(w1.Stream("stdout"), "first\nhalf ")
	if err := w1.Detach(); err != nil {
		t.Fatal(err)
	}
	w2 := newTestWriter(t, path, 0, 1)
	fmt.Fprint(w2.Stream("stdout"), "and rest\n")
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := records(t, path); strings.Join(got, "|") != "stdout F first|stdout P half |stdout F and rest" {
		t.Fatalf("records %q", got)
	}
	var buf bytes.Buffer
	if err := Read(context.Background(), path, ReadOptions{}, &buf); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "first\nhalf and rest\n" {
		t.Fatalf("read %q", buf.String())
	}
}
