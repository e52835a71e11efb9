package raft_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skiff/store"
	"skiff/store/raft"
	"skiff/store/raft/rafttest"
	"skiff/store/storetest"
)

// TestLinearizable_LeaderKilledAndIsolated_HistoryChecks runs the
// porcupine checker against a three-member cluster, one client per member,
// while a nemesis alternately kills the leader (then restarts it from its
// data) and cuts the leader off from the others (then heals it): stale
// reads from a deposed leader, lost acknowledged writes and revisions
// reused or going back are violations. make test runs a short history;
// SKIFF_LONG=1 runs 20,000 operations.
func TestLinearizable_LeaderKilledAndIsolated_HistoryChecks(t *testing.T) {
	ops, rounds := 1500, 2
	if os.Getenv("SKIFF_LONG") != "" {
		ops, rounds = 20000, 1000
	}
	c := rafttest.NewCluster(t, 3, rafttest.Options{Config: func(i int, cfg *raft.Config) {
		cfg.HeartbeatTimeout = 300 * time.Millisecond
		cfg.ElectionTimeout = 300 * time.Millisecond
		cfg.LeaderLeaseTimeout = 150 * time.Millisecond
		cfg.ApplyTimeout = 2 * time.Second
	}})
	clients := []store.Store{c.Follow(0), c.Follow(1), c.Follow(2)}
	var faults []string
	nemesis := func(ctx context.Context) {
		pause := func(d time.Duration) bool {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(d):
				return true
			}
		}
		for round := 0; round < rounds && pause(400*time.Millisecond); round++ {
			victim := c.Leader()
			if victim < 0 {
				continue
			}
			if round%2 == 0 {
				faults = append(faults, "kill "+rafttest.ID(victim))
				if err := c.Kill(victim); err != nil {
					t.Errorf("kill %s: %v", rafttest.ID(victim), err)
				}
				pause(time.Second)
				rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := c.Restart(rctx, victim); err != nil {
					t.Errorf("restart %s: %v", rafttest.ID(victim), err)
				}
				cancel()
			} else {
				faults = append(faults, "isolate "+rafttest.ID(victim))
				c.Isolate(victim)
				pause(time.Second)
				c.Heal(victim)
			}
		}
		// Leave the cluster whole and led for the final revision read.
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.WaitLeader(wctx); err != nil {
			t.Errorf("after the nemesis: %v", err)
		}
	}
	res := storetest.CheckLinearizable(t, storetest.LinearizableConfig{
		Clients:   clients,
		Workers:   6,
		Ops:       ops,
		Timeout:   3 * time.Second,
		Exclusive: true,
		Nemesis:   nemesis,
		Visualize: filepath.Join(t.TempDir(), "raft-linearizable.html"),
	})
	t.Logf("faults injected: %v", faults)
	if res.Ok == 0 {
		t.Fatalf("no operation succeeded: %+v", res)
	}
}
