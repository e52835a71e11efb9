package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"skiff/store"
)

// CheckLinearizable runs a random workload of Get, Create, Update (guarded
// by a ModRevision the worker read earlier, and unguarded), Delete and
// CurrentRevision from concurrent clients, records every call and return,
// and checks the history against the store contract:
//
//   - porcupine checks each key's history for linearizability against a
//     model of the contract (linearizable_model.go): a read returns the last
//     write's value and ModRevision, a key's writes get increasing
//     revisions, a CAS succeeds iff the key's ModRevision is the expected
//     one, a refused write changes nothing and a conflict returns the
//     current state;
//   - since porcupine sees one key at a time, the global revision is checked
//     apart, in real-time order: a write that began after another operation
//     returned gets a higher revision than any that operation wrote or saw,
//     CurrentRevision never goes back and covers every write that returned
//     before it was called, and no two writes share a revision; with
//     Exclusive, the writes also account for every revision the run took
//     (failed writes take none).
//
// A write that fails with anything but a definite answer (ErrNotFound,
// ErrExists, ErrConflict) — a timeout, store.ErrUnavailable, a connection
// error — may have been applied: it is recorded with its return at the end
// of the history and an unknown revision. Reads that fail are dropped.
//
// A violation and a check that timed out (porcupine.Unknown: not verified)
// are both reported with t.Errorf, in distinct words.
//
// Against a Raft cluster the lead runs it with one client per member and a
// nemesis built on store/raft/rafttest (a sketch; the names are rafttest's):
//
//	c := rafttest.Start(t, 3) // 3 members on loopback
//	storetest.CheckLinearizable(t, storetest.LinearizableConfig{
//		Clients: c.Stores(), Ops: 20000, Timeout: 3 * time.Second, Exclusive: true,
//		Visualize: filepath.Join(t.TempDir(), "raft.html"),
//		Nemesis: func(ctx context.Context) {
//			for i := 0; ctx.Err() == nil; i++ {
//				victim := c.LeaderIndex()
//				if i%2 == 0 {
//					c.Kill(victim)
//				} else {
//					c.Isolate(victim) // cut its links, it may still think it leads
//				}
//				select { case <-ctx.Done(): case <-time.After(2 * time.Second): }
//				c.Restart(victim) // or c.Heal()
//				select { case <-ctx.Done(): case <-time.After(time.Second): }
//			}
//		},
//	})
//
// Operations on a killed or isolated member then time out or fail with
// store.ErrUnavailable (unknown outcomes, accepted either way); a stale read
// from a deposed leader, a lost acknowledged write, a revision reused or
// going back after a failover are violations. Each client must stay usable
// across the nemesis: a restarted member's store is a new Store, so hand the
// harness a handle that follows the member's current one. Keep the nemesis
// in step with Timeout (an outage longer than it only yields unknowns), and
// have it leave the cluster whole when its context ends: the final
// CurrentRevision is read through Clients[0].
func CheckLinearizable(t testing.TB, cfg LinearizableConfig) LinearizableResult {
	t.Helper()
	cfg = cfg.withDefaults()
	if len(cfg.Clients) == 0 {
		t.Errorf("CheckLinearizable: no clients")
		return LinearizableResult{}
	}
	r := &lzRun{cfg: cfg, start: time.Now(), prefix: fmt.Sprintf("/linearizable/%d/", time.Now().UnixNano())}
	startRev, ok := r.currentRevision(t)
	if !ok {
		return LinearizableResult{}
	}
	r.runWorkload()
	endRev, ok := r.currentRevision(t)
	if !ok {
		return LinearizableResult{}
	}
	res := r.result()
	res.Duration = time.Duration(r.now())
	t.Logf("linearizable: %d ops in %v (%.0f ops/s) by %d workers on %d clients, %d keys: ok %d, failed %d, unknown %d; revisions %d..%d",
		res.Ops, res.Duration.Round(time.Millisecond), float64(res.Ops)/res.Duration.Seconds(),
		cfg.Workers, len(cfg.Clients), cfg.Keys, res.Ok, res.Failed, res.Unknown, startRev, endRev)
	t.Logf("linearizable: outcomes %s", r.outcomes())

	r.checkRevisions(t, &res, startRev, endRev)
	r.checkHistory(t, &res, startRev)
	return res
}

// LinearizableConfig configures CheckLinearizable.
type LinearizableConfig struct {
	// Clients are the store handles, e.g. one per cluster member; worker i
	// uses Clients[i%len(Clients)].
	Clients []store.Store
	// Workers is the number of concurrent clients (default 2*len(Clients)).
	Workers int
	// Keys is the number of distinct keys (default 4), under a fresh prefix
	// "/linearizable/<unix nanos>/". Few keys make conflicts likely.
	Keys int
	// Ops is the total number of operations (default 1000).
	Ops int
	// Timeout bounds each operation (default 5s); one that runs out has an
	// unknown outcome.
	Timeout time.Duration
	// CheckTimeout bounds porcupine's search (default 1m); when it runs out
	// the result is porcupine.Unknown, reported as not verified.
	CheckTimeout time.Duration
	// Nemesis, if set, runs concurrently with the workload until its context
	// ends (when the last operation returns); it is awaited before the final
	// revision is read. It kills leaders, cuts links and so on.
	Nemesis func(ctx context.Context)
	// Exclusive says nothing else writes to the store during the run, which
	// enables the revision accounting check.
	Exclusive bool
	// Visualize, if set, is the path porcupine's HTML visualization of the
	// history is written to when the check fails.
	Visualize string
}

func (c LinearizableConfig) withDefaults() LinearizableConfig {
	if c.Workers <= 0 {
		c.Workers = 2 * len(c.Clients)
	}
	if c.Keys <= 0 {
		c.Keys = 4
	}
	if c.Ops <= 0 {
		c.Ops = 1000
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.CheckTimeout <= 0 {
		c.CheckTimeout = time.Minute
	}
	return c
}

// LinearizableResult is what a run did and found.
type LinearizableResult struct {
	// Ops is the number of operations run: Ok succeeded, Failed got a
	// definite refusal (ErrNotFound, ErrExists, ErrConflict), Unknown had an
	// unknown outcome.
	Ops, Ok, Failed, Unknown int
	// Duration is the workload's wall time, CheckTime porcupine's.
	Duration, CheckTime time.Duration
	// Result is porcupine's verdict on the per-key histories.
	Result porcupine.CheckResult
	// RevisionViolations counts failures of the global revision checks.
	RevisionViolations int
	// Outcomes counts operations by kind and outcome ("cas-update/conflict",
	// "get/not-found", "create/unknown", ...).
	Outcomes map[string]int
}

// lzRun is one run's shared state.
type lzRun struct {
	cfg    LinearizableConfig
	start  time.Time
	prefix string
	next   atomic.Int64 // operations handed out

	mu       sync.Mutex
	history  []porcupine.Operation
	unknown  []porcupine.Operation // writes of unknown outcome; Return set at the end
	obs      []revObs
	counts   map[string]int
	res      LinearizableResult
	unknowns int // ClientId for unknown writes, after the workers'
}

// revObs is one operation's view of the global revision.
type revObs struct {
	Call, Return int64
	Rev          int64
	Kind         obsKind
	Desc         string
}

type obsKind uint8

const (
	obsWrite   obsKind = iota // a write took Rev
	obsCurrent                // CurrentRevision returned Rev
	obsSeen                   // a key was read at ModRevision Rev
)

func (r *lzRun) now() int64 { return time.Since(r.start).Nanoseconds() }

func (r *lzRun) key(i int) string { return fmt.Sprintf("%sk%d", r.prefix, i) }

// currentRevision reads the revision before and after the workload,
// retrying while a cluster recovers from the nemesis.
func (r *lzRun) currentRevision(t testing.TB) (int64, bool) {
	t.Helper()
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
		call := r.now()
		var rev int64
		rev, err = r.cfg.Clients[0].CurrentRevision(ctx)
		cancel()
		if err == nil {
			r.obs = append(r.obs, revObs{Call: call, Return: r.now(), Rev: rev, Kind: obsCurrent, Desc: "harness CurrentRevision"})
			return rev, true
		}
		time.Sleep(r.cfg.Timeout / 10)
	}
	t.Errorf("CheckLinearizable: CurrentRevision: %v", err)
	return 0, false
}

func (r *lzRun) runWorkload() {
	r.counts = map[string]int{}
	ctx, stop := context.WithCancel(context.Background())
	var nemesis sync.WaitGroup
	if r.cfg.Nemesis != nil {
		nemesis.Add(1)
		go func() {
			defer nemesis.Done()
			r.cfg.Nemesis(ctx)
		}()
	}
	var workers sync.WaitGroup
	for w := 0; w < r.cfg.Workers; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			r.work(w)
		}()
	}
	workers.Wait()
	stop()
	nemesis.Wait()
	// Writes of unknown outcome may take effect at any time after their
	// call: their return is after every recorded event.
	end := r.now() + 1
	for _, op := range r.unknown {
		op.Return = end
		r.history = append(r.history, op)
	}
}

func (r *lzRun) result() LinearizableResult {
	res := r.res
	res.Outcomes = r.counts
	return res
}

// outcomes lists how many operations of each kind had each outcome, so that
// a run shows CAS both succeeding and conflicting.
func (r *lzRun) outcomes() string {
	var parts []string
	for k, n := range r.counts {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// worker is one concurrent client. It remembers the ModRevision it last saw
// of each key, to guard its updates and deletes with: a recent one succeeds
// unless another worker wrote since, an older one conflicts.
type worker struct {
	r    *lzRun
	id   int
	s    store.Store
	rng  *rand.Rand
	seen map[string]int64
	seq  int
}

func (r *lzRun) work(id int) {
	w := &worker{r: r, id: id, s: r.cfg.Clients[id%len(r.cfg.Clients)],
		rng: rand.New(rand.NewPCG(uint64(id), uint64(r.start.UnixNano()))), seen: map[string]int64{}}
	for r.next.Add(1) <= int64(r.cfg.Ops) {
		w.step()
	}
}

// step runs one random operation and records it.
func (w *worker) step() {
	key := w.r.key(w.rng.IntN(w.r.cfg.Keys))
	w.seq++
	value := fmt.Sprintf("w%d-%d", w.id, w.seq)
	in := lzInput{Key: key}
	switch p := w.rng.IntN(100); {
	case p < 5:
		w.currentRevision()
		return
	case p < 35:
		in.Kind = lzGet
	case p < 50:
		in.Kind, in.Value = lzCreate, value
	case p < 75:
		in.Kind, in.Value, in.Expected = lzUpdate, value, w.guard(key)
	case p < 85:
		in.Kind, in.Value = lzUpdate, value
	case p < 92:
		in.Kind, in.Expected = lzDelete, w.guard(key)
	default:
		in.Kind = lzDelete
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.r.cfg.Timeout)
	call := w.r.now()
	out := w.do(ctx, in)
	ret := w.r.now()
	cancel()
	w.remember(in, out)
	w.r.record(w.id, in, out, call, ret)
}

// guard is the ModRevision to expect: the last one seen (1 if none: it
// conflicts or finds nothing).
func (w *worker) guard(key string) int64 {
	if rev, ok := w.seen[key]; ok {
		return rev
	}
	return 1
}

func (w *worker) remember(in lzInput, out lzOutput) {
	switch {
	case out.Outcome == lzNotFound || (out.Outcome == lzOK && in.Kind == lzDelete):
		delete(w.seen, in.Key)
	case out.ModRev != 0:
		w.seen[in.Key] = out.ModRev
	}
}

// do calls the store and maps its answer onto the model's outputs.
func (w *worker) do(ctx context.Context, in lzInput) lzOutput {
	var kv store.KeyValue
	var delRev int64
	var err error
	switch in.Kind {
	case lzGet:
		kv, err = w.s.Get(ctx, in.Key)
	case lzCreate:
		kv, err = w.s.Create(ctx, in.Key, []byte(in.Value))
	case lzUpdate:
		kv, err = w.s.Update(ctx, in.Key, []byte(in.Value), in.Expected)
	case lzDelete:
		kv, delRev, err = w.s.Delete(ctx, in.Key, in.Expected)
	}
	out := lzOutput{Outcome: outcomeOf(in.Kind, err)}
	switch out.Outcome {
	case lzOK:
		out.Value, out.CreateRev, out.ModRev, out.DeleteRev = string(kv.Value), kv.CreateRevision, kv.ModRevision, delRev
	case lzConflict:
		out.Value, out.CreateRev, out.ModRev = string(kv.Value), kv.CreateRevision, kv.ModRevision
	}
	return out
}

// outcomeOf sorts an error into a definite answer the kind of call can
// give, or an unknown outcome.
func outcomeOf(kind lzKind, err error) lzOutcome {
	switch {
	case err == nil:
		return lzOK
	case errors.Is(err, store.ErrNotFound) && kind != lzCreate:
		return lzNotFound
	case errors.Is(err, store.ErrExists) && kind == lzCreate:
		return lzExists
	case errors.Is(err, store.ErrConflict) && (kind == lzUpdate || kind == lzDelete):
		return lzConflict
	}
	return lzUnknown
}

func (w *worker) currentRevision() {
	ctx, cancel := context.WithTimeout(context.Background(), w.r.cfg.Timeout)
	defer cancel()
	call := w.r.now()
	rev, err := w.s.CurrentRevision(ctx)
	ret := w.r.now()
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Ops++
	if err != nil {
		r.res.Unknown++
		r.counts["current-revision/unknown"]++
		return
	}
	r.res.Ok++
	r.counts["current-revision/ok"]++
	r.obs = append(r.obs, revObs{Call: call, Return: ret, Rev: rev, Kind: obsCurrent,
		Desc: fmt.Sprintf("worker %d CurrentRevision -> %d", w.id, rev)})
}

// record adds one operation to the history and its revision to the
// real-time observations.
func (r *lzRun) record(client int, in lzInput, out lzOutput, call, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Ops++
	name := in.Kind.String()
	if in.Expected != 0 {
		name = "cas-" + name
	}
	r.counts[name+"/"+out.Outcome.String()]++
	op := porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	switch out.Outcome {
	case lzOK:
		r.res.Ok++
	case lzUnknown:
		r.res.Unknown++
		if in.Kind != lzGet {
			// Its own row in the visualization: the worker went on.
			r.unknowns++
			op.ClientId = r.cfg.Workers + r.unknowns - 1
			r.unknown = append(r.unknown, op)
		}
		return
	default:
		r.res.Failed++
	}
	r.history = append(r.history, op)
	desc := fmt.Sprintf("worker %d %s", client, describeOperation(in, out))
	switch {
	case out.Outcome == lzOK && in.Kind == lzDelete && out.DeleteRev == NotReported:
	case out.Outcome == lzOK && in.Kind == lzDelete:
		r.obs = append(r.obs, revObs{Call: call, Return: ret, Rev: out.DeleteRev, Kind: obsWrite, Desc: desc})
	case out.Outcome == lzOK && in.Kind != lzGet:
		r.obs = append(r.obs, revObs{Call: call, Return: ret, Rev: out.ModRev, Kind: obsWrite, Desc: desc})
	case out.ModRev != 0:
		r.obs = append(r.obs, revObs{Call: call, Return: ret, Rev: out.ModRev, Kind: obsSeen, Desc: desc})
	}
}

// checkRevisions checks the global revision, which the per-key histories
// cannot show, in real-time order: for operations a and b where a returned
// before b was called, a write b gets a revision greater than any a wrote,
// read or was told by CurrentRevision, and a CurrentRevision b returns at
// least that much. Also: no two writes share a revision, and with Exclusive
// the run's writes account for the revisions it took.
func (r *lzRun) checkRevisions(t testing.TB, res *LinearizableResult, startRev, endRev int64) {
	t.Helper()
	var errs []string
	byReturn := append([]revObs(nil), r.obs...)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].Return < byReturn[j].Return })
	var byCall, writes []revObs
	for _, o := range r.obs {
		if o.Kind != obsSeen {
			byCall = append(byCall, o)
		}
		if o.Kind == obsWrite {
			writes = append(writes, o)
		}
	}
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	var highest *revObs // the highest revision of the operations returned so far
	i := 0
	for _, b := range byCall {
		for ; i < len(byReturn) && byReturn[i].Return < b.Call; i++ {
			if highest == nil || byReturn[i].Rev > highest.Rev {
				highest = &byReturn[i]
			}
		}
		if highest == nil {
			continue
		}
		if (b.Kind == obsWrite && b.Rev <= highest.Rev) || (b.Kind == obsCurrent && b.Rev < highest.Rev) {
			errs = append(errs, fmt.Sprintf("revision went back in real time: %q (called at %v) after %q (returned at %v)",
				b.Desc, time.Duration(b.Call), highest.Desc, time.Duration(highest.Return)))
		}
	}
	sort.Slice(writes, func(i, j int) bool { return writes[i].Rev < writes[j].Rev })
	for j := 1; j < len(writes); j++ {
		if writes[j].Rev == writes[j-1].Rev {
			errs = append(errs, fmt.Sprintf("two writes got revision %d: %q and %q", writes[j].Rev, writes[j-1].Desc, writes[j].Desc))
		}
	}
	if took := endRev - startRev; r.cfg.Exclusive && (took < int64(len(writes)) || took > int64(len(writes)+len(r.unknown))) {
		errs = append(errs, fmt.Sprintf("the run took %d revisions (%d..%d) for %d acknowledged writes and %d of unknown outcome (a failed write took a revision, or a write is missing)",
			took, startRev, endRev, len(writes), len(r.unknown)))
	}
	res.RevisionViolations = len(errs)
	for j, e := range errs {
		if j == 5 {
			t.Errorf("linearizable: ... and %d more revision violations", len(errs)-j)
			break
		}
		t.Errorf("linearizable: %s", e)
	}
}

// checkHistory runs porcupine on the per-key histories.
func (r *lzRun) checkHistory(t testing.TB, res *LinearizableResult, startRev int64) {
	t.Helper()
	model := keyModel(startRev)
	began := time.Now()
	var info porcupine.LinearizationInfo
	if r.cfg.Visualize != "" {
		res.Result, info = porcupine.CheckOperationsVerbose(model, r.history, r.cfg.CheckTimeout)
	} else {
		res.Result = porcupine.CheckOperationsTimeout(model, r.history, r.cfg.CheckTimeout)
	}
	res.CheckTime = time.Since(began)
	t.Logf("linearizable: porcupine %s in %v for %d operations", res.Result, res.CheckTime.Round(time.Millisecond), len(r.history))
	switch res.Result {
	case porcupine.Illegal:
		t.Errorf("linearizable: VIOLATION: the history of key(s) %s is not linearizable", strings.Join(r.illegalKeys(model), ", "))
	case porcupine.Unknown:
		t.Errorf("linearizable: NOT VERIFIED: porcupine found no violation but timed out after %v (raise CheckTimeout or lower Ops/Workers)", r.cfg.CheckTimeout)
	}
	if r.cfg.Visualize != "" && (res.Result != porcupine.Ok || res.RevisionViolations > 0) {
		if err := porcupine.VisualizePath(model, info, r.cfg.Visualize); err != nil {
			t.Errorf("linearizable: write visualization: %v", err)
		} else {
			t.Logf("linearizable: visualization in %s", r.cfg.Visualize)
		}
	}
}

// illegalKeys names the keys whose histories fail on their own.
func (r *lzRun) illegalKeys(model porcupine.Model) []string {
	var keys []string
	for _, part := range partitionByKey(r.history) {
		if porcupine.CheckOperationsTimeout(model, part, r.cfg.CheckTimeout) == porcupine.Illegal {
			keys = append(keys, part[0].Input.(lzInput).Key)
		}
	}
	sort.Strings(keys)
	return keys
}
