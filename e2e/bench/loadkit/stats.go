package loadkit

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LatStats are the figures of one timed phase.
type LatStats struct {
	Count  int     `json:"count"`
	Errors int64   `json:"errors"`
	WallS  float64 `json:"wall_s"`
	PerSec float64 `json:"per_s"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Ms is d in milliseconds, to the microsecond.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Pct is the nearest-rank percentile p (0..1) of sorted durations.
func Pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Median is the middle of ds (the upper one of an even count).
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// Summarize gives the latency percentiles of every attempt and the
// successful operations per second of wall time.
func Summarize(lat []time.Duration, errs int64, wall time.Duration) LatStats {
	s := slices.Clone(lat)
	slices.Sort(s)
	st := LatStats{Count: len(s), Errors: errs, WallS: wall.Seconds(), P50ms: Ms(Pct(s, 0.5)), P99ms: Ms(Pct(s, 0.99))}
	if len(s) > 0 {
		st.MaxMs = Ms(s[len(s)-1])
	}
	if wall > 0 {
		st.PerSec = float64(int64(len(s))-errs) / wall.Seconds()
	}
	return st
}

// ReportedErrors is how many errors of a phase Run reports; the others
// are only counted.
const ReportedErrors = 5

// Run calls op(ctx, worker, i) for every i in [from, to), from workers
// goroutines that take the next i as they finish the last, and times each
// call. The first ReportedErrors errors go to report. It stops early when
// ctx ends; the figures are of the calls made.
func Run(ctx context.Context, workers, from, to int, op func(ctx context.Context, worker, i int) error, report func(format string, args ...any)) LatStats {
	lat := make([]time.Duration, max(0, to-from))
	var next, started, errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range max(1, workers) {
		wg.Go(func() {
			for ctx.Err() == nil {
				j := int(next.Add(1) - 1)
				if j >= len(lat) {
					return
				}
				started.Add(1)
				t0 := time.Now()
				err := op(ctx, w, from+j)
				lat[j] = time.Since(t0)
				if err != nil && errs.Add(1) <= ReportedErrors {
					report("%s", Describe(err))
				}
			}
		})
	}
	wg.Wait()
	// Indexes are taken in order and each one taken below len(lat) is
	// called, so the calls made are a prefix.
	return Summarize(lat[:started.Load()], errs.Load(), time.Since(start))
}

// Problems collects unexpected outcomes and prints each as it happens,
// marked with "!".
type Problems struct {
	// Out is where they are printed (nil: standard output).
	Out io.Writer

	mu   sync.Mutex
	list []string
}

// Add records and prints one problem.
func (p *Problems) Add(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, msg)
	out := p.Out
	if out == nil {
		out = os.Stdout
	}
	fmt.Fprintln(out, "  !", msg)
}

// List copies what was recorded.
func (p *Problems) List() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.list)
}
