package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"skiff/netproxy"
)

// connStats summarises timed operations (connections or queries).
type connStats struct {
	n, failed                   int
	mean, p50, p90, p99, maxDur time.Duration
	elapsed                     time.Duration
	samples                     []time.Duration // sorted
}

func newConnStats(samples []time.Duration, elapsed time.Duration) connStats {
	slices.Sort(samples)
	st := connStats{n: len(samples), elapsed: elapsed, samples: samples}
	if len(samples) == 0 {
		return st
	}
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	st.mean = sum / time.Duration(len(samples))
	st.p50, st.p90, st.p99 = pct(samples, 50), pct(samples, 90), pct(samples, 99)
	st.maxDur = samples[len(samples)-1]
	return st
}

type dnsStats struct {
	connStats
	qps float64
}

const (
	latFloor = "floor (pod address)"
	latOne   = "Service, 1 present"
	latMany  = "Service, all present"
)

func latKind(many bool) string {
	if many {
		return latMany
	}
	return latOne
}

type latRound struct {
	kind  string
	round int
	st    connStats
}

type nftTally struct{ tables, chains, rules, elements int }

// fullSync is one measured full sync.
type fullSync struct {
	name string
	res  netproxy.SyncResult
	wall time.Duration // from Run to the callback, with the informers' sync
	cpu  cpuTime
}

// results is every figure gathered; print shows what there is.
type results struct {
	o                      options
	cold, restart          fullSync
	nft                    nftTally
	nftErr                 error
	changeSync, changeWall []time.Duration
	changeCPU              cpuTime
	changeFull, changeErrs int
	ops                    int
	lat                    []latRound
	dns                    *dnsStats
	dnsAddrNote            string
}

func newResults(o options) *results {
	return &results{o: o, cold: fullSync{name: "cold"}, restart: fullSync{name: "restarted proxier's"}}
}

func (r *results) addChange(rec syncRec, wall time.Duration, cpu cpuTime) {
	r.changeSync = append(r.changeSync, rec.res.Duration)
	r.changeWall = append(r.changeWall, wall)
	r.changeCPU.user += cpu.user
	r.changeCPU.sys += cpu.sys
	r.ops += rec.res.Ops
	if rec.res.Full {
		r.changeFull++
	}
	if rec.res.Err != nil {
		r.changeErrs++
	}
}

func (r *results) addLatency(kind string, round int, st connStats) {
	r.lat = append(r.lat, latRound{kind, round, st})
}

// pooled merges every round of one kind.
func (r *results) pooled(kind string) connStats {
	var all []time.Duration
	var el time.Duration
	for _, l := range r.lat {
		if l.kind == kind {
			all = append(all, l.st.samples...)
			el += l.st.elapsed
		}
	}
	return newConnStats(all, el)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func (r *results) print() {
	o := r.o
	fmt.Printf("\n== proxybench: %d Services × %d endpoints (aims from issue 6)\n", o.services, o.endpoints)
	row := func(name, val, aim string) { fmt.Printf("  %-40s %-40s %s\n", name, val, aim) }
	for _, fs := range []fullSync{r.cold, r.restart} {
		if !fs.res.Full {
			continue
		}
		row("full sync, "+fs.name, fmt.Sprintf("%s  (%s after Run)", ms3(fs.res.Duration), ms(fs.wall)),
			"< 1 s  "+verdict(fs.res.Duration < time.Second))
		row("  cpu meanwhile (process)", fs.cpu.String(), fmt.Sprintf("batch %d ops", fs.res.Ops))
	}
	if s := r.restart.res; s.Full {
		row("installed (proxier's count)", fmt.Sprintf("%d svc ports, %d chains, %d rules, %d elements",
			s.Services, s.Chains, s.Rules, s.Elements), "")
		if r.nftErr != nil {
			row("installed (nft -j list ruleset)", "error: "+r.nftErr.Error(), "")
		} else {
			row("installed (nft -j list ruleset)", fmt.Sprintf("%d tables, %d chains, %d rules, %d elements",
				r.nft.tables, r.nft.chains, r.nft.rules, r.nft.elements), "")
		}
	}
	if n := len(r.changeSync); n > 0 {
		cs, cw := newConnStats(r.changeSync, 0), newConnStats(r.changeWall, 0)
		row(fmt.Sprintf("one change, sync Duration (%d)", n), fmt.Sprintf("p50 %s p99 %s max %s", ms3(cs.p50), ms3(cs.p99), ms3(cs.maxDur)),
			"< 20 ms "+verdict(cs.p99 < 20*time.Millisecond))
		row("one change, update → applied (wall)", fmt.Sprintf("p50 %s p99 %s max %s", ms3(cw.p50), ms3(cw.p99), ms3(cw.maxDur)),
			"< 20 ms "+verdict(cw.p99 < 20*time.Millisecond))
		row("one change, batch and cpu", fmt.Sprintf("%.1f ops, user %s sys %s per change", float64(r.ops)/float64(n),
			ms3(r.changeCPU.user/time.Duration(n)), ms3(r.changeCPU.sys/time.Duration(n))),
			fmt.Sprintf("%d were full syncs, %d failed", r.changeFull, r.changeErrs))
	}
	r.printLatency(row)
	if d := r.dns; d != nil {
		row(fmt.Sprintf("DNS A query from pod (%d, UDP)", d.n), fmt.Sprintf("p50 %s p90 %s p99 %s max %s",
			us(d.p50), us(d.p90), us(d.p99), us(d.maxDur)), "p99 < 2 ms "+verdict(d.p99 < 2*time.Millisecond))
		row("DNS rate (sequential, one client)", fmt.Sprintf("%.0f queries/s, mean %s", d.qps, us(d.mean)),
			fmt.Sprintf("%d failed", d.failed))
	}
	if r.dnsAddrNote != "" {
		fmt.Printf("  note: %s\n", r.dnsAddrNote)
	}
}

func (r *results) printLatency(row func(name, val, aim string)) {
	if len(r.lat) == 0 {
		return
	}
	fmt.Printf("  connections (connect + 1-byte echo + close), every round:\n")
	for _, l := range r.lat {
		row(fmt.Sprintf("  r%d %s", l.round, l.kind), fmt.Sprintf("mean %s p50 %s p99 %s", us(l.st.mean), us(l.st.p50), us(l.st.p99)),
			fmt.Sprintf("n=%d failed=%d max %s", l.st.n, l.st.failed, us(l.st.maxDur)))
	}
	one, many, floor := r.pooled(latOne), r.pooled(latMany), r.pooled(latFloor)
	for _, p := range []struct {
		name string
		st   connStats
	}{{"floor, all rounds", floor}, {"1 Service, all rounds", one}, {"all Services, all rounds", many}} {
		if p.st.n > 0 {
			row(p.name, fmt.Sprintf("mean %s p50 %s p99 %s", us(p.st.mean), us(p.st.p50), us(p.st.p99)),
				fmt.Sprintf("%.0f conns/s", float64(p.st.n)/p.st.elapsed.Seconds()))
		}
	}
	if one.n > 0 && many.n > 0 {
		rm := float64(many.mean) / float64(one.mean)
		rp := float64(many.p50) / float64(one.p50)
		row(fmt.Sprintf("ratio %d Services / 1", r.o.services), fmt.Sprintf("mean %.3f  p50 %.3f", rm, rp),
			"≤ 1.05 "+verdict(rm <= 1.05 && rp <= 1.05))
		var per []string
		for _, a := range r.lat {
			for _, b := range r.lat {
				if a.round == b.round && a.kind == latMany && b.kind == latOne {
					per = append(per, fmt.Sprintf("r%d %.3f", a.round, float64(a.st.mean)/float64(b.st.mean)))
				}
			}
		}
		row("ratio of means per round", strings.Join(per, "  "), "")
	}
}

// nftCounts reads the ruleset inside the node namespace (read only) and
// counts what the tables named table hold, as a check on the proxier's own
// counts.
func nftCounts(ctx context.Context, nsName, table string) (nftTally, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nsName, "nft", "-j", "list", "ruleset").Output()
	if err != nil {
		return nftTally{}, fmt.Errorf("nft -j list ruleset: %w", err)
	}
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nftTally{}, fmt.Errorf("nft json: %w", err)
	}
	var t nftTally
	for _, obj := range doc.Nftables {
		for kind, raw := range obj {
			var o struct {
				Name  string            `json:"name"`
				Table string            `json:"table"`
				Elem  []json.RawMessage `json:"elem"`
			}
			if err := json.Unmarshal(raw, &o); err != nil {
				continue
			}
			if kind == "table" && o.Name == table {
				t.tables++
			}
			if o.Table != table {
				continue
			}
			switch kind {
			case "chain":
				t.chains++
			case "rule":
				t.rules++
			case "set", "map":
				t.elements += len(o.Elem)
			}
		}
	}
	return t, nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func ms3(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }
