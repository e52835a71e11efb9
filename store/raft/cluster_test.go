package raft_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"skiff/store"
	"skiff/store/raft"
	"skiff/store/raft/rafttest"
	"skiff/store/sqlite"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dump is a member's whole state as a comparable string: the current
// revision, the compacted revision and every key with its revisions.
func dump(t testing.TB, ctx context.Context, s *raft.Store) string {
	t.Helper()
	res, err := s.List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	comp, _ := s.CompactedRevision(ctx)
	var b strings.Builder
	fmt.Fprintf(&b, "rev=%d compacted=%d\n", res.Revision, comp)
	for _, kv := range res.Items {
		fmt.Fprintf(&b, "%s c=%d m=%d %q\n", kv.Key, kv.CreateRevision, kv.ModRevision, kv.Value)
	}
	return b.String()
}

// waitSame waits until every running member's state is the same and
// returns it.
func waitSame(t testing.TB, ctx context.Context, c *rafttest.Cluster) string {
	t.Helper()
	for {
		var first string
		same := true
		for _, s := range c.Members {
			if s == nil {
				continue
			}
			d := dump(t, ctx, s)
			if first == "" {
				first = d
			} else if d != first {
				same = false
			}
		}
		if same {
			return first
		}
		select {
		case <-ctx.Done():
			for i, s := range c.Members {
				if s != nil {
					t.Logf("%s:\n%s", rafttest.ID(i), dump(t, context.Background(), s))
				}
			}
			t.Fatal("members did not converge")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func mustCreate(t testing.TB, ctx context.Context, s store.Store, key, value string) store.KeyValue {
	t.Helper()
	kv, err := s.Create(ctx, key, []byte(value))
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return kv
}

func TestFailover_LeaderClosed_OthersElectAndTheOldLeaderCatchesUp(t *testing.T) {
	ctx := ctxT(t, 90*time.Second)
	c := rafttest.NewCluster(t, 3)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustCreate(t, ctx, c.Members[(leader+i)%3], fmt.Sprintf("/f/before/%02d", i), "v")
	}
	other := (leader + 1) % 3
	killed := time.Now()
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	// One Create through a survivor: it waits (within ApplyTimeout) for
	// the election and is forwarded to the new leader or applied by it.
	var attempts int
	for {
		attempts++
		_, err := c.Members[other].Create(ctx, "/f/first-after", []byte("v"))
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("create after the leader died: %v", err)
		}
	}
	t.Logf("leader %s closed: first write through %s succeeded after %v (%d attempts)",
		rafttest.ID(leader), rafttest.ID(other), time.Since(killed).Round(time.Millisecond), attempts)
	for i := range 20 {
		mustCreate(t, ctx, c.Members[(other+i%2)%3], fmt.Sprintf("/f/after/%02d", i), "v")
	}
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	got := waitSame(t, ctx, c)
	if n := strings.Count(got, "/f/"); n != 41 {
		t.Fatalf("%d keys after the old leader caught up, want 41:\n%s", n, got)
	}
}

func TestPartition_IsolatedLeader_FailsWritesMajorityGoesOnAndHealedLeaderCatchesUp(t *testing.T) {
	ctx := ctxT(t, 90*time.Second)
	const applyTimeout = 2 * time.Second
	c := rafttest.NewCluster(t, 3, rafttest.Options{Config: func(i int, cfg *raft.Config) {
		cfg.ApplyTimeout = applyTimeout
	}})
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]int64{}
	for i := range 10 {
		kv := mustCreate(t, ctx, c.Members[(old+i)%3], fmt.Sprintf("/p/before/%02d", i), "v")
		acked[kv.Key] = kv.ModRevision
	}

	c.Isolate(old)
	t0 := time.Now()
	_, err = c.Members[old].Create(ctx, "/p/through-isolated", []byte("lost"))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write through the isolated leader: %v, want ErrUnavailable", err)
	}
	t.Logf("write through the isolated leader failed after %v (ApplyTimeout %v): %v", time.Since(t0).Round(time.Millisecond), applyTimeout, err)
	t0 = time.Now()
	if _, err := c.Members[old].Get(ctx, "/p/before/00"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("linearizable read through the isolated leader: %v, want ErrUnavailable", err)
	}
	t.Logf("read through the isolated leader failed after %v", time.Since(t0).Round(time.Millisecond))

	newLeader, err := c.WaitLeader(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new leader %s elected by the majority", rafttest.ID(newLeader))
	for i := range 20 {
		s := c.Members[newLeader]
		if i%2 == 1 {
			s = c.Members[3-old-newLeader] // the majority's follower
		}
		kv := mustCreate(t, ctx, s, fmt.Sprintf("/p/during/%02d", i), "v")
		acked[kv.Key] = kv.ModRevision
	}

	c.Heal(old)
	for {
		if id, _ := c.Members[old].Leader(); id != "" && id != rafttest.ID(old) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the healed old leader never followed the new leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	kv := mustCreate(t, ctx, c.Members[old], "/p/after-heal", "v")
	acked[kv.Key] = kv.ModRevision
	state := waitSame(t, ctx, c)

	// Every acknowledged write is there once, at its revision; the write
	// the isolated leader never committed is not.
	s := c.Members[old]
	for key, rev := range acked {
		got, err := s.Get(ctx, key)
		if err != nil || got.ModRevision != rev {
			t.Errorf("acknowledged %s@%d: got %+v, %v", key, rev, got, err)
		}
	}
	if strings.Contains(state, "/p/through-isolated") {
		t.Errorf("the write the isolated leader could not commit was applied:\n%s", state)
	}
	w, err := s.Watch(ctx, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cur, _ := s.CurrentRevision(ctx)
	seen := map[string]int{}
	for rev := int64(2); rev <= cur; rev++ {
		select {
		case ev := <-w.Events():
			if ev.Revision() != rev {
				t.Fatalf("event at revision %d, want %d", ev.Revision(), rev)
			}
			seen[ev.KV.Key]++
		case <-ctx.Done():
			t.Fatal("history replay stalled")
		}
	}
	for key := range acked {
		if seen[key] != 1 {
			t.Errorf("%s written %d times, want once", key, seen[key])
		}
	}
}

// snapshotOptions make snapshots frequent and the trailing log short, so
// that a member joining after a few hundred writes cannot be served from
// the log.
var snapshotOptions = rafttest.Options{Start: 1, Config: func(i int, cfg *raft.Config) {
	cfg.SnapshotThreshold = 64
	cfg.TrailingLogs = 16
	cfg.SnapshotInterval = 50 * time.Millisecond
}}

func snapshotsIn(t testing.TB, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			n++
		}
	}
	return n
}

func TestSnapshot_LateJoiner_GetsTheStateByInstallSnapshot(t *testing.T) {
	ctx := ctxT(t, 90*time.Second)
	c := rafttest.NewCluster(t, 3, snapshotOptions)
	for i := range 300 {
		kv := mustCreate(t, ctx, c.Members[0], fmt.Sprintf("/s/%03d", i), "v")
		if i%3 == 0 {
			if _, err := c.Members[0].Update(ctx, kv.Key, []byte("u"), kv.ModRevision); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := c.Members[0].Delete(ctx, "/s/000", 0); err != nil {
		t.Fatal(err)
	}
	for snapshotsIn(t, c.Dir(0)) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the leader took no snapshot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cur, _ := c.Members[0].CurrentRevision(ctx)
	if err := c.Members[0].Compact(ctx, cur-50); err != nil {
		t.Fatal(err)
	}
	// Enough entries after the compaction that the log is truncated past it.
	for i := range 100 {
		mustCreate(t, ctx, c.Members[0], fmt.Sprintf("/s/late/%03d", i), "v")
	}
	time.Sleep(300 * time.Millisecond) // a snapshot check or two

	for i := 1; i < 3; i++ {
		if err := c.Join(ctx, i); err != nil {
			t.Fatal(err)
		}
		if n := snapshotsIn(t, c.Dir(i)); n == 0 {
			t.Fatalf("%s joined without receiving a snapshot", rafttest.ID(i))
		}
	}
	state := waitSame(t, ctx, c)
	if !strings.Contains(state, fmt.Sprintf("compacted=%d", cur-50)) {
		t.Fatalf("compaction not carried over:\n%.200s", state)
	}
	// The joiners go on from the snapshot with the log.
	mustCreate(t, ctx, c.Members[2], "/s/after-join", "v")
	waitSame(t, ctx, c)
}

func TestBootstrap_ExistingStateDB_ReachesMembersThatJoinLater(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	dir := t.TempDir()
	// A single server's database, converted by a bootstrap.
	single, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, rafttest.ID(0), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		kv := mustCreate(t, ctx, single, fmt.Sprintf("/b/%02d", i), "single")
		if i%2 == 0 {
			single.Update(ctx, kv.Key, []byte("updated"), kv.ModRevision)
		}
	}
	want, err := single.List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	single.Close()

	c, err := rafttest.Start(ctx, dir, 3, rafttest.Options{Start: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 1; i < 3; i++ {
		if err := c.Join(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	state := waitSame(t, ctx, c)
	for _, kv := range want.Items {
		line := fmt.Sprintf("%s c=%d m=%d %q\n", kv.Key, kv.CreateRevision, kv.ModRevision, kv.Value)
		if !strings.Contains(state, line) {
			t.Fatalf("joined members lack %q:\n%s", line, state)
		}
	}
	if kv := mustCreate(t, ctx, c.Members[1], "/b/next", "v"); kv.ModRevision != want.Revision+1 {
		t.Fatalf("first write after the conversion at revision %d, want %d", kv.ModRevision, want.Revision+1)
	}
	// Restarting keeps it all (the replica is not restored needlessly, and
	// nothing is applied twice).
	c.Close()
	c, err = rafttest.Start(ctx, dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := waitSame(t, ctx, c); !strings.Contains(got, "/b/next") || strings.Count(got, "/b/") != 51 {
		t.Fatalf("after restart:\n%s", got)
	}
}

func TestResetCluster_OneMemberClusterKeepsEveryAppliedWrite(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c := rafttest.NewCluster(t, 3)
	for i := range 30 {
		mustCreate(t, ctx, c.Members[i%3], fmt.Sprintf("/r/%02d", i), "v")
	}
	want := waitSame(t, ctx, c)
	cfg, err := c.Config(1)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	if err := raft.ResetCluster(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := raft.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Ready(ctx) != nil {
		if ctx.Err() != nil {
			t.Fatal("the reset member never became ready")
		}
	}
	members, err := s.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0].ID != cfg.ID || !members[0].Leader || !members[0].Voter {
		t.Fatalf("members after reset: %+v", members)
	}
	if got := dump(t, ctx, s); got != want {
		t.Fatalf("state after reset:\n%s\nwant:\n%s", got, want)
	}
	rev, _ := s.CurrentRevision(ctx)
	if kv := mustCreate(t, ctx, s, "/r/after", "v"); kv.ModRevision != rev+1 {
		t.Fatalf("write after reset at %d, want %d", kv.ModRevision, rev+1)
	}
}

func TestRestoreSnapshot_BackupBecomesANewCluster(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c := rafttest.NewCluster(t, 3)
	for i := range 30 {
		mustCreate(t, ctx, c.Members[i%3], fmt.Sprintf("/k/%02d", i), "in-backup")
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := c.Members[2].Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	want, err := sqlite.ReadMeta(ctx, backup)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, ctx, c.Members[0], "/k/not-in-backup", "v")
	c.Close()

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stray"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := raft.RestoreSnapshot(ctx, filepath.Join(dir, rafttest.ID(0)), backup); err != nil {
		t.Fatal(err)
	}
	c2, err := rafttest.Start(ctx, dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	state := waitSame(t, ctx, c2)
	if strings.Count(state, "in-backup") != 30 || strings.Contains(state, "not-in-backup") ||
		!strings.HasPrefix(state, fmt.Sprintf("rev=%d ", want.Revision)) {
		t.Fatalf("restored state (backup at revision %d):\n%s", want.Revision, state)
	}
	if kv := mustCreate(t, ctx, c2.Members[1], "/k/new", "v"); kv.ModRevision != want.Revision+1 {
		t.Fatalf("first write at %d, want %d", kv.ModRevision, want.Revision+1)
	}
}

func TestMembership_AddVoterIsIdempotentAndRemoveShrinksTheCluster(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c := rafttest.NewCluster(t, 3)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	target, via := (leader+1)%3, (leader+2)%3 // both followers
	s := c.Members[via]
	before, err := s.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Again, through a follower: nothing changes.
	if err := s.AddVoter(ctx, rafttest.ID(target), c.Members[target].Addr()); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Members(ctx)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("idempotent AddVoter changed the members: %v -> %v", before, after)
	}
	addrOf := func(ms []raft.Member, id string) string {
		for _, m := range ms {
			if m.ID == id {
				return m.Address
			}
		}
		return ""
	}
	waitMembers := func(what string, check func([]raft.Member) bool) []raft.Member {
		for {
			ms, err := s.Members(ctx)
			if err == nil && check(ms) {
				return ms
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: members %+v %v", what, ms, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Same ID, another address: replaced.
	if err := s.AddVoter(ctx, rafttest.ID(target), "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	waitMembers("address replaced", func(ms []raft.Member) bool {
		return len(ms) == 3 && addrOf(ms, rafttest.ID(target)) == "127.0.0.1:1"
	})
	// The member puts its own address back (it still reaches the leader).
	waitMembers("address corrected", func(ms []raft.Member) bool {
		return addrOf(ms, rafttest.ID(target)) == c.Members[target].Addr()
	})
	if err := s.RemoveMember(ctx, rafttest.ID(target)); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveMember(ctx, rafttest.ID(target)); err != nil {
		t.Fatalf("removing a removed member: %v", err)
	}
	ms := waitMembers("removed", func(ms []raft.Member) bool { return len(ms) == 2 })
	leaders := 0
	for _, m := range ms {
		if m.Leader {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("members %+v: want one leader", ms)
	}
	c.Kill(target)
	mustCreate(t, ctx, s, "/m/two-members", "v")
}

func TestClose_StopsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := ctxT(t, 60*time.Second)
	c, err := rafttest.Start(ctx, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustCreate(t, ctx, c.Members[i%3], fmt.Sprintf("/g/%d", i), "v")
		c.Members[(i+1)%3].Get(ctx, fmt.Sprintf("/g/%d", i))
	}
	w, err := c.Members[1].Watch(ctx, "/g/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range w.Events() {
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
