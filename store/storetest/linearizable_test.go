package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"skiff/store"
	"skiff/store/sqlite"
)

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// recorderT captures the harness's failures, so that a test can require a
// violation without failing itself; everything else goes to the real T.
type recorderT struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorderT) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	r.errs = append(r.errs, msg)
	r.TB.Logf("captured failure: %s", msg)
}

func (r *recorderT) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *recorderT) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs) > 0
}

func (r *recorderT) captured(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		if strings.Contains(e, substr) {
			return true
		}
	}
	return false
}

func TestLinearizable_SQLiteStore_NoViolation(t *testing.T) {
	s := openSQLite(t)
	cfg := LinearizableConfig{Clients: []store.Store{s}, Workers: 8, Ops: 4000, Timeout: 10 * time.Second, Exclusive: true}
	if os.Getenv("SKIFF_LONG") != "" {
		cfg.Clients, cfg.Workers, cfg.Ops, cfg.Keys = []store.Store{s, s, s}, 16, 100000, 8
	}
	res := CheckLinearizable(t, cfg)
	if res.Result != porcupine.Ok || res.Ops != cfg.Ops {
		t.Fatalf("result %s after %d ops, want Ok after %d", res.Result, res.Ops, cfg.Ops)
	}
	// The workload must exercise both sides of the CAS and every kind.
	for _, k := range []string{"cas-update/ok", "cas-update/conflict", "cas-delete/ok", "get/ok", "get/not-found",
		"create/ok", "create/exists", "update/ok", "delete/ok", "current-revision/ok"} {
		if res.Outcomes[k] == 0 {
			t.Errorf("no %s in the workload: %v", k, res.Outcomes)
		}
	}
}

// staleReads serves some Gets from a copy that lags: a value it returned
// earlier, though the key has been written (or deleted) since.
type staleReads struct {
	store.Store
	mu  sync.Mutex
	rng *rand.Rand
	old map[string]store.KeyValue
}

func (s *staleReads) Get(ctx context.Context, key string) (store.KeyValue, error) {
	kv, err := s.Store.Get(ctx, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.old[key]; ok && s.rng.IntN(3) == 0 {
		return old, nil
	}
	if err == nil && s.rng.IntN(4) == 0 {
		s.old[key] = kv
	}
	return kv, err
}

func TestLinearizable_StaleReads_Detected(t *testing.T) {
	s := &staleReads{Store: openSQLite(t), rng: rand.New(rand.NewPCG(1, 2)), old: map[string]store.KeyValue{}}
	rec := &recorderT{TB: t}
	vis := filepath.Join(t.TempDir(), "stale.html")
	res := CheckLinearizable(rec, LinearizableConfig{Clients: []store.Store{s}, Workers: 6, Ops: 1500, Visualize: vis})
	if res.Result != porcupine.Illegal || !rec.captured("VIOLATION") {
		t.Fatalf("stale reads: result %s, failures %q; want Illegal reported", res.Result, rec.errs)
	}
	if fi, err := os.Stat(vis); err != nil || fi.Size() == 0 {
		t.Fatalf("visualization not written: %v", err)
	}
}

// lostWrites acknowledges some updates with a plausible new KeyValue but
// never applies them.
type lostWrites struct {
	store.Store
	mu  sync.Mutex
	rng *rand.Rand
}

func (s *lostWrites) Update(ctx context.Context, key string, value []byte, expectedRev int64) (store.KeyValue, error) {
	s.mu.Lock()
	drop := s.rng.IntN(6) == 0
	s.mu.Unlock()
	if !drop {
		return s.Store.Update(ctx, key, value, expectedRev)
	}
	cur, err := s.Store.Get(ctx, key)
	if err != nil || (expectedRev != 0 && expectedRev != cur.ModRevision) {
		return s.Store.Update(ctx, key, value, expectedRev) // the honest refusal
	}
	rev, err := s.Store.CurrentRevision(ctx)
	if err != nil {
		return store.KeyValue{}, err
	}
	return store.KeyValue{Key: key, Value: value, CreateRevision: cur.CreateRevision, ModRevision: rev + 1}, nil
}

func TestLinearizable_LostAcknowledgedWrite_Detected(t *testing.T) {
	s := &lostWrites{Store: openSQLite(t), rng: rand.New(rand.NewPCG(3, 4))}
	rec := &recorderT{TB: t}
	res := CheckLinearizable(rec, LinearizableConfig{Clients: []store.Store{s}, Workers: 6, Ops: 1500})
	if res.Result != porcupine.Illegal || !rec.captured("VIOLATION") {
		t.Fatalf("lost writes: result %s, failures %q; want Illegal reported", res.Result, rec.errs)
	}
}

// unknownOutcomes fails some writes without an answer: applied then timed
// out, refused as unavailable without applying, or timed out and applied
// a little later (a proposal still in flight).
type unknownOutcomes struct {
	store.Store
	mu   sync.Mutex
	rng  *rand.Rand
	late sync.WaitGroup
}

var errLinTimeout = fmt.Errorf("injected: %w", context.DeadlineExceeded)

// inject decides a write's fate: an injected error after applying it, before
// (or instead of) applying it, or nil for the caller to run it normally.
func (s *unknownOutcomes) inject(ctx context.Context, apply func(context.Context)) error {
	s.mu.Lock()
	p := s.rng.IntN(100)
	s.mu.Unlock()
	switch {
	case p < 4:
		apply(ctx)
		return errLinTimeout
	case p < 8:
		return fmt.Errorf("injected: %w", store.ErrUnavailable)
	case p < 12:
		s.late.Add(1)
		go func() {
			defer s.late.Done()
			time.Sleep(time.Duration(p%4) * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			apply(ctx)
		}()
		return errLinTimeout
	}
	return nil
}

func (s *unknownOutcomes) Create(ctx context.Context, key string, value []byte) (store.KeyValue, error) {
	if err := s.inject(ctx, func(ctx context.Context) { s.Store.Create(ctx, key, value) }); err != nil {
		return store.KeyValue{}, err
	}
	return s.Store.Create(ctx, key, value)
}

func (s *unknownOutcomes) Update(ctx context.Context, key string, value []byte, rev int64) (store.KeyValue, error) {
	if err := s.inject(ctx, func(ctx context.Context) { s.Store.Update(ctx, key, value, rev) }); err != nil {
		return store.KeyValue{}, err
	}
	return s.Store.Update(ctx, key, value, rev)
}

func (s *unknownOutcomes) Delete(ctx context.Context, key string, rev int64) (store.KeyValue, int64, error) {
	if err := s.inject(ctx, func(ctx context.Context) { s.Store.Delete(ctx, key, rev) }); err != nil {
		return store.KeyValue{}, 0, err
	}
	return s.Store.Delete(ctx, key, rev)
}

func TestLinearizable_UnknownOutcomes_Accepted(t *testing.T) {
	s := &unknownOutcomes{Store: openSQLite(t), rng: rand.New(rand.NewPCG(5, 6))}
	t.Cleanup(s.late.Wait) // before the store closes (cleanups run last-in first)
	res := CheckLinearizable(t, LinearizableConfig{Clients: []store.Store{s}, Workers: 6, Ops: 2500, Exclusive: true})
	if res.Result != porcupine.Ok || res.Unknown == 0 {
		t.Fatalf("result %s with %d unknown outcomes, want Ok with some", res.Result, res.Unknown)
	}
}

// The model on hand-made histories of one key "k", written at revisions > 1.
func TestLinearizable_Model_AcceptsContractRejectsViolations(t *testing.T) {
	const end = 1000 // return time of unknown writes
	create := func(v string) lzInput { return lzInput{Kind: lzCreate, Key: "k", Value: v} }
	update := func(v string, rev int64) lzInput { return lzInput{Kind: lzUpdate, Key: "k", Value: v, Expected: rev} }
	del := func(rev int64) lzInput { return lzInput{Kind: lzDelete, Key: "k", Expected: rev} }
	get := lzInput{Kind: lzGet, Key: "k"}
	kv := func(v string, c, m int64) lzOutput { return lzOutput{Value: v, CreateRev: c, ModRev: m} }
	gone := lzOutput{Outcome: lzNotFound}
	unknown := lzOutput{Outcome: lzUnknown}
	conflict := func(v string, c, m int64) lzOutput {
		return lzOutput{Outcome: lzConflict, Value: v, CreateRev: c, ModRev: m}
	}
	type step struct {
		call, ret int64
		in        lzInput
		out       lzOutput
	}
	tests := []struct {
		name  string
		steps []step
		want  porcupine.CheckResult
	}{
		{"create then read", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, get, kv("a", 5, 5)}}, porcupine.Ok},
		{"read of a value never written", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, get, kv("b", 5, 5)}}, porcupine.Illegal},
		{"stale read after an update", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, update("b", 5), kv("b", 5, 6)},
			{4, 5, get, kv("a", 5, 5)}}, porcupine.Illegal},
		{"read concurrent with an update sees either", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 5, update("b", 5), kv("b", 5, 6)},
			{3, 4, get, kv("a", 5, 5)}}, porcupine.Ok},
		{"CAS succeeds at a wrong revision", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, update("b", 4), kv("b", 5, 6)}}, porcupine.Illegal},
		{"CAS conflicts at the right revision", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, update("b", 5), conflict("a", 5, 5)}}, porcupine.Illegal},
		{"conflict returns the current state", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, update("b", 4), conflict("a", 5, 5)}}, porcupine.Ok},
		{"a key's revision goes back", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, update("b", 0), kv("b", 5, 4)}}, porcupine.Illegal},
		{"update changes CreateRevision", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, update("b", 0), kv("b", 6, 7)}}, porcupine.Illegal},
		{"recreate at the delete's revision", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, del(5), lzOutput{Value: "a", CreateRev: 5, ModRev: 5, DeleteRev: 6}},
			{4, 5, create("b"), kv("b", 6, 6)}}, porcupine.Illegal},
		{"read after delete finds the key", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, del(0), lzOutput{Value: "a", CreateRev: 5, ModRev: 5, DeleteRev: 6}},
			{4, 5, get, kv("a", 5, 5)}}, porcupine.Illegal},
		{"update of a present key not found", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, update("b", 0), gone}}, porcupine.Illegal},
		{"unknown create read later, revision learnt", []step{{0, end, create("a"), unknown}, {2, 3, get, gone}, {4, 5, get, kv("a", 7, 7)},
			{6, 7, get, kv("a", 7, 7)}}, porcupine.Ok},
		{"unknown create seen at two revisions", []step{{0, end, create("a"), unknown}, {4, 5, get, kv("a", 7, 7)}, {6, 7, get, kv("a", 7, 8)}}, porcupine.Illegal},
		{"unknown create never applied", []step{{0, end, create("a"), unknown}, {2, 3, get, gone}}, porcupine.Ok},
		{"unknown CAS on an unknown revision applied", []step{{0, end, create("a"), unknown}, {1, end, update("b", 9), unknown},
			{4, 5, get, kv("b", 9, 12)}}, porcupine.Ok},
		{"unknown CAS on an unknown revision refused", []step{{0, end, create("a"), unknown}, {1, end, update("b", 9), unknown},
			{4, 5, get, kv("a", 8, 8)}}, porcupine.Ok},
		{"unknown CAS applied at a revision it did not expect", []step{{0, end, create("a"), unknown}, {1, end, update("b", 9), unknown},
			{4, 5, get, kv("b", 8, 12)}}, porcupine.Illegal},
		{"unknown write then a read of an older value", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, end, update("b", 0), unknown},
			{3, 4, get, kv("b", 5, 9)}, {5, 6, get, kv("a", 5, 5)}}, porcupine.Illegal},
		{"acknowledged write after an unknown one", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, end, update("b", 0), unknown},
			{3, 4, get, kv("b", 5, 9)}, {5, 6, update("c", 9), kv("c", 5, 10)}, {7, 8, get, kv("c", 5, 10)}}, porcupine.Ok},
		// Through the Kubernetes API (NotReported): no CreateRevision, and a
		// delete reports neither the old state nor its revision.
		{"API: update then read, create revision unreported", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, update("b", 5), kv("b", NotReported, 6)},
			{4, 5, get, kv("b", NotReported, 6)}}, porcupine.Ok},
		{"API: stale read after an update", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, update("b", 5), kv("b", NotReported, 6)},
			{4, 5, get, kv("a", NotReported, 5)}}, porcupine.Illegal},
		{"API: read after an unreported delete finds the key", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, del(0), lzOutput{DeleteRev: NotReported}},
			{4, 5, get, kv("a", NotReported, 5)}}, porcupine.Illegal},
		{"API: unreported delete of an absent key", []step{{0, 1, get, gone}, {2, 3, del(0), lzOutput{DeleteRev: NotReported}}}, porcupine.Illegal},
		{"API: unreported delete then recreate", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, del(5), lzOutput{DeleteRev: NotReported}},
			{4, 5, get, gone}, {6, 7, create("b"), kv("b", 9, 9)}, {8, 9, get, kv("b", NotReported, 9)}}, porcupine.Ok},
		{"API: guarded delete at a wrong revision succeeds", []step{{0, 1, create("a"), kv("a", 5, 5)}, {2, 3, del(4), lzOutput{DeleteRev: NotReported}}}, porcupine.Illegal},
	}
	model := keyModel(1)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var history []porcupine.Operation
			for i, s := range tc.steps {
				history = append(history, porcupine.Operation{ClientId: i, Input: s.in, Call: s.call, Output: s.out, Return: s.ret})
			}
			if got := porcupine.CheckOperationsTimeout(model, history, 10*time.Second); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// The global revision checks on hand-made observations.
func TestLinearizable_RevisionChecks_RejectViolations(t *testing.T) {
	w := func(call, ret, rev int64) revObs {
		return revObs{Call: call, Return: ret, Rev: rev, Kind: obsWrite, Desc: "write"}
	}
	cur := func(call, ret, rev int64) revObs {
		return revObs{Call: call, Return: ret, Rev: rev, Kind: obsCurrent, Desc: "current"}
	}
	seen := func(call, ret, rev int64) revObs {
		return revObs{Call: call, Return: ret, Rev: rev, Kind: obsSeen, Desc: "seen"}
	}
	tests := []struct {
		name      string
		obs       []revObs
		unknown   int   // writes of unknown outcome
		took      int64 // revisions the run took (Exclusive)
		wantFails bool
	}{
		{"sequential writes in order", []revObs{w(0, 1, 2), w(2, 3, 3), cur(4, 5, 3)}, 0, 2, false},
		{"concurrent writes in any order", []revObs{w(0, 3, 3), w(1, 2, 2)}, 0, 2, false},
		{"later write gets a lower revision", []revObs{w(0, 1, 3), w(2, 3, 2)}, 0, 2, true},
		{"write below a revision read earlier", []revObs{w(0, 1, 2), seen(2, 3, 5), w(4, 5, 4)}, 3, 3, true},
		{"write below CurrentRevision returned earlier", []revObs{cur(0, 1, 5), w(2, 3, 5)}, 4, 4, true},
		{"CurrentRevision behind a returned write", []revObs{w(0, 1, 3), cur(2, 3, 2)}, 2, 2, true},
		{"CurrentRevision goes back", []revObs{cur(0, 1, 3), cur(2, 3, 2)}, 0, 0, true},
		{"two writes share a revision", []revObs{w(0, 3, 2), w(1, 2, 2)}, 0, 2, true},
		{"a failed write took a revision", []revObs{w(0, 1, 2), w(2, 3, 4)}, 0, 3, true},
		{"an unknown write took a revision", []revObs{w(0, 1, 2), w(2, 3, 4)}, 1, 3, false},
		{"an acknowledged write took none", []revObs{w(0, 1, 2), w(2, 3, 3)}, 0, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &lzRun{cfg: LinearizableConfig{Exclusive: true}, obs: tc.obs, unknown: make([]porcupine.Operation, tc.unknown)}
			rec := &recorderT{TB: t}
			var res LinearizableResult
			r.checkRevisions(rec, &res, 1, 1+tc.took)
			if rec.Failed() != tc.wantFails || (res.RevisionViolations > 0) != tc.wantFails {
				t.Fatalf("failures %q (%d violations), want failure %v", rec.errs, res.RevisionViolations, tc.wantFails)
			}
		})
	}
}
