// Package storetest is the conformance suite every store backend passes, and
// the benchmarks every backend is measured with. A backend's test calls
// Run(t, open) and, for the crash test, CrashChildMain(open) from TestMain.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"skiff/store"
)

// OpenFunc opens the store persisted in dir, creating it when dir is empty.
// The crash test calls it in a child process and again after killing it.
type OpenFunc func(ctx context.Context, dir string) (store.Store, error)

// Run runs the whole conformance suite against a backend.
func Run(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CRUD_RevisionsAndErrors", testCRUD},
		{"FailedWrites_TakeNoRevision", testFailedWritesTakeNoRevision},
		{"CompareAndSwap_RacingWriters_ExactlyOneWinsEachRound", testCASRace},
		{"List_PrefixLimitContinue", testListPaging},
		{"List_AtRevision_IsASnapshot", testListSnapshot},
		{"List_ContinueTokens_StayConsistentWhileWritesGoOn", testContinueUnderWrites},
		{"List_BadInput_ReturnsSentinels", testListBadInput},
		{"Watch_ConcurrentWriters_NoGapNoDuplicateInOrder", testWatchCompleteness},
		{"Watch_FromOldRevision_ReplaysHistory", testWatchReplay},
		{"Watch_DeleteEvents_CarryPreviousValue", testWatchDeletePrev},
		{"Watch_Prefix_FiltersOtherKeys", testWatchPrefix},
		{"Watch_EmptyPrefix_EveryRevisionIsOneEvent", testWatchEveryKey},
		{"Watch_Stop_ClosesChannel", testWatchStop},
		{"Compact_KeepsNewestValueOfEveryKey", testCompactKeepsNewest},
		{"Watch_FromCompactedRevision_ReturnsErrCompacted", testWatchCompacted},
		{"Reopen_KeepsDataAndRevisions", nil}, // needs open; run below
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fn == nil {
				testReopen(t, open)
				return
			}
			tc.fn(t, openTemp(t, open))
		})
	}
	t.Run("Crash_SIGKILLMidStorm_KeepsEveryAcknowledgedWrite", func(t *testing.T) {
		testCrash(t, open)
	})
}

func openTemp(t *testing.T, open OpenFunc) store.Store {
	t.Helper()
	s, err := open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, s store.Store, key, value string) store.KeyValue {
	t.Helper()
	kv, err := s.Create(ctxT(t), key, []byte(value))
	if err != nil {
		t.Fatalf("Create(%q): %v", key, err)
	}
	return kv
}

func mustRev(t *testing.T, s store.Store) int64 {
	t.Helper()
	rev, err := s.CurrentRevision(ctxT(t))
	if err != nil {
		t.Fatalf("CurrentRevision: %v", err)
	}
	return rev
}

func testCRUD(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	r0 := mustRev(t, s)
	a := mustCreate(t, s, "/a", "1")
	if a.ModRevision != r0+1 || a.CreateRevision != a.ModRevision || string(a.Value) != "1" {
		t.Fatalf("create: got %+v, want revisions %d", a, r0+1)
	}
	if got, err := s.Get(ctx, "/a"); err != nil || got.ModRevision != a.ModRevision || string(got.Value) != "1" {
		t.Fatalf("get after create: %+v, %v", got, err)
	}
	u, err := s.Update(ctx, "/a", []byte("2"), a.ModRevision)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if u.ModRevision != a.ModRevision+1 || u.CreateRevision != a.CreateRevision {
		t.Fatalf("update revisions: got %+v after %+v", u, a)
	}
	cur, err := s.Update(ctx, "/a", []byte("3"), a.ModRevision)
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: err %v, want ErrConflict", err)
	}
	if cur.ModRevision != u.ModRevision || string(cur.Value) != "2" {
		t.Fatalf("stale update should return current state %+v, got %+v", u, cur)
	}
	if _, err := s.Update(ctx, "/a", []byte("any"), 0); err != nil {
		t.Fatalf("unconditional update: %v", err)
	}
	prev, delRev, err := s.Delete(ctx, "/a", 0)
	if err != nil || string(prev.Value) != "any" || delRev != mustRev(t, s) {
		t.Fatalf("delete: prev %+v rev %d err %v", prev, delRev, err)
	}
	if _, err := s.Get(ctx, "/a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	again := mustCreate(t, s, "/a", "again")
	if again.CreateRevision != again.ModRevision || again.CreateRevision <= delRev {
		t.Fatalf("re-create should start a new incarnation: %+v after delete at %d", again, delRev)
	}

	errCases := []struct {
		name string
		do   func() error
		want error
	}{
		{"create existing", func() error { _, err := s.Create(ctx, "/a", nil); return err }, store.ErrExists},
		{"update missing", func() error { _, err := s.Update(ctx, "/nope", nil, 0); return err }, store.ErrNotFound},
		{"delete missing", func() error { _, _, err := s.Delete(ctx, "/nope", 0); return err }, store.ErrNotFound},
		{"delete stale", func() error { _, _, err := s.Delete(ctx, "/a", again.ModRevision-1); return err }, store.ErrConflict},
		{"get missing", func() error { _, err := s.Get(ctx, "/nope"); return err }, store.ErrNotFound},
		{"empty key", func() error { _, err := s.Create(ctx, "", nil); return err }, store.ErrInvalidKey},
	}
	for _, c := range errCases {
		if err := c.do(); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	if got, err := s.Get(ctx, "/a"); err != nil || string(got.Value) != "again" {
		t.Fatalf("failed writes must lose nothing: %+v, %v", got, err)
	}
}

func testFailedWritesTakeNoRevision(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	kv := mustCreate(t, s, "/k", "v")
	before := mustRev(t, s)
	s.Create(ctx, "/k", nil)
	s.Update(ctx, "/k", nil, kv.ModRevision+100)
	s.Delete(ctx, "/missing", 0)
	if after := mustRev(t, s); after != before {
		t.Fatalf("failed writes moved the revision from %d to %d", before, after)
	}
	if next := mustCreate(t, s, "/k2", "v"); next.ModRevision != before+1 {
		t.Fatalf("next write got revision %d, want %d", next.ModRevision, before+1)
	}
}

func testCASRace(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const racers, rounds = 16, 30
	mustCreate(t, s, "/cas", "0")
	for round := 0; round < rounds; round++ {
		cur, err := s.Get(ctx, "/cas")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wins := make(chan int, racers)
		start := make(chan struct{})
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := s.Update(ctx, "/cas", []byte(fmt.Sprintf("%d-%d", round, i)), cur.ModRevision)
				switch {
				case err == nil:
					wins <- i
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("racer %d: %v", i, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(wins)
		var winners []int
		for w := range wins {
			winners = append(winners, w)
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(winners), winners)
		}
		got, _ := s.Get(ctx, "/cas")
		if want := fmt.Sprintf("%d-%d", round, winners[0]); string(got.Value) != want {
			t.Fatalf("round %d: value %q, want the winner's %q", round, got.Value, want)
		}
	}
}

func keys(kvs []store.KeyValue) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Key
	}
	return out
}

func testListPaging(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for i := 0; i < 25; i++ {
		mustCreate(t, s, fmt.Sprintf("/p/%02d", i), fmt.Sprint(i))
	}
	mustCreate(t, s, "/p0", "outside")      // shares the prefix's bytes but not "/p/"
	mustCreate(t, s, "/o/x", "outside")     // sorts before
	mustCreate(t, s, "/q/x", "outside")     // sorts after
	s.Delete(ctx, "/p/03", 0)               // deleted keys are not listed
	s.Update(ctx, "/p/04", []byte("4b"), 0) // updated keys are listed once

	all, err := s.List(ctx, store.ListOptions{Prefix: "/p/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 24 || all.Continue != "" || all.Revision != mustRev(t, s) {
		t.Fatalf("list all: %d items, continue %q, rev %d: %v", len(all.Items), all.Continue, all.Revision, keys(all.Items))
	}
	for i := 1; i < len(all.Items); i++ {
		if all.Items[i-1].Key >= all.Items[i].Key {
			t.Fatalf("not in key order: %v", keys(all.Items))
		}
	}
	var paged []store.KeyValue
	opts := store.ListOptions{Prefix: "/p/", Limit: 10}
	for page := 0; ; page++ {
		res, err := s.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, res.Items...)
		if want := int64(24 - len(paged)); res.RemainingCount != want {
			t.Fatalf("page %d: remaining %d, want %d", page, res.RemainingCount, want)
		}
		if res.Continue == "" {
			break
		}
		if len(res.Items) != 10 {
			t.Fatalf("page %d has %d items", page, len(res.Items))
		}
		opts.Continue = res.Continue
	}
	if fmt.Sprint(keys(paged)) != fmt.Sprint(keys(all.Items)) {
		t.Fatalf("paged %v\nwant  %v", keys(paged), keys(all.Items))
	}
	everything, err := s.List(ctx, store.ListOptions{})
	if err != nil || len(everything.Items) != 27 {
		t.Fatalf("list of every key: %d items, %v", len(everything.Items), err)
	}
}

func testListSnapshot(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for i := 0; i < 5; i++ {
		mustCreate(t, s, fmt.Sprintf("/s/%d", i), "old")
	}
	snap := mustRev(t, s)
	s.Update(ctx, "/s/0", []byte("new"), 0)
	s.Delete(ctx, "/s/1", 0)
	mustCreate(t, s, "/s/9", "new")
	s.Delete(ctx, "/s/2", 0)
	mustCreate(t, s, "/s/2", "new")

	res, err := s.List(ctx, store.ListOptions{Prefix: "/s/", Revision: snap})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != snap {
		t.Fatalf("list at %d reports revision %d", snap, res.Revision)
	}
	var got []string
	for _, kv := range res.Items {
		got = append(got, kv.Key+"="+string(kv.Value))
	}
	want := "[/s/0=old /s/1=old /s/2=old /s/3=old /s/4=old]"
	if fmt.Sprint(got) != want {
		t.Fatalf("snapshot at %d: %v, want %s", snap, got, want)
	}
}

func testContinueUnderWrites(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for i := 0; i < 200; i++ {
		mustCreate(t, s, fmt.Sprintf("/c/%03d", i), "v0")
	}
	first, err := s.List(ctx, store.ListOptions{Prefix: "/c/", Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.List(ctx, store.ListOptions{Prefix: "/c/", Revision: first.Revision})
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // churn: updates, deletes and new keys everywhere in the range
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("/c/%03d", (i*37)%200)
			switch i % 3 {
			case 0:
				s.Update(ctx, k, []byte(fmt.Sprint("v", i)), 0)
			case 1:
				s.Delete(ctx, k, 0)
			default:
				s.Create(ctx, fmt.Sprintf("/c/%03d-new%d", (i*37)%200, i), nil)
			}
		}
	}()
	got := append([]store.KeyValue(nil), first.Items...)
	cont := first.Continue
	for cont != "" {
		res, err := s.List(ctx, store.ListOptions{Prefix: "/c/", Limit: 20, Continue: cont})
		if err != nil {
			close(stop)
			t.Fatal(err)
		}
		if res.Revision != first.Revision {
			t.Errorf("page at revision %d, first page at %d", res.Revision, first.Revision)
		}
		got = append(got, res.Items...)
		cont = res.Continue
		time.Sleep(2 * time.Millisecond) // let the churn interleave with paging
	}
	close(stop)
	wg.Wait()
	if len(got) != len(want.Items) {
		t.Fatalf("paged %d keys, snapshot has %d", len(got), len(want.Items))
	}
	for i := range got {
		if got[i].Key != want.Items[i].Key || string(got[i].Value) != string(want.Items[i].Value) || got[i].ModRevision != want.Items[i].ModRevision {
			t.Fatalf("item %d: %+v, snapshot has %+v", i, got[i], want.Items[i])
		}
	}
	if mustRev(t, s) == first.Revision {
		t.Fatal("the churn wrote nothing: the test proved nothing")
	}
}

func testListBadInput(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	mustCreate(t, s, "/b/1", "v")
	mustCreate(t, s, "/b/2", "v")
	cur := mustRev(t, s)
	cases := []struct {
		name string
		opts store.ListOptions
		want error
	}{
		{"future revision", store.ListOptions{Prefix: "/b/", Revision: cur + 10}, store.ErrFutureRevision},
		{"garbage continue", store.ListOptions{Prefix: "/b/", Continue: "%%%not-base64"}, store.ErrInvalidContinue},
		{"continue for another prefix", store.ListOptions{Prefix: "/zzz/", Continue: store.EncodeContinue(cur, "/b/2")}, store.ErrInvalidContinue},
	}
	for _, c := range cases {
		if _, err := s.List(ctx, c.opts); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
}

func testReopen(t *testing.T, open OpenFunc) {
	ctx := ctxT(t)
	dir := t.TempDir()
	s, err := open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	a := mustCreate(t, s, "/r/a", "1")
	mustCreate(t, s, "/r/b", "1")
	_, delRev, err := s.Delete(ctx, "/r/b", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, delRev); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "/r/a"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("get after close: %v, want ErrClosed", err)
	}
	s, err = open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The delete was the newest write and compaction removed its tombstone:
	// the revision must still not go backwards.
	if rev := mustRev(t, s); rev != delRev {
		t.Fatalf("revision after reopen %d, want %d", rev, delRev)
	}
	if c, _ := s.CompactedRevision(ctx); c != delRev {
		t.Fatalf("compacted revision after reopen %d, want %d", c, delRev)
	}
	if got, err := s.Get(ctx, "/r/a"); err != nil || got.ModRevision != a.ModRevision {
		t.Fatalf("get after reopen: %+v, %v", got, err)
	}
	if next := mustCreate(t, s, "/r/c", "1"); next.ModRevision != delRev+1 {
		t.Fatalf("first write after reopen got revision %d, want %d", next.ModRevision, delRev+1)
	}
}
