package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// medianF is the median of xs (the mean of the middle two of an even
// count); NaN-free callers pass at least one value.
func medianF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// row is one setup's figures over the rounds it was timed in.
type row struct {
	setup           setup
	rates, p50, p99 []float64
	dP50, rateRatio []float64 // against the baseline of the same round
	dRate, dWallMs  []float64
	calls           string
	timed, skipped  int
	errors          int64
}

// summarize groups the measurements by setup; the differences are taken
// within each round against that round's baseline ("none"), so a drift of
// the machine's load across the run cancels out of them.
func summarize(rep *report) []row {
	base := map[int]measurement{}
	for _, m := range rep.Measurements {
		if m.Setup == "none" && m.Skipped == "" && m.Create.PerSec > 0 {
			base[m.Round] = m
		}
	}
	var rows []row
	for _, s := range rep.Setups {
		r := row{setup: s}
		var mut, val, count int64
		for _, m := range rep.Measurements {
			if m.Setup != s.Key {
				continue
			}
			if m.Skipped != "" {
				r.skipped++
				continue
			}
			st := m.Create
			r.timed++
			r.errors += st.Errors
			r.rates, r.p50, r.p99 = append(r.rates, st.PerSec), append(r.p50, st.P50ms), append(r.p99, st.P99ms)
			mut, val, count = mut+m.MutatingCalls, val+m.ValidatingCalls, count+int64(st.Count)
			if b, ok := base[m.Round]; ok && st.PerSec > 0 {
				r.dP50 = append(r.dP50, st.P50ms-b.Create.P50ms)
				r.rateRatio = append(r.rateRatio, st.PerSec/b.Create.PerSec)
				r.dRate = append(r.dRate, st.PerSec-b.Create.PerSec)
				r.dWallMs = append(r.dWallMs, 1000/st.PerSec-1000/b.Create.PerSec)
			}
		}
		if count > 0 {
			r.calls = fmt.Sprintf("%.2f/%.2f", float64(mut)/float64(count), float64(val)/float64(count))
		}
		rows = append(rows, r)
	}
	return rows
}

func fmtList(xs []float64, format string) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf(format, x))
	}
	return strings.Join(parts, " ")
}

func printSummary(w io.Writer, rep *report, took time.Duration) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "== admission: ConfigMap creates, %d clients, n=%d per setup and round, %d rounds (order rotated each round), %.0fs in all\n",
		rep.Clients, rep.N, rep.Rounds, took.Seconds())
	fmt.Fprintf(w, "   figures are medians over the rounds; \"vs none\" is the median of the per-round differences to the baseline\n")
	fmt.Fprintf(w, "%-36s %9s %9s %9s %12s %9s  %-24s %-10s %s\n",
		"setup", "rate/s", "p50 ms", "p99 ms", "p50 vs none", "rate", "rate/s per round", "hooks m/v", "errors")
	rows := summarize(rep)
	for _, r := range rows {
		if r.timed == 0 {
			fmt.Fprintf(w, "%-36s not timed (%d skipped: see ! above)\n", r.setup.Title, r.skipped)
			continue
		}
		dp, ratio := "-", "-"
		if r.setup.Key != "none" && len(r.dP50) > 0 {
			dp = fmt.Sprintf("%+.2f", medianF(r.dP50))
			ratio = fmt.Sprintf("%.0f%%", 100*medianF(r.rateRatio))
		}
		fmt.Fprintf(w, "%-36s %9.1f %9.2f %9.2f %12s %9s  %-24s %-10s %d\n",
			r.setup.Title, medianF(r.rates), medianF(r.p50), medianF(r.p99), dp, ratio, fmtList(r.rates, "%.0f"), r.calls, r.errors)
	}
	for _, r := range rows {
		if r.setup.Key != "quota" || len(r.dP50) == 0 {
			continue
		}
		fmt.Fprintf(w, "quota admission, per create (quota - none, median of %d rounds): p50 %+.2f ms, creates/s %+.1f (%.0f%% of none), wall time per create at %d clients %+.3f ms\n",
			len(r.dP50), medianF(r.dP50), medianF(r.dRate), 100*medianF(r.rateRatio), rep.Clients, medianF(r.dWallMs))
		fmt.Fprintf(w, "  per round: p50 %s ms; creates/s %s\n", fmtList(r.dP50, "%+.2f"), fmtList(r.dRate, "%+.1f"))
	}
	fmt.Fprintf(w, "machine load (1/5/15 min): start %s, end %s\n", rep.LoadStart, rep.LoadEnd)
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(rep.Wire)) {
		keys = append(keys, fmt.Sprintf("%s=%d", k, rep.Wire[k]))
	}
	fmt.Fprintf(w, "wire: %s\n", strings.Join(keys, "  "))
	if len(rep.Problems) > 0 {
		fmt.Fprintf(w, "problems: %d (see the lines with ! above / -json)\n", len(rep.Problems))
	}
}
